"""Criticality stacks and bottle graphs of a stored trace, read one time chunk at a time.

Both are sums over time: C_j = ∫ [j active] / r(t) dt, Run_j and the idle time add up over any
cut of the run into windows, since r(t) at an instant depends only on that instant. So a trace
too big to hold is read window by window (`store.load(path, window=...)` reads only the Parquet
row groups that overlap), each window's sums are computed as for a whole trace, and added. The
windows are planned from the row groups' time statistics, before any row is read, so that each
holds about `max_rows` rows of states and switch spans: memory follows the chunk, not the trace.

The results equal the whole trace's: Run_j and idle exactly (sums of integer ns), C_j to the
rounding of the float sums it is made of (each window's F(t) restarts at 0, which if anything
loses less).

`time_in_states` is a sum too, of each state row's whole duration: each window counts the rows
that start in it, so the result is the whole trace's bit for bit.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from scalestack.analysis.bottle import (
    BottleResult,
    WindowedBottleResult,
    _boxes,
    group_threads,
    window_count,
)
from scalestack.analysis.bottle import bottle as _bottle
from scalestack.analysis.criticality import ACTIVE, CriticalityResult, _criticality, clip_span
from scalestack.errors import UserError
from scalestack.trace import NameTable, State, ThreadTable, Trace
from scalestack.trace.lookup import state_sums
from scalestack.trace.store import group_ranges, load, load_states, load_threads, read_meta
from scalestack.units import parse_duration_ns

CHUNK_ROWS = 1 << 22  # rows of states and switch spans a chunk holds (~4 M: ~0.3 GB with the sweep)

Progress = Callable[[int, int], None]  # (chunks done, chunks)


def stored_rows(path: str | os.PathLike) -> int:
    """Rows of states and switch spans in a trace file (what a whole load holds), read from its
    Parquet footers alone."""
    return int(sum(int(group_ranges(path, m)[0].sum()) for m in ("states", "switch_spans")))


def plan(path: str | os.PathLike, t0: int, t1: int, max_rows: int = CHUNK_ROWS,
         grid: int | None = None, members: tuple[str, ...] = ("states", "switch_spans")) -> list[tuple[int, int]]:
    """Consecutive windows [a, b) tiling [t0, t1), each overlapping row groups of at most `max_rows`
    rows in all, or no more than twice what the shortest window there would (a window is never
    shorter than the gap between two group edges, or one `grid` step). With `grid` (ns), every inner edge is t0 plus a multiple of it (so
    that per-window bottle graphs fall on the same windows as the whole trace's). `members`: the
    tables whose rows a window will read."""
    parts = [group_ranges(path, m) for m in members]
    rows, lo, hi = (np.concatenate([p[i] for p in parts]) for i in range(3))
    if grid is not None:
        cand = t0 + grid * np.arange(1, -(-(t1 - t0) // grid), dtype=np.int64)
    else:
        cand = np.unique(np.concatenate([lo, hi]))
    cand = np.r_[cand[(cand > t0) & (cand < t1)], t1].astype(np.int64)
    out = []
    a = t0
    while a < t1:
        ts = cand[np.searchsorted(cand, a, side="right"):]
        live = hi > a  # groups ending after a: those with lo < b overlap [a, b)
        order = np.argsort(lo[live], kind="stable")
        starts, weight = lo[live][order], np.cumsum(rows[live][order])
        held = np.searchsorted(starts, ts, side="left")  # groups starting before each candidate end
        # no group left (a trace without rows, or whose meta's range outlasts its rows): one window
        w = np.where(held > 0, weight[np.maximum(held - 1, 0)], 0) if len(weight) else np.zeros(len(ts), np.int64)
        # groups the shortest window already overlaps are read anyway: the window may grow while it
        # overlaps no more than twice as many rows (else, with one group a thread already over
        # max_rows, every window would end at the next group's edge: 282 loads of 10^8 rows), or
        # max_rows
        fits = np.flatnonzero(w <= max(max_rows, 2 * int(w[0])))
        b = int(ts[fits[-1]])
        out.append((a, b))
        a = b
    return out


def _span(path, between) -> tuple[int, int]:
    return clip_span(*_stored_range(path, read_meta(path)), between)


def _stored_range(path, meta: dict) -> tuple[int, int]:
    """The trace's [start, end) from its meta; one line if the meta lacks it (older files)."""
    if "start_ns" not in meta or "end_ns" not in meta:
        raise UserError(f"{path} does not give its time range; read it whole (scalestack.load)")
    return int(meta["start_ns"]), int(meta["end_ns"])


def _chunks(path, windows, progress: Progress | None):
    """(k, a, b, part) for each window k, [a, b), with the part of the trace that overlaps it (or
    begins at its end); the first part from the beginning of time and the last to its end, so that
    a row outside the trace's range (none in a valid trace) is read once too, as the whole trace
    reads it. The C heap is trimmed between windows: glibc serves a chunk's arrays
    (< 32 MB each) from its heap and keeps them when freed, so without it the process grew by a
    chunk's worth every few windows (to 0.9 GB for 4 M rows). Callers take the index from here, not
    from `enumerate`: enumerate's result tuple keeps the last chunk alive while the next one loads
    (two chunks held: +135 MB for chunks of 4 M rows)."""
    lowest, highest = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    for k, (a, b) in enumerate(windows):
        _trim()
        # and the rows that begin at b: what follows a row ending there
        yield k, a, b, load(path, window=(lowest if k == 0 else a, highest if k == len(windows) - 1 else b + 1))
        if progress is not None:
            progress(k + 1, len(windows))


def _trim() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator gives memory back by itself, or not at all
        pass


def _sums(path, active: str, between, max_rows: int, progress: Progress | None, also: Callable | None = None
          ) -> tuple[CriticalityResult, ThreadTable]:
    """The criticality stack's sums over the chunks; `also(k, n, a, b, part)` is called with each
    chunk k of n (window [a, b)) too, so that another analysis reads the trace in the same pass."""
    if active not in ACTIVE:
        raise UserError(f"active must be one of {', '.join(ACTIVE)}, not {active!r}")
    t0, t1 = _span(path, between)
    spans = int(group_ranges(path, "switch_spans")[0].sum()) > 0  # decided for the whole file, not per chunk
    crit = run = None
    idle = 0.0
    windows = plan(path, t0, t1, max_rows)
    for k, a, b, part in _chunks(path, windows, progress):
        res = _criticality(part, active, a, b, spans)
        crit = res.criticality_ns if crit is None else crit + res.criticality_ns
        run = res.running_ns if run is None else run + res.running_ns
        idle += res.idle_ns
        if also is not None:
            also(k, len(windows), a, b, part)
        th = part.threads  # every chunk has the whole thread table
        del part, res  # before the next chunk loads: one chunk at a time
    return CriticalityResult(tids=th.tid.copy(), names=th.name.copy(), roles=th.role.copy(), criticality_ns=crit,
                             running_ns=run, idle_ns=idle, span_ns=t1 - t0, active=active, t0_ns=t0), th


def criticality(path: str | os.PathLike, *, active: str = "running", between: tuple[int, int] | None = None,
                max_rows: int = CHUNK_ROWS, progress: Progress | None = None) -> CriticalityResult:
    """`analysis.criticality.criticality` of the trace stored at `path`, in chunks of about
    `max_rows` rows (`between`: absolute ns, as there)."""
    return _sums(path, active, between, max_rows, progress)[0]


def bottle(path: str | os.PathLike, *, group_by=None, active: str = "running", between: tuple[int, int] | None = None,
           window: int | str | None = None, max_rows: int = CHUNK_ROWS,
           progress: Progress | None = None) -> BottleResult | WindowedBottleResult:
    """`analysis.bottle.bottle` of the trace stored at `path`, in chunks of about `max_rows` rows;
    with `window`, the chunks' edges fall on the windows' edges and their windows are joined."""
    if window is None:
        return bottle_of(*_sums(path, active, between, max_rows, progress), group_by)
    w = parse_duration_ns(window, what="--window")
    t0, t1 = _span(path, between)
    window_count(t0, t1, w)  # (one line for a window too small, before any chunk is planned)
    windows = []
    for _, a, b, part in _chunks(path, plan(path, t0, t1, max_rows, grid=w), progress):
        windows.extend(_bottle(part, group_by=group_by, active=active, between=(a, b), window=w).windows)
        del part
    return WindowedBottleResult(w, tuple(windows))


def bottle_of(res: CriticalityResult, th: ThreadTable, group_by=None) -> BottleResult:
    """The bottle graph of a criticality stack's sums (`_sums`'s result): its boxes need no other
    pass over the trace."""
    group, labels, roles = group_threads(th.tid.tolist(), th.name.tolist(), th.role.tolist(), group_by)
    return BottleResult(_boxes(res.criticality_ns, res.running_ns, group, labels, roles, th.tid),
                        res.idle_ns, res.span_ns, res.t0_ns, res.active)


def time_in_states(path: str | os.PathLike, *, max_rows: int = CHUNK_ROWS,
                   progress: Progress | None = None) -> tuple[ThreadTable, np.ndarray]:
    """The thread table and `Trace.time_in_states()` of the trace stored at `path` (rows as the
    table's), reading about `max_rows` state rows at a time and no switch span (`StateTimes`)."""
    threads, meta = load_threads(path)
    t0, t1 = _stored_range(path, meta)  # not clip_span's: an empty range is one window
    windows = plan(path, t0, t1, max_rows, members=("states",)) or [(t0, t1)]
    times = StateTimes(threads, meta)
    lowest, highest = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    for k, (a, b) in enumerate(windows):
        _trim()
        part = load_states(path, window=(lowest if k == 0 else a, highest if k == len(windows) - 1 else b))
        times.add(part, a, b, k == 0, k == len(windows) - 1)
        del part  # before the next chunk loads: one chunk at a time
        if progress is not None:
            progress(k + 1, len(windows))
    return threads, times.out


class StateTimes:
    """Each thread's time in each state, summed over time chunks (as `Trace.time_in_states()`, rows
    as the thread table's); also a chunk callback (`_sums`'s `also`), so that another pass over the
    chunks adds them up on the way.

    A chunk holds every row that overlaps it, so rows are read again by each chunk they cross but
    counted only in the one they start in: the first chunk counts all rows starting before its end,
    the last all from its start on (rows lie inside the meta's range, but one that did not would
    still count once). A chunk's sums are float64 sums of integer ns, as the whole trace's, exact
    below 2^53 ns (104 days) a thread and state, so the totals are the same ints."""

    def __init__(self, threads: ThreadTable, meta: dict):
        self.threads, self.meta = threads, meta
        self.order = np.argsort(threads.tid, kind="stable")
        self.sorted_tids = threads.tid[self.order]
        self.out = np.zeros((len(threads), len(State)), np.int64)

    def add(self, st, a: int, b: int, first: bool, last: bool) -> None:
        """Add the rows of the state table `st` that start in [a, b) (all before b if `first`, all
        from a on if `last`)."""
        a = np.iinfo(np.int64).min if first else a
        b = np.iinfo(np.int64).max if last else b
        for rows in _starting_in(st.tid, st.start_ns, a, b):
            sums = state_sums(st.tid[rows], st.start_ns[rows], st.end_ns[rows], st.state[rows],
                              self.sorted_tids, self.order, len(State))
            if sums is not None:
                self.out.ravel()[:] += sums.astype(np.int64)
            else:  # a tid that is no thread or a state beyond State: fail (or not) as the whole trace does
                self.out += Trace(self.threads, st.take(rows), NameTable.empty(), self.meta).time_in_states()

    def __call__(self, k: int, n: int, a: int, b: int, part) -> None:
        self.add(part.states, a, b, k == 0, k == n - 1)


def _starting_in(tid: np.ndarray, start: np.ndarray, a: int, b: int) -> list:
    """The rows starting in [a, b) of a state table in (tid, start_ns) order: one slice per thread,
    whose columns are views where a masked copy of them took 88 MB a chunk of 4 M rows; the mask
    itself if a thread's rows are out of time order."""
    edges = np.r_[0, np.flatnonzero(tid[1:] != tid[:-1]) + 1, len(tid)].tolist()
    out = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        s = start[lo:hi]
        if np.any(s[1:] < s[:-1]):
            return [(start >= a) & (start < b)]
        i, j = np.searchsorted(s, np.array([a, b], np.int64)).tolist()
        if j > i:
            out.append(slice(lo + i, lo + j))
    return out
