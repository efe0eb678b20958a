"""`scalestack crit`: the criticality stack of a trace."""

from __future__ import annotations

import click

from scalestack.commands._analysis_options import analysis_options, load_between


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", help="Write the figure (.png/.svg) or data (.json) here.")
@analysis_options
def command(path, as_json, output, active, between):
    """Each thread's share of the run time: every instant divided among the threads running then."""
    from scalestack.analysis.criticality import criticality
    from scalestack.trace.aggregate import load_if_aggregate

    rec = load_if_aggregate(path, active, between)  # `record --aggregate` counters
    if rec is not None:
        return _emit(criticality(rec), as_json, output, "criticality")
    trace, between = load_between(path, between)
    res = criticality(trace, active=active, between=between)
    _emit(res, as_json, output, "criticality")


def _emit(res, as_json, output, kind):
    from scalestack.commands._output import emit

    emit(res, as_json, output, kind)
