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


def chunk_option(fn):
    return click.option("--chunk-rows", type=click.IntRange(min=0), default=None, metavar="N",
                        help="Read a trace of more than N state rows and switch spans in time chunks of about N "
                             "(memory follows N, not the trace) [default: 4194304; 0: always whole].")(fn)


def stored_source(path, between, chunk_rows):
    """How a crit/bottle command reads `path`: (None, window) where it should go in chunks
    (`analysis.chunked`: a trace of more rows than `chunk_rows`), else (trace, window) as
    `load_between` gives them. `window` is --between in absolute ns (None: the whole run)."""
    from scalestack.analysis.chunked import CHUNK_ROWS, stored_rows
    from scalestack.trace.store import read_meta

    limit = CHUNK_ROWS if chunk_rows is None else chunk_rows
    start = read_meta(path).get("start_ns")
    if limit > 0 and start is not None and stored_rows(path) > limit:
        window = None if not between else (parse_time_ns(between[0], int(start), what="--between start"),
                                           parse_time_ns(between[1], int(start), what="--between end"))
        return None, window
    return load_between(path, between)


def chunk_progress(path):
    """A transient progress bar for a chunked analysis (on stderr), as a context manager giving
    the `progress(done, total)` callback."""
    import contextlib
    import os

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    @contextlib.contextmanager
    def bar():
        with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), transient=True, console=Console(stderr=True)) as p:
            task = p.add_task(f"chunks of {os.path.basename(path)}", total=None)
            yield lambda done, total: p.update(task, completed=done, total=total)

    return bar()
