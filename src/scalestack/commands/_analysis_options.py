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
