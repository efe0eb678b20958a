"""Criticality stacks: every instant's time divided equally among the threads running then.

Du Bois et al. (thesis ch. 3.2, 4): ``C_j = Σ_{i : j ∈ R_i} t_i / r_i`` over the intervals i in
which thread j is active, where r_i threads are active. A thread that often runs while few
others do is *critical*: the program waits for it. The criticalities add up to the time in
which at least one thread is active; the rest is `idle_ns`.

Computed exactly and without a loop over intervals (shared/DESIGN.md): with r(t) the number of
active threads, F(t) = ∫ dt / r(t) is a cumulative sum over the sorted interval endpoints, and
each active interval [a, b) contributes F(b) - F(a). Windows reuse the same F.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from scalestack.errors import UserError
from scalestack.results import Result
from scalestack.trace import State, Trace
from scalestack.trace.aggregate import AggregateRecording, refuse_trace_options
from scalestack.trace.lookup import find_sorted, sift_runs

ACTIVE = {"running": (State.RUNNING,), "running+runnable": (State.RUNNING, State.RUNNABLE)}


@dataclasses.dataclass(frozen=True)
class Timeline:
    """F(t) = ∫ dt / r(t) at the sorted breakpoints u, with r after each breakpoint."""

    u: np.ndarray  # int64 breakpoints
    r: np.ndarray  # int32 active count on [u[k], u[k+1])
    F: np.ndarray  # float64 F(u[k])
    idle_cum: np.ndarray  # int64 time with r == 0 before u[k]

    def at(self, t: np.ndarray) -> np.ndarray:
        """F at arbitrary times (linear between breakpoints, flat where nothing runs)."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.u) == 0:
            return np.zeros(t.shape)
        k = np.clip(np.searchsorted(self.u, t, side="right") - 1, 0, len(self.u) - 1)
        r = self.r[k]
        inc = np.where(r > 0, (t - self.u[k]) / np.maximum(r, 1), 0.0)
        return self.F[k] + np.where(t >= self.u[0], inc, 0.0)

    def idle_at(self, t: np.ndarray) -> np.ndarray:
        """Time with no active thread in [u[0], t)."""
        return self._with_at(lambda r: r == 0, self.idle_cum, t)

    def with_count_at(self, count: int, t: np.ndarray) -> np.ndarray:
        """Time with exactly `count` active threads in [u[0], t) (`idle_at` is count 0)."""
        return self._time_where(lambda r: r == count, t)

    def with_count_below(self, count: int, t: np.ndarray) -> np.ndarray:
        """Time with fewer than `count` active threads in [u[0], t)."""
        return self._time_where(lambda r: r < count, t)

    def _time_where(self, counted, t: np.ndarray) -> np.ndarray:
        """Time in [u[0], t) whose active count satisfies `counted` (a test of an array of counts)."""
        cum = np.zeros(len(self.u), np.int64)
        if len(self.u):
            np.cumsum(np.where(counted(self.r[:-1]), np.diff(self.u), 0), out=cum[1:])
        return self._with_at(counted, cum, t)

    def _with_at(self, counted, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
        """`cum` (the time whose active count satisfies `counted` before each breakpoint) at any
        instants."""
        t = np.asarray(t, dtype=np.int64)
        if len(self.u) == 0:
            return np.zeros(t.shape, dtype=np.int64)
        k = np.clip(np.searchsorted(self.u, t, side="right") - 1, 0, len(self.u) - 1)
        return cum[k] + np.where(counted(self.r[k]) & (t >= self.u[0]), t - self.u[k], 0)


def active_intervals(trace: Trace, active: str, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row in trace.threads, start, end) of every interval in which a thread is active,
    clipped to [t0, t1] (intervals outside it are dropped)."""
    if active not in ACTIVE:
        raise UserError(f"active must be one of {', '.join(ACTIVE)}, not {active!r}")
    return state_intervals(trace, ACTIVE[active], t0, t1)


def state_intervals(trace: Trace, states, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row in trace.threads, start, end) of every interval in one of `states`, clipped to
    [t0, t1] (intervals outside it are dropped)."""
    s = trace.states
    return _kept(trace, s.tid, s.start_ns, s.end_ns, np.isin(s.state, [int(x) for x in states]), t0, t1, True)


def _kept(trace: Trace, tid, start, end, mask, t0: int, t1: int, strict: bool):
    """(thread row, start, end) of the masked rows, clipped to [t0, t1], the empty ones dropped, in
    two compiled passes: masking, looking up and clipping whole columns held ten per-row
    temporaries. A tid that is not a thread raises KeyError (`strict`, as thread_index) or drops
    the row. Rows are int32: a thread row always fits."""
    tids, rows = thread_lookup(trace)
    n, bad = _clipped(tid, start, end, mask, tids, rows, t0, t1, strict, np.empty(0, np.int32), np.empty(0, np.int64),
                      np.empty(0, np.int64), False)
    if bad >= 0:
        trace.thread_index(tid[bad])  # raises KeyError, as for the whole column
    out = np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, np.int64)
    _clipped(tid, start, end, mask, tids, rows, t0, t1, strict, *out, True)
    return out


@numba.njit(cache=True)
def _clipped(tid, start, end, mask, tids, rows, t0, t1, strict, out_row, out_a, out_b, fill):
    n = 0
    for i in range(tid.shape[0]):
        if not mask[i]:
            continue
        p = find_sorted(tids, tid[i])
        if p < 0:
            if strict:
                return n, i
            continue
        a = min(max(start[i], t0), t1)
        b = min(max(end[i], t0), t1)
        if b > a:
            if fill:
                out_row[n], out_a[n], out_b[n] = rows[p], a, b
            n += 1
    return n, -1


def thread_lookup(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(sorted tids, their rows in trace.threads): `Trace.thread_index` for compiled code, by
    `lookup.find_sorted`."""
    order = np.argsort(trace.threads.tid, kind="stable")
    return trace.threads.tid[order], order


def active_ns(trace: Trace, active: str, t0: int, t1: int) -> np.ndarray:
    """ns each thread was active inside [t0, t1] (float64, one thread a row of trace.threads): the
    sums of `np.bincount` over `active_intervals`, in the same order, in one compiled pass. With
    switch spans the criticality stack needs no sweep of the active intervals, and building it for
    this sum alone held 130 MB for 1.25 M running intervals."""
    s = trace.states
    codes = np.zeros(256, np.bool_)
    codes[[int(x) for x in ACTIVE[active]]] = True
    tids, rows = thread_lookup(trace)
    run, bad = _active_ns(s.tid, s.start_ns, s.end_ns, s.state, codes, tids, rows, t0, t1)
    if bad >= 0:
        trace.thread_index(s.tid[bad])  # raises KeyError, as active_intervals does
    return run


@numba.njit(cache=True)
def _active_ns(tid, start, end, state, codes, tids, rows, t0, t1):
    """Per thread row, the sum of the clipped active intervals' lengths; and the first active row
    whose tid is not a thread (-1: none)."""
    run = np.zeros(rows.shape[0])
    for i in range(tid.shape[0]):
        if not codes[state[i]]:
            continue
        p = find_sorted(tids, tid[i])
        if p < 0:
            return run, i
        a = min(max(start[i], t0), t1)
        b = min(max(end[i], t0), t1)
        if b > a:
            run[rows[p]] += float(b - a)
    return run, -1


def timeline(start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> tuple[Timeline, np.ndarray]:
    """The F(t) timeline of active intervals over [t0, t1], and where each endpoint landed.

    Endpoints are laid out start, end, start, end, ..., t0, t1 and taken in stable sorted order.
    Intervals come sorted per thread, so that layout is a few sorted runs, merged by a heap of
    runs as the sweep walks (`_merge_sweep`): the laid-out times and their sort order (32 bytes
    an interval, 27 MB for 854 K switch spans) are not built; with many runs they are, and a
    stable sort orders them. Returns the timeline and, for every endpoint, its index in the
    timeline: F(b) - F(a) is then a gather, not a search. Equal times may repeat in the timeline
    (dt = 0 between them).
    """
    n = len(start)
    m = 2 * n + 2
    # r fits int32 (it counts threads), where too below 2^31 points: 8 of the sweep's 40 bytes a point
    small = np.int32 if m < 2**31 else np.int64
    u, r, F, idle, where = (np.empty(m, dt) for dt in (np.int64, np.int32, np.float64, np.int64, small))
    start = np.ascontiguousarray(start, dtype=np.int64)
    end = np.ascontiguousarray(end, dtype=np.int64)
    firsts = _point_runs(start, end, t0, t1)
    if 16 * len(firsts) <= m:
        _merge_sweep(start, end, t0, t1, firsts, u, r, F, idle, where)
    else:
        times = _laid_out(start, end, t0, t1)
        _sweep(times, np.argsort(times, kind="stable"), n, u, r, F, idle, where)
    return Timeline(u, r, F, idle), where


def _laid_out(start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """The endpoints as `_point` numbers them (start, end, start, end, ..., t0, t1), as one array:
    what a stable sort orders when they are too many runs to merge."""
    n = len(start)
    times = np.empty(2 * n + 2, dtype=np.int64)
    times[0:2 * n:2] = start
    times[1:2 * n:2] = end
    times[2 * n], times[2 * n + 1] = t0, t1
    return times


@numba.njit(cache=True, inline="always")
def _point(start, end, t0, t1, p):
    """The time of laid-out endpoint p (start 2i, end 2i + 1, then t0 and t1)."""
    n = start.shape[0]
    if p < 2 * n:
        return start[p >> 1] if p % 2 == 0 else end[p >> 1]
    return t0 if p == 2 * n else t1


@numba.njit(cache=True)
def _point_runs(start, end, t0, t1):
    """First positions of the maximal non-decreasing stretches of the laid-out endpoints."""
    m = 2 * start.shape[0] + 2
    count = 1
    for p in range(1, m):
        count += _point(start, end, t0, t1, p) < _point(start, end, t0, t1, p - 1)
    out = np.empty(count, np.int64)
    out[0] = 0
    j = 1
    for p in range(1, m):
        if _point(start, end, t0, t1, p) < _point(start, end, t0, t1, p - 1):
            out[j] = p
            j += 1
    return out


@numba.njit(cache=True, inline="always")
def _visit(k, e, t, n, count, f, gone, u, r, F, idle, where):
    """Endpoint e at time t is the k-th in sorted order: F and the idle time before it, the active
    count after it."""
    if k > 0:
        dt = t - u[k - 1]
        if count > 0:
            f += dt / count
        else:
            gone += dt
    u[k] = t
    F[k] = f
    idle[k] = gone
    if e < 2 * n:
        count += 1 if e % 2 == 0 else -1
    r[k] = count
    where[e] = k
    return count, f, gone


@numba.njit(cache=True)
def _sweep(times, order, n, u, r, F, idle, where):
    """One pass over the sorted endpoints: the active count after each, F and the idle time
    before each (the same sums, in the same order, as cumulative sums over the whole arrays;
    without their seven whole-length temporaries). Endpoint 2i starts interval i, 2i + 1 ends it;
    the last two are the window's bounds."""
    count, f, gone = 0, 0.0, 0
    for k in range(order.shape[0]):
        e = order[k]
        count, f, gone = _visit(k, e, times[e], n, count, f, gone, u, r, F, idle, where)


@numba.njit(cache=True)
def merge_heap(start, end, t0, t1, firsts):
    """The endpoints' sorted runs (first positions `firsts`) as a heap keyed by (time, position):
    (heap of runs, each run's next position, the position it stops before, its next time). Each
    loop that merges them pops spelt out (a helper taking these arrays doubled such a loop's
    time by their reference counts; docs/development.md)."""
    runs = firsts.shape[0]
    cur = firsts.copy()
    stop = np.empty(runs, np.int64)
    stop[:-1] = firsts[1:]
    stop[-1] = 2 * start.shape[0] + 2
    head_t = np.empty(runs, np.int64)
    for j in range(runs):
        head_t[j] = _point(start, end, t0, t1, cur[j])
    heap = np.arange(runs)
    for at in range(runs // 2 - 1, -1, -1):
        sift_runs(heap, runs, at, head_t, cur)
    return heap, cur, stop, head_t


@numba.njit(cache=True)
def _merge_sweep(start, end, t0, t1, firsts, u, r, F, idle, where):
    """`_sweep` over the endpoints in the same order (by time, then position), merged from their
    sorted runs (first positions `firsts`) by a heap keyed by (time, position)."""
    n = start.shape[0]
    m = 2 * n + 2
    heap, cur, stop, head_t = merge_heap(start, end, t0, t1, firsts)
    size = firsts.shape[0]
    count, f, gone = 0, 0.0, 0
    for k in range(m):
        run = heap[0]
        e = cur[run]
        count, f, gone = _visit(k, e, head_t[run], n, count, f, gone, u, r, F, idle, where)
        if e + 1 < stop[run]:
            cur[run] = e + 1
            head_t[run] = _point(start, end, t0, t1, e + 1)
        else:
            size -= 1
            heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, cur)


def interval_F(start: np.ndarray, end: np.ndarray, t0: int, t1: int) -> tuple[np.ndarray, float]:
    """F(b) - F(a) of each interval [a, b) and the idle time of [t0, t1], as `timeline` gives them
    (the same float operations in the same order: the results are identical) without its timeline
    or its endpoints' positions: 8 bytes an interval, not 56. What the criticality stack needs
    when no other analysis of the trace has asked for the timeline (10^8-event trace: 12.5 M
    spans, 1.05 GB for the shared timeline)."""
    start = np.ascontiguousarray(start, dtype=np.int64)
    end = np.ascontiguousarray(end, dtype=np.int64)
    diff = np.zeros(len(start), np.float64)
    firsts = _point_runs(start, end, t0, t1)
    m = 2 * len(start) + 2
    if 16 * len(firsts) <= m:
        idle = _merge_diffs(start, end, t0, t1, firsts, diff)
    else:
        times = _laid_out(start, end, t0, t1)
        idle = _sweep_diffs(times, np.argsort(times, kind="stable"), len(start), diff)
    return diff, float(idle)


@numba.njit(cache=True, inline="always")
def _diff_visit(k, e, t, n, count, f, gone, prev_t, diff, marks):
    """`_visit` keeping only F at each interval's start, then F(b) - F(a) at its end, and the idle
    time at the window's bounds (marks)."""
    if k > 0:
        dt = t - prev_t
        if count > 0:
            f += dt / count
        else:
            gone += dt
    if e < 2 * n:  # -F(a) + F(b) is F(b) - F(a) exactly, in either order (an end before its start)
        if e % 2 == 0:
            diff[e >> 1] -= f
            count += 1
        else:
            diff[e >> 1] += f
            count -= 1
    else:
        marks[e - 2 * n] = gone
    return count, f, gone


@numba.njit(cache=True)
def _sweep_diffs(times, order, n, diff):
    marks = np.zeros(2, np.int64)
    count, f, gone, prev_t = 0, 0.0, 0, 0
    for k in range(order.shape[0]):
        e = order[k]
        count, f, gone = _diff_visit(k, e, times[e], n, count, f, gone, prev_t, diff, marks)
        prev_t = times[e]
    return marks[1] - marks[0]


@numba.njit(cache=True)
def _merge_diffs(start, end, t0, t1, firsts, diff):
    """`_sweep_diffs` over the endpoints merged from their sorted runs, as `_merge_sweep` merges them."""
    n = start.shape[0]
    m = 2 * n + 2
    heap, cur, stop, head_t = merge_heap(start, end, t0, t1, firsts)
    size = firsts.shape[0]
    marks = np.zeros(2, np.int64)
    count, f, gone, prev_t = 0, 0.0, 0, 0
    for k in range(m):
        run = heap[0]
        e = cur[run]
        t = head_t[run]
        count, f, gone = _diff_visit(k, e, t, n, count, f, gone, prev_t, diff, marks)
        prev_t = t
        if e + 1 < stop[run]:
            cur[run] = e + 1
            head_t[run] = _point(start, end, t0, t1, e + 1)
        else:
            size -= 1
            heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, cur)
    return marks[1] - marks[0]


def has_shared(trace: Trace, key: tuple) -> bool:
    """Whether `shared` already holds `key` for `trace`."""
    memo = _SHARED.get(trace)
    return memo is not None and key in memo


# Per-trace memo of the costly steps (a Trace never changes after it is made). The sweep over a
# trace's intervals underlies the criticality stack, bottle graphs, phases, what-if and advice;
# one report asks for it from every section, and computes it once.
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SHARED_PER_TRACE = 8


def shared(trace: Trace, key: tuple, make: Callable[[], Any]) -> Any:
    """`make()` computed once per (trace, key) while the trace lives; the oldest of more than
    eight keys per trace is dropped."""
    memo = _SHARED.get(trace)
    if memo is None:
        memo = _SHARED[trace] = {}
    if key not in memo:
        if len(memo) >= _SHARED_PER_TRACE:
            memo.pop(next(iter(memo)))
        memo[key] = make()
    return memo[key]


def forget(trace: Trace) -> None:
    """Drop what `shared` keeps for `trace` (its sweeps: 84 bytes a switch span, and more), for a
    caller that asks no more of it: the report command before it renders its files."""
    _SHARED.pop(trace, None)


def share_memo(old: Trace, new: Trace, kinds: tuple[str, ...] = ("sweep", "switch-sweep", "criticality")) -> None:
    """Give `new` the memo entries of `old` of these kinds (they read the states' threads, states and
    times and the switch spans, nothing else), for a trace that differs from `old` in other columns
    only: advice's trace with inferred wakers computed all of them again (+205 MB, 0.5 s here)."""
    memo = _SHARED.get(old)
    if memo and new is not old:
        for key, value in memo.items():
            if key[0] in kinds:
                shared(new, key, lambda v=value: v)


def _frozen(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for x in arrays:
        x.flags.writeable = False  # shared between analyses: nobody may change them in place
    return arrays


def _shared_sweep(trace: Trace, key: tuple, intervals: Callable, t0: int, t1: int):
    def make():
        rows, a, b = intervals()
        tl, where = timeline(a, b, t0, t1)
        _frozen(rows, a, b, where, tl.u, tl.r, tl.F, tl.idle_cum)
        return rows, a, b, tl, where

    return shared(trace, key, make)


def sweep(trace: Trace, active: str, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, Timeline, np.ndarray]:
    """`active_intervals` and their `timeline` over [t0, t1], shared by every analysis of `trace`:
    (thread rows, starts, ends, timeline, where each endpoint landed). Read-only arrays."""
    return _shared_sweep(trace, ("sweep", active, int(t0), int(t1)), lambda: active_intervals(trace, active, t0, t1),
                         t0, t1)


def critical_intervals(trace: Trace, active: str, t0: int, t1: int, spans: bool | None = None
                       ) -> tuple[tuple, Callable]:
    """What the criticality stack divides time among: for "running", the switch-instant spans
    where the recording has them (where each slice lies in time), else the active intervals. As
    (the key their shared sweep is kept under, a function giving (thread rows, starts, ends)).
    `spans`: whether the recording has them, when `trace` is a part of it that may hold none (a
    chunk of a stored trace)."""
    if spans is None:
        spans = len(trace.switch_spans) > 0
    if active == "running" and spans:
        return ("switch-sweep", int(t0), int(t1)), lambda: _switch_intervals(trace, t0, t1)
    return ("sweep", active, int(t0), int(t1)), lambda: active_intervals(trace, active, t0, t1)


def critical_sweep(trace: Trace, active: str, t0: int, t1: int, spans: bool | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Timeline, np.ndarray]:
    """As `sweep`, over `critical_intervals`. Shared, read-only, like `sweep`."""
    key, intervals = critical_intervals(trace, active, t0, t1, spans)
    return _shared_sweep(trace, key, intervals, t0, t1)


@dataclasses.dataclass(frozen=True)
class CriticalityResult(Result):
    """Per-thread criticality (thesis eq. 3.1) over a time span.

    Attributes
    ----------
    tids, names, roles : arrays, one row per thread (trace.threads order)
    criticality_ns : float64, C_j in ns
    running_ns : float64, Run_j: ns the thread was active
    idle_ns : float, ns of the span with no active thread
    span_ns : int, length of the span
    active : "running" or "running+runnable"
    """

    tids: np.ndarray
    names: np.ndarray
    roles: np.ndarray
    criticality_ns: np.ndarray
    running_ns: np.ndarray
    idle_ns: float
    span_ns: int
    active: str
    t0_ns: int = 0

    kind = "criticality"

    @property
    def share(self) -> np.ndarray:
        total = self.criticality_ns.sum()
        return self.criticality_ns / total if total > 0 else np.zeros_like(self.criticality_ns)

    @property
    def parallelism(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.criticality_ns > 0, self.running_ns / np.where(self.criticality_ns > 0,
                                                                                self.criticality_ns, 1), np.nan)

    @property
    def order(self) -> np.ndarray:
        """Row indices, most critical first (ties: lower tid first)."""
        return np.lexsort((self.tids, -self.criticality_ns))

    @property
    def most_critical_tid(self) -> int | None:
        return int(self.tids[self.order[0]]) if len(self.tids) and self.criticality_ns.max() > 0 else None

    def imbalance(self) -> float:
        """Most critical share over the even share 1/n (1 = balanced)."""
        n = int(np.sum(self.running_ns > 0))
        return float(self.share.max() * n) if n else 0.0

    def rows(self) -> list[dict[str, Any]]:
        share, par = self.share, self.parallelism
        return [
            {"tid": int(self.tids[i]), "name": str(self.names[i]), "role": str(self.roles[i]),
             "criticality_ns": float(self.criticality_ns[i]), "share_pct": float(share[i] * 100),
             "running_ns": float(self.running_ns[i]),
             "parallelism": None if np.isnan(par[i]) else float(par[i])}
            for i in self.order
        ]

    def to_dict(self) -> dict[str, Any]:
        return {"active": self.active, "span_ns": int(self.span_ns), "t0_ns": int(self.t0_ns),
                "idle_ns": float(self.idle_ns), "most_critical_tid": self.most_critical_tid,
                "imbalance": self.imbalance(), "threads": self.rows()}


def _span(trace: Trace, between) -> tuple[int, int]:
    return clip_span(trace.start_ns, trace.end_ns, between)


def clip_span(start: int, end: int, between) -> tuple[int, int]:
    """[start, end) cut to `between` (absolute ns; None: all of it); one line if nothing is left."""
    t0, t1 = int(start), int(end)
    if between is not None:
        t0, t1 = max(int(between[0]), t0), min(int(between[1]), t1)
    if t1 <= t0:
        raise UserError(f"the time range [{t0}, {t1}) is empty or outside the trace")
    return t0, t1


def _switch_intervals(trace: Trace, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thread rows and [a, b) of the trace's switch-instant spans, clipped to [t0, t1); spans of
    tids that are not threads are left out."""
    sp = trace.switch_spans
    return _kept(trace, sp.tid, sp.start_ns, sp.end_ns, np.ones(len(sp), np.bool_), t0, t1, False)


def criticality(trace: Trace | AggregateRecording, *, active: str = "running",
                between: tuple[int, int] | None = None) -> CriticalityResult:
    """Criticality stack of `trace` (thesis §3.2, eq. 3.1).

    Parameters
    ----------
    active : {"running", "running+runnable"}
        What counts as active. "running+runnable" shows the parallelism the program would have
        with enough cores (demand), since threads waiting for a CPU count too.
    between : (t0_ns, t1_ns), optional
        Restrict to this time range (absolute trace times).

    Examples
    --------
    >>> res = scalestack.criticality(trace)  # doctest: +SKIP
    >>> res.to_frame().head()                # doctest: +SKIP
    """
    if isinstance(trace, AggregateRecording):  # per-window counters of `record --aggregate`
        return _from_counters(trace, active, between)
    t0, t1 = _span(trace, between)
    if active not in ACTIVE:
        raise UserError(f"active must be one of {', '.join(ACTIVE)}, not {active!r}")
    return shared(trace, ("criticality", active, t0, t1), lambda: _criticality(trace, active, t0, t1))


def _criticality(trace: Trace, active: str, t0: int, t1: int, spans: bool | None = None) -> CriticalityResult:
    n = len(trace.threads)
    run = active_ns(trace, active, t0, t1)  # Run_j: the kernel's charge
    key, intervals = critical_intervals(trace, active, t0, t1, spans)
    if has_shared(trace, key):  # another analysis made the timeline: read it
        rows, a, b, tl, where = critical_sweep(trace, active, t0, t1, spans)
        m = len(a)
        diff = tl.F[where[1:2 * m:2]] - tl.F[where[0:2 * m:2]]
        idle = float(tl.idle_cum[where[2 * m + 1]] - tl.idle_cum[where[2 * m]])
    else:  # the same numbers without keeping a timeline
        rows, a, b = intervals()
        diff, idle = interval_F(a, b, t0, t1)
        del a, b
    crit = np.bincount(rows, weights=diff, minlength=n).astype(np.float64)
    return CriticalityResult(
        tids=trace.threads.tid.copy(), names=trace.threads.name.copy(), roles=trace.threads.role.copy(),
        criticality_ns=crit, running_ns=run, idle_ns=idle, span_ns=t1 - t0, active=active, t0_ns=t0,
    )


def criticality_from_spans(trace: Trace, spans) -> CriticalityResult:
    """The trace's criticality stack with C_j from switch-instant spans
    (`scalestack.trace.switch_spans.SwitchSpans`) and Run_j (and the thread table) from the trace:
    the quantities the eBPF aggregator keeps."""
    return criticality(dataclasses.replace(trace, switch_spans=spans.table()))


def _from_counters(rec: AggregateRecording, active: str, between) -> CriticalityResult:
    """The criticality stack of a whole aggregate recording: its per-thread sums (the kernel kept
    C_j and Run_j; no sweep)."""
    refuse_trace_options(active, between)
    tids, names, roles = rec.threads()
    sums = rec.per_thread()
    start, end, busy = rec.windows()
    span = int(end[-1] - start[0]) if len(start) else 0
    return CriticalityResult(tids=tids, names=names, roles=roles, criticality_ns=sums["crit_ns"],
                             running_ns=sums["running_ns"], idle_ns=float(max(span - busy.sum(), 0.0)),
                             span_ns=span, active="running", t0_ns=int(start[0]) if len(start) else 0)
