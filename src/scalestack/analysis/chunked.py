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
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from scalestack.analysis.bottle import BottleResult, WindowedBottleResult, _boxes, group_threads
from scalestack.analysis.bottle import bottle as _bottle
from scalestack.analysis.criticality import ACTIVE, CriticalityResult, _criticality, clip_span
from scalestack.errors import UserError
from scalestack.trace import ThreadTable
from scalestack.trace.store import group_ranges, load, read_meta
from scalestack.units import parse_duration_ns

CHUNK_ROWS = 1 << 22  # rows of states and switch spans a chunk holds (~4 M: ~0.3 GB with the sweep)

Progress = Callable[[int, int], None]  # (chunks done, chunks)


def stored_rows(path: str | os.PathLike) -> int:
    """Rows of states and switch spans in a trace file (what a whole load holds), read from its
    Parquet footers alone."""
    return int(sum(int(group_ranges(path, m)[0].sum()) for m in ("states", "switch_spans")))


def plan(path: str | os.PathLike, t0: int, t1: int, max_rows: int = CHUNK_ROWS,
         grid: int | None = None) -> list[tuple[int, int]]:
    """Consecutive windows [a, b) tiling [t0, t1), each overlapping row groups of at most `max_rows`
    rows in all, or no more than twice what the shortest window there would (a window is never
    shorter than the gap between two group edges, or one `grid` step). With `grid` (ns), every inner edge is t0 plus a multiple of it (so
    that per-window bottle graphs fall on the same windows as the whole trace's)."""
    parts = [group_ranges(path, m) for m in ("states", "switch_spans")]
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
        w = np.where(held > 0, weight[np.maximum(held - 1, 0)], 0)
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
    meta = read_meta(path)
    if "start_ns" not in meta or "end_ns" not in meta:
        raise UserError(f"{path} does not give its time range; read it whole (scalestack.load)")
    return clip_span(meta["start_ns"], meta["end_ns"], between)


def _chunks(path, windows, progress: Progress | None):
    """Each window with the part of the trace that overlaps it. The C heap is trimmed between
    windows: glibc serves a chunk's arrays (< 32 MB each) from its heap and keeps them when freed,
    so without it the process grew by a chunk's worth every few windows (to 0.9 GB for 4 M rows)."""
    for k, (a, b) in enumerate(windows):
        _trim()
        yield a, b, load(path, window=(a, b))
        if progress is not None:
            progress(k + 1, len(windows))


def _trim() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator gives memory back by itself, or not at all
        pass


def _sums(path, active: str, between, max_rows: int, progress: Progress | None
          ) -> tuple[CriticalityResult, ThreadTable]:
    if active not in ACTIVE:
        raise UserError(f"active must be one of {', '.join(ACTIVE)}, not {active!r}")
    t0, t1 = _span(path, between)
    spans = int(group_ranges(path, "switch_spans")[0].sum()) > 0  # decided for the whole file, not per chunk
    crit = run = None
    idle = 0.0
    for a, b, part in _chunks(path, plan(path, t0, t1, max_rows), progress):
        res = _criticality(part, active, a, b, spans)
        crit = res.criticality_ns if crit is None else crit + res.criticality_ns
        run = res.running_ns if run is None else run + res.running_ns
        idle += res.idle_ns
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
        res, th = _sums(path, active, between, max_rows, progress)
        group, labels, roles = group_threads(th.tid.tolist(), th.name.tolist(), th.role.tolist(), group_by)
        return BottleResult(_boxes(res.criticality_ns, res.running_ns, group, labels, roles, th.tid),
                            res.idle_ns, res.span_ns, res.t0_ns, active)
    w = parse_duration_ns(window, what="--window")
    t0, t1 = _span(path, between)
    windows = []
    for a, b, part in _chunks(path, plan(path, t0, t1, max_rows, grid=w), progress):
        windows.extend(_bottle(part, group_by=group_by, active=active, between=(a, b), window=w).windows)
        del part
    return WindowedBottleResult(w, tuple(windows))
