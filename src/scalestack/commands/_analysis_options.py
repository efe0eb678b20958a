"""Options shared by the commands that analyse a trace (report, crit, bottle), and how crit, bottle,
info, whatif, advise and report read a stored trace whole or in time chunks."""

from __future__ import annotations

import click

from scalestack.errors import UserError
from scalestack.units import format_ns, parse_time_ns


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
    from scalestack.trace.store import load

    start, window = _stored_window(path, between)
    if start is None and between:  # a trace from before its meta held the start: read it whole
        trace = load(path)
        return trace, between_ns(trace, between)
    return load(path, window=window), window


def _stored_window(path, between):
    """The stored trace's start (None when its meta lacks it) and --between in absolute ns (None
    without --between or without the start)."""
    from scalestack.trace.store import read_meta

    meta = read_meta(path)
    start = meta.get("start_ns")
    if not between or start is None:
        return start, None
    t0, t1 = (parse_time_ns(between[0], int(start), what="--between start"),
              parse_time_ns(between[1], int(start), what="--between end"))
    if t1 <= t0:
        raise UserError(f"--between {between[0]} {between[1]}: the end is not after the start")
    end = meta.get("end_ns")
    if end is not None and (t0 >= int(end) or t1 <= int(start)):
        raise UserError(f"--between {between[0]} {between[1]} is outside the trace, which runs "
                        f"{format_ns(int(end) - int(start))} (times count from its start, e.g. 0s 1ms)")
    return start, (t0, t1)


def chunk_option(fn):
    return click.option("--chunk-rows", type=click.IntRange(min=0), default=None, metavar="N",
                        help="Read a trace of more than N state rows and switch spans in time chunks of about N "
                             "(memory follows N, not the trace) [default: 4194304; 0: always whole].")(fn)


def analyse_stored(path, between, chunk_rows, whole, in_chunks):
    """What a crit/bottle/info command computes from `path`: `in_chunks(path, window, max_rows,
    progress)` over time chunks (`analysis.chunked`, with a progress bar) for a trace of more
    rows than `chunk_rows` (default `chunked.CHUNK_ROWS`; 0: never), else `whole(trace, window)`
    of the trace as `load_between` reads it. `window`: --between in absolute ns (None: all)."""
    start, window = _stored_window(path, between)
    limit = _limit(path, chunk_rows, start)
    if limit:
        with chunk_progress(path) as progress:
            return in_chunks(path, window, limit, progress)
    return whole(*load_between(path, between))


def chunk_limit(path, chunk_rows) -> int | None:
    """The chunk size (rows) to read `path` with, or None to read it whole: a trace of no more
    rows than `chunk_rows` (default `chunked.CHUNK_ROWS`; 0: never chunk), or one whose meta lacks
    its time range (older files)."""
    return _limit(path, chunk_rows, _stored_window(path, None)[0])


def _limit(path, chunk_rows, start) -> int | None:
    """`chunk_limit`, the trace's start (None: its meta lacks it) already read."""
    from scalestack.analysis.chunked import CHUNK_ROWS, stored_rows

    limit = CHUNK_ROWS if chunk_rows is None else chunk_rows
    return limit if limit > 0 and start is not None and stored_rows(path) > limit else None


def chunk_progress(path):
    """A transient progress bar for a chunked analysis (on stderr), as a context manager giving
    the `progress(done, total, what=None)` callback (`what`: the pass, when there are several)."""
    import contextlib
    import os

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    @contextlib.contextmanager
    def bar():
        with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), transient=True, console=Console(stderr=True)) as p:
            name = f"chunks of {os.path.basename(path)}"
            task = p.add_task(name, total=None)

            def update(done, total, what=None):
                p.update(task, completed=done, total=total, description=f"{what}: {name}" if what else name)

            yield update

    return bar()
