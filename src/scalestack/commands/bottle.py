"""`scalestack bottle`: the bottle graph of a trace."""

from __future__ import annotations

import click

from scalestack.commands._analysis_options import analyse_stored, analysis_options, chunk_option


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", help="Write the figure (.png/.svg) or data (.json) here.")
@click.option("--group-by", metavar="role|REGEX=LABEL,...", help="Group threads into boxes by role or name pattern.")
@click.option("--window", metavar="DURATION", help="One bottle graph per window, e.g. 500ms.")
@analysis_options
@chunk_option
def command(path, as_json, output, group_by, window, active, between, chunk_rows):
    """Boxes: height = criticality, width = parallelism, area = running time."""
    from scalestack.analysis.bottle import bottle
    from scalestack.commands._output import emit
    from scalestack.trace.aggregate import load_if_aggregate
    from scalestack.units import parse_duration_ns

    rec = load_if_aggregate(path, active, between)  # `record --aggregate` counters
    if rec is not None:
        w = parse_duration_ns(window, what="--window") if window is not None else None
        return emit(bottle(rec, group_by=group_by, window=w), as_json, output, "bottle")
    from scalestack.analysis import chunked

    res = analyse_stored(path, between, chunk_rows,
                         lambda trace, at: bottle(trace, group_by=group_by, active=active, between=at, window=window),
                         lambda p, at, rows, progress: chunked.bottle(p, group_by=group_by, active=active, between=at,
                                                                      window=window, max_rows=rows, progress=progress))
    emit(res, as_json, output, "bottle")
