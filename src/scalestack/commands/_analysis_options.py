"""Options shared by the commands that analyse a trace (report, crit, bottle)."""

from __future__ import annotations

import click

from scalestack.units import parse_time_ns


def analysis_options(fn):
    fn = click.option("--active", type=click.Choice(["running", "running+runnable"]), default="running",
                      show_default=True, help="What counts as active; running+runnable shows demand parallelism.")(fn)
    fn = click.option("--between", nargs=2, metavar="T0 T1",
                      help="Only this part of the run: times from its start (1.5s, 200ms) or absolute ns.")(fn)
    return fn


def between_ns(trace, between):
    if not between:
        return None
    return parse_time_ns(between[0], trace.start_ns, what="--between start"), \
        parse_time_ns(between[1], trace.start_ns, what="--between end")


def load_between(path, between):
    """The trace at `path`, and --between's (t0, t1) in ns (None: the whole run). With a window only
    the rows that may overlap it are read (`scalestack.trace.store.load`): a part of a big trace
    loads in the memory the part needs."""
    from scalestack.trace.store import load, read_meta

    if not between:
        return load(path), None
    start = read_meta(path).get("start_ns")
    if start is None:  # a trace from before its meta held the start: read it whole
        trace = load(path)
        return trace, between_ns(trace, between)
    window = (parse_time_ns(between[0], int(start), what="--between start"),
              parse_time_ns(between[1], int(start), what="--between end"))
    return load(path, window=window), window
