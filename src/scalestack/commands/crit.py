"""`scalestack crit`: the criticality stack of a trace."""

from __future__ import annotations

import click

from scalestack.commands._analysis_options import analyse_stored, analysis_options, chunk_option


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", help="Write the figure (.png/.svg) or data (.json) here.")
@analysis_options
@chunk_option
def command(path, as_json, output, active, between, chunk_rows):
    """Each thread's share of the run time: every instant divided among the threads running then."""
    from scalestack.analysis.criticality import criticality
    from scalestack.trace.aggregate import load_if_aggregate

    rec = load_if_aggregate(path, active, between)  # `record --aggregate` counters
    if rec is not None:
        return _emit(criticality(rec), as_json, output, "criticality")
    from scalestack.analysis import chunked

    res = analyse_stored(path, between, chunk_rows,
                         lambda trace, window: criticality(trace, active=active, between=window),
                         lambda p, window, rows, progress: chunked.criticality(p, active=active, between=window,
                                                                               max_rows=rows, progress=progress))
    _emit(res, as_json, output, "criticality")


def _emit(res, as_json, output, kind):
    from scalestack.commands._output import emit

    emit(res, as_json, output, kind)
