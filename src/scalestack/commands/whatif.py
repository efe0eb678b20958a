"""`scalestack whatif`: predicted speedup when one thread runs faster, from a trace alone."""

from __future__ import annotations

import click

from scalestack.commands._analysis_options import analyse_stored, chunk_option


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--accelerate", type=int, required=True, help="Thread tid to accelerate.")
@click.option("--factor", type=float, default=2.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@chunk_option
def command(path, accelerate, factor, as_json, chunk_rows):
    """Criticality-based, per-phase and dependency-replay predictions of the program speedup."""
    import json

    def whole(trace, _window):
        from scalestack.analysis.phase_criticality import phase_criticality
        from scalestack.analysis.whatif import whatif

        res = whatif(trace, accelerate, factor)
        # per-phase criticality, gain capped at the lead over the phase's next thread (docs/criticality-validation.md)
        return res, phase_criticality(trace, factor=factor) if factor > 1 else None

    def in_chunks(path, _window, max_rows, progress):
        from scalestack.analysis import chunked_advice

        if factor > 1:
            return chunked_advice.whatif_and_phases(path, accelerate, factor, max_rows=max_rows, progress=progress)
        return chunked_advice.whatif(path, accelerate, factor, max_rows=max_rows, progress=progress), None

    res, phase = analyse_stored(path, None, chunk_rows, whole, in_chunks)
    phase_speedup = float(phase.predicted_speedup[list(map(int, phase.tids)).index(accelerate)]) if phase else None
    if as_json:
        click.echo(json.dumps({**json.loads(res.to_json()), "phase_speedup": phase_speedup}, indent=2))
        return
    click.echo(f"runtime                {res.runtime_ns} ns")
    click.echo(f"criticality estimate   {res.crit_speedup:.4f}x")
    if phase_speedup is not None:
        click.echo(f"per-phase estimate     {phase_speedup:.4f}x  (most gain: tid {phase.best_tid})")
    click.echo(f"dependency replay      {res.replay_speedup:.4f}x")
    click.echo(f"blocked time with no known waker: {100 * res.unknown_waker_share:.1f}%")
