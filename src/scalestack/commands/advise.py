"""`scalestack advise`: ranked, plain-language suggestions from a trace."""

from __future__ import annotations

import click

from scalestack.commands._analysis_options import analyse_stored, chunk_option


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--factor", type=float, default=2.0, show_default=True,
              help="How much faster a critical thread is assumed to become in the what-if predictions.")
@click.option("--sweep", "sweep_dir", help="A sweep directory ('scalestack scale -o DIR'): add what the speedup "
              "stack of its largest thread count loses most.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@chunk_option
def command(path, factor, sweep_dir, as_json, chunk_rows):
    """What limits the program most, what to do about it, and what it would gain."""
    from scalestack.analysis import chunked_advice
    from scalestack.analysis.advice import advise
    from scalestack.errors import UserError

    if factor <= 1:
        raise UserError(f"--factor {factor} must be above 1 (a thread made faster)")
    sweep = None
    if sweep_dir:
        from scalestack.collect.sweep import load_sweep

        sweep = load_sweep(sweep_dir)
    res = analyse_stored(path, None, chunk_rows, lambda trace, _window: advise(trace, factor, sweep=sweep),
                         lambda path, _window, max_rows, progress: chunked_advice.advise(
                             path, factor, sweep=sweep, max_rows=max_rows, progress=progress))
    click.echo(res.to_json() if as_json else res.text())
