"""`scalestack report`: every analysis of a trace as tables, figures, report.html and report.json."""

from __future__ import annotations

import os

import click

import scalestack
from scalestack.commands._analysis_options import (
    analysis_options,
    chunk_limit,
    chunk_option,
    chunk_progress,
    load_between,
)


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("-o", "--output", "out_dir", help="Directory to write (default: TRACE's name + -report).")
@click.option("--window", metavar="DURATION", help="Also a bottle graph per window, e.g. 500ms.")
@click.option("--group-by", metavar="role|REGEX=LABEL,...", help="Group threads into boxes by role or name pattern.")
@click.option("--baseline", metavar="TRACE", help="Also compare with this earlier recording (as `scalestack compare`).")
@analysis_options
@click.option("--no-timeline", is_flag=True, help="Leave the interactive timeline out of report.html (a smaller page).")
@click.option("-q", "--quiet", is_flag=True, help="Write the files only; print nothing.")
@chunk_option
def command(path, out_dir, window, group_by, baseline, active, between, no_timeline, quiet, chunk_rows):
    """Write report.html (self-contained), report.json and PNG/SVG figures; print the tables.

    A trace too big to hold is read in time chunks (--chunk-rows), unless --between or --baseline
    is given or it holds code samples: then the part asked for is read whole."""
    from scalestack.report import ReportOptions, build_report
    from scalestack.report.source import StoredTrace, needs_whole
    from scalestack.trace.aggregate import is_aggregate
    from scalestack.units import parse_duration_ns

    if is_aggregate(path):  # `record --aggregate`: per-window counters, not a trace
        if baseline:
            from scalestack.errors import UserError

            raise UserError("--baseline compares two traces; an aggregate recording has no per-thread states to match")
        from scalestack.report.aggregate import build_report as build_aggregate_report
        from scalestack.trace.aggregate import load_if_aggregate

        rec = load_if_aggregate(path, active, between)
        report = build_aggregate_report(rec, parse_duration_ns(window, what="--window")
                                        if window is not None else None, group_by)
        _write(report, path, out_dir, quiet)
        return
    if window is not None:
        window = parse_duration_ns(window, what="--window")
    limit = None if between or baseline else chunk_limit(path, chunk_rows)
    if limit and not needs_whole(path):
        options = ReportOptions(window=window, group_by=group_by, active=active, timeline=not no_timeline)
        with chunk_progress(path) as progress:
            source = StoredTrace(path, limit, progress)
            report = build_report(source, options)
        _write(report, path, out_dir, quiet)
        return
    trace, between = load_between(path, between)
    options = ReportOptions(window=window, group_by=group_by, active=active, between=between,
                            timeline=not no_timeline)
    report = build_report(trace, options)
    if baseline:
        from scalestack.analysis.compare import compare
        from scalestack.report.compare_section import compare_section

        part = trace.between(*options.between) if options.between is not None else trace
        report.sections.insert(0, compare_section(compare(scalestack.load(baseline), part, labels=(baseline, path))))
    from scalestack.analysis.criticality import forget

    forget(trace)  # every analysis is done: the shared sweeps need not stay while the files are rendered
    _write(report, path, out_dir, quiet)


def _write(report, path, out_dir, quiet) -> None:
    from scalestack.report import write_report
    from scalestack.report.terminal import print_report

    out_dir = out_dir or os.path.splitext(path)[0] + "-report"
    written = write_report(report, out_dir)
    if not quiet:
        print_report(report)
        click.echo(f"\nscalestack: wrote {len(written)} files to {out_dir}/ (open {written['report.html']})", err=True)
