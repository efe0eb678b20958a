"""`scalestack whatif`: predicted speedup when one thread runs faster, from a trace alone."""

from __future__ import annotations

import click


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--accelerate", type=int, required=True, help="Thread tid to accelerate.")
@click.option("--factor", type=float, default=2.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(path, accelerate, factor, as_json):
    """Criticality-based and dependency-replay predictions of the program speedup."""
    import scalestack
    from scalestack.analysis.whatif import whatif

    res = whatif(scalestack.load(path), accelerate, factor)
    if as_json:
        click.echo(res.to_json())
        return
    click.echo(f"runtime                {res.runtime_ns} ns")
    click.echo(f"criticality estimate   {res.crit_speedup:.4f}x")
    click.echo(f"dependency replay      {res.replay_speedup:.4f}x")
    click.echo(f"blocked time with no known waker: {100 * res.unknown_waker_share:.1f}%")
