"""What-if: predicted program speedup when one thread runs `factor` times faster, from a trace alone.

Two estimates: (1) criticality-based, runtime shrinks by C_X (1 - 1/F) (thesis Ch. 3: the
critical time of X is the time the program waits on it); (2) a replay of the inter-thread
dependency graph: every thread's segments are re-timed in original end-time order, X's RUNNING
segments divided by F, and a wait with a known waker ends when the waker reaches, in its own
re-timed schedule, the point where it released the waiter. Waits with no known waker keep their
duration. Limitation: the replay does not model core contention (RUNNABLE time is kept as is).
The walk is sequential (each wait ends where its waker's re-timed schedule has got to), so it is one
numba-compiled loop over the events, merged in time order from the threads' runs of states as it goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from scalestack.analysis.criticality import shared
from scalestack.results import Result
from scalestack.trace import State, Trace
from scalestack.trace.lookup import find_sorted, sift_runs


@dataclass(frozen=True)
class WhatIfResult(Result):
    """Predicted speedups for accelerating `tid` by `factor`.

    Attributes
    ----------
    runtime_ns : original span; crit_runtime_ns / replay_runtime_ns : predicted spans.
    unknown_waker_share : fraction of blocked time whose waker is unknown (-1) or the idle task (0).
    """

    tid: int
    factor: float
    runtime_ns: int
    crit_runtime_ns: float
    replay_runtime_ns: float
    unknown_waker_share: float

    kind = "whatif"

    @property
    def crit_speedup(self) -> float:
        return self.runtime_ns / self.crit_runtime_ns if self.crit_runtime_ns > 0 else 1.0

    @property
    def replay_speedup(self) -> float:
        return self.runtime_ns / self.replay_runtime_ns if self.replay_runtime_ns > 0 else 1.0

    def rows(self) -> list[dict]:
        return [{"tid": self.tid, "factor": self.factor, "runtime_ns": self.runtime_ns,
                 "crit_speedup": self.crit_speedup, "replay_speedup": self.replay_speedup,
                 "unknown_waker_share": self.unknown_waker_share}]

    def to_dict(self) -> dict:
        d = dict(self.rows()[0])
        d.update(kind=self.kind, crit_runtime_ns=self.crit_runtime_ns, replay_runtime_ns=self.replay_runtime_ns)
        return d


def replay_runtime(trace: Trace, scale: dict[int, float]) -> float:
    """Span of the re-timed schedule with thread tid's RUNNING segments divided by scale[tid]."""
    tids = trace.threads.tid
    n = len(tids)
    if not n:
        return 0.0
    st = trace.states
    ev = _Events(trace)
    walk = ReplayWalk(trace, scale)
    first_of = ev.first_of
    has = first_of >= 0
    walk.first_running[has] = st.state[first_of[has]] == State.RUNNING
    walk.step(*ev.args(trace), st.start_ns.astype(np.int64, copy=False), st.waker, _next_running(st.tid, st.state))
    return walk.span()


class ReplayWalk:
    """The replay's state between calls: each thread's cursor in the re-timed schedule, the
    original instant it corresponds to, and whether its next segment runs. Carried from one part
    of the events to the next, so that a trace read in time chunks (`analysis.chunked_advice.whatif`)
    replays exactly as a whole one: the events are merged in the same order, the same float
    operations done on them."""

    def __init__(self, trace: Trace, scale: dict[int, float]):
        tids = trace.threads.tid
        self.root_k = int(trace.thread_index(trace.meta.get("root_tid", int(tids[0])), missing=-1)[0])
        # a thread is born where its creator's re-timed schedule is (the root's where the creator is
        # unknown): a JVM's main() thread, or a program under `sh -c`, is no child of the root, and
        # its threads placed by the root's schedule, which only waits, started at the original times
        self.parent_k = trace.thread_index(trace.threads.ppid, missing=-1).astype(np.int64)
        self.inv = 1.0 / np.array([scale.get(int(t), 1.0) for t in tids], dtype=np.float64)
        order = np.argsort(tids, kind="stable")
        self.sorted_tids, self.sorted_k = tids[order], order
        self.birth_ns = trace.threads.start_ns.astype(np.int64)
        self.t0 = float(trace.start_ns)
        self.cursor = np.zeros(len(tids))
        self.last_end = self.birth_ns.astype(np.float64)
        self.nxt_running = np.zeros(len(tids), dtype=np.bool_)
        self.first_running = np.zeros(len(tids), dtype=np.bool_)  # each thread's first state runs
        self.t_end = float(trace.end_ns)
        self.is_open = np.zeros(len(tids), dtype=np.bool_)  # see `span`
        self.open_at = np.zeros(len(tids))
        self.open_orig = np.zeros(len(tids))

    def step(self, births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states, starts, waker,
             next_running) -> None:
        """Walk the births and the segment ends of a merge (`_fill`'s arguments); `next_running`:
        per row, whether the thread's next row runs."""
        _replay(births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states, starts, waker,
                next_running, self.first_running, self.sorted_tids, self.sorted_k, self.inv, self.root_k, self.t0,
                self.cursor, self.last_end, self.nxt_running, self.parent_k, self.t_end, self.is_open,
                self.open_at, self.open_orig)

    def span(self) -> float:
        """The re-timed run's length. A wait that the recording's end cut, with no known waker (a
        thread blocked or `unknown` through a `record --pid` window, a daemon asleep at the end), ends
        when the rest of the run does: it is not a stretch of work that keeps its length, or main's
        join through a 2 s attach window would pin every prediction at 1.00x. A stretch at the end in
        which every thread waits so keeps its original length."""
        if not len(self.cursor):
            return 0.0
        if not self.is_open.any():
            return float(self.cursor.max() - self.t0)
        end = np.where(self.is_open, self.open_at, self.cursor).max()
        orig = np.where(self.is_open, self.open_orig, self.last_end).max()
        return float(end - self.t0 + max(self.t_end - orig, 0.0))


@numba.njit(cache=True)
def _next_running(tid, states):
    """Per row, whether the thread's next row (the row after it, if the same thread's) runs."""
    out = np.zeros(tid.shape[0], np.bool_)
    for i in range(tid.shape[0] - 1):
        out[i] = tid[i + 1] == tid[i] and states[i + 1] == 0  # State.RUNNING
    return out


class _Events:
    """The replay's events in time order, merged while the replay walks them: births (by time),
    then per instant segment ends, RUNNING before waits, each in row order (the order of
    ``np.lexsort((kind, time))`` over births and state ends). A thread's states come in time
    order, so the table is a few sorted runs and a heap of runs orders them: no per-row array
    (the sorted events and per-row thread indices took 111 MB for 2.9 M states).

    Runs are maximal row ranges of one thread in event order, numbered in row order; the heap
    holds the unfinished ones by their next row cur[run] (which ends before stop[run]), whose
    end time and kind (0: RUNNING) are cached in head_t / head_k. ctl: [heap size, next birth]."""

    def __init__(self, trace: Trace):
        st = trace.states
        starts, stop, run_k, births, self.first_of = shared(trace, ("replay-runs",), lambda: _static(trace))
        self._args = merge_args(starts, stop, run_k, births, trace.threads.start_ns, st.end_ns, st.state)

    def args(self, trace: Trace) -> tuple:
        return self._args

    def order(self, trace: Trace) -> np.ndarray:
        """All events in replay order as positions in [births..., state rows...] (for the tests)."""
        return _order(*self.args(trace), len(trace.threads) + len(trace.states))


def merge_args(starts, stop, run_k, births, birth_ns, ends, states) -> tuple:
    """`_fill`'s arguments to merge the runs that begin at rows `starts` (before rows `stop`, of
    threads `run_k`) of a table's `ends` and `states` with the threads `births` (born at `birth_ns`,
    by thread)."""
    cur = starts.copy()
    head_t = ends[starts].astype(np.int64)
    head_k = (states[starts] != State.RUNNING).astype(np.int8)
    heap = np.arange(len(starts), dtype=np.int64)
    ctl = np.array([len(starts), 0], np.int64)
    for at in range(len(starts) // 2 - 1, -1, -1):
        sift_runs(heap, len(starts), at, head_t, head_k)
    return births, birth_ns.astype(np.int64, copy=False), heap, cur, stop, run_k, head_t, head_k, ctl, ends, states


def _static(trace: Trace) -> tuple[np.ndarray, ...]:
    """What every replay of `trace` starts from (a few numbers per thread; the scan for the runs
    takes 30 ms over 2.9 M states): runs' first rows and ends, their threads, the threads in birth
    order, each thread's first row."""
    st = trace.states
    th = trace.threads
    starts = _runs(st.tid, st.end_ns, st.state)
    stop = np.append(starts[1:], len(st)).astype(np.int64)
    run_k = trace.thread_index(st.tid[starts]).astype(np.int64, copy=False)
    births = np.argsort(th.start_ns, kind="stable")
    block = starts[(starts == 0) | (st.tid[starts] != st.tid[np.maximum(starts - 1, 0)])]  # a thread's rows
    first_of = np.full(len(th), -1, np.int64)
    first_of[trace.thread_index(st.tid[block])] = block
    out = (starts, stop, run_k, births, first_of)
    for x in out:
        x.flags.writeable = False  # shared between the calls
    return out


@numba.njit(cache=True)
def _runs(tid, ends, states):
    """First row of each run: rows of one thread whose (end, RUNNING first) order is the row order."""
    m = tid.shape[0]
    count = 1 if m else 0
    for i in range(1, m):
        count += _breaks(tid, ends, states, i)
    out = np.empty(count, np.int64)
    if m:
        out[0] = 0
    j = 1
    for i in range(1, m):
        if _breaks(tid, ends, states, i):
            out[j] = i
            j += 1
    return out


@numba.njit(cache=True, inline="always")
def _breaks(tid, ends, states, i):
    """Whether row i starts a run: another thread, or an end before row i - 1's."""
    if tid[i] != tid[i - 1] or ends[i] < ends[i - 1]:
        return True
    return ends[i] == ends[i - 1] and states[i] == 0 and states[i - 1] != 0  # RUNNING goes first


BLOCK = 1 << 14  # events merged per call of _fill


@numba.njit(cache=True)
def _fill(rows, ks, births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states):
    """The next (up to len(rows)) events: rows[e] the thread of a birth (ks[e] = -1) or the state row
    of a segment end (ks[e] its thread); births come first at equal times. Returns how many."""
    size, b = ctl[0], ctl[1]
    e = 0
    while e < rows.shape[0]:
        if b < births.shape[0] and (size == 0 or birth_ns[births[b]] <= head_t[heap[0]]):
            rows[e] = births[b]
            ks[e] = -1
            b += 1
            e += 1
            continue
        if size == 0:
            break
        run = heap[0]
        i = cur[run]
        rows[e] = i
        ks[e] = run_k[run]
        e += 1
        cur[run] = i + 1
        if i + 1 < stop[run]:
            head_t[run] = ends[i + 1]
            head_k[run] = 0 if states[i + 1] == 0 else 1
        else:
            size -= 1
            heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, head_k)
    ctl[0], ctl[1] = size, b
    return e


@numba.njit(cache=True)
def _order(births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states, total):
    out = np.empty(total, np.int64)
    rows = np.empty(BLOCK, np.int64)
    ks = np.empty(BLOCK, np.int64)
    at = 0
    while True:
        got = _fill(rows, ks, births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states)
        if got == 0:
            return out[:at]
        for e in range(got):
            out[at + e] = rows[e] if ks[e] < 0 else births.shape[0] + rows[e]
        at += got


@numba.njit(cache=True)
def _replay(births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states, starts, waker,
            next_running, first_running, sorted_tids, sorted_k, inv, root_k, t0, cursor, last_end, nxt_running,
            parent_k, t_end, is_open, open_at, open_orig):
    """The replay's walk over events in time order: each thread's cursor in the re-timed schedule.

    cursor[k]: where thread k's re-timed schedule has reached; last_end[k]: the original instant it
    corresponds to; nxt_running[k]: whether k's next segment runs (so interpolating inside it scales).
    is_open[k]: k's last row is a wait the recording's end (`t_end`) cut, with no known waker; it
    began at open_at[k] in the re-timed schedule, at open_orig[k] originally."""
    running, runnable = 0, 1  # State.RUNNING, State.RUNNABLE
    rows = np.empty(BLOCK, np.int64)
    ks = np.empty(BLOCK, np.int64)
    got = 1
    while got:
        got = _fill(rows, ks, births, birth_ns, heap, cur, stop, run_k, head_t, head_k, ctl, ends, states)
        for e in range(got):
            i, k = rows[e], ks[e]
            if k < 0:
                s = float(birth_ns[i])
                w = parent_k[i] if parent_k[i] >= 0 and parent_k[i] != i else root_k
                if w >= 0 and w != i and s > t0:
                    cursor[i] = cursor[w] + (s - last_end[w]) * (inv[w] if nxt_running[w] else 1.0)
                else:
                    cursor[i] = s
                last_end[i] = s
                nxt_running[i] = first_running[i]
                continue
            d = float(ends[i] - starts[i])
            if states[i] == running:
                new_end = cursor[k] + d * inv[k]
            else:
                p = find_sorted(sorted_tids, waker[i])
                w = sorted_k[p] if p >= 0 else -1
                if w >= 0 and w != k and states[i] != runnable:
                    at_w = cursor[w] + (float(ends[i]) - last_end[w]) * (inv[w] if nxt_running[w] else 1.0)
                    new_end = max(cursor[k], at_w)
                else:
                    new_end = cursor[k] + d
                    if states[i] != runnable and float(ends[i]) >= t_end:
                        is_open[k] = True
                        open_at[k] = cursor[k]
                        open_orig[k] = float(starts[i])
            cursor[k] = new_end
            last_end[k] = float(ends[i])
            nxt_running[k] = next_running[i]


def whatif(trace: Trace, tid: int, factor: float = 2.0) -> WhatIfResult:
    """Predict the speedup of accelerating thread `tid` by `factor`.

    Parameters
    ----------
    trace : a recorded or simulated Trace (uses `meta["root_tid"]` for thread births if present)
    tid : the accelerated thread; factor : its speed-up factor (thesis Ch. 4: 2 -> 4 GHz is 2)

    Returns
    -------
    WhatIfResult with the criticality-based and replay predictions.

    References
    ----------
    Thesis Ch. 4 (validation by accelerating one thread), thesis-methods.md §1.
    """
    from scalestack.analysis.criticality import criticality

    check(trace.threads.tid, tid, factor)
    cr = criticality(trace)
    st = trace.states
    return result(tid, factor, int(trace.wall_ns), cr, replay_runtime(trace, {tid: factor}),
                  *_blocked_ns(st.start_ns, st.end_ns, st.state, st.waker))


def check(tids: np.ndarray, tid: int, factor: float) -> None:
    """One clear line for a thread that is not in the trace, or a factor that is not positive."""
    from scalestack.errors import UserError

    if tid not in set(int(t) for t in tids):
        raise UserError(f"thread {tid} is not in the trace; see 'scalestack info'")
    if factor <= 0:
        raise UserError("--factor must be positive")


def result(tid: int, factor: float, span: int, cr, replay_ns: float, blocked_ns: int, unknown_ns: int) -> WhatIfResult:
    """The predictions from the criticality stack `cr`, the replayed span and the blocked time
    (of which `unknown_ns` has no known waker)."""
    c = float(cr.criticality_ns[list(map(int, cr.tids)).index(tid)])
    crit_rt = span - c * (1.0 - 1.0 / factor)
    return WhatIfResult(tid, float(factor), span, crit_rt, replay_ns,
                        float(unknown_ns / blocked_ns) if blocked_ns else 0.0)


@numba.njit(cache=True)
def _blocked_ns(start, end, state, waker):
    """ns of the rows neither RUNNING nor RUNNABLE, and of those with no known waker: one pass (the
    masked copies of the start and end columns took 475 MB for 37.5 M states)."""
    tot = 0
    unk = 0
    for i in range(state.shape[0]):
        if state[i] != 0 and state[i] != 1:  # State.RUNNING, State.RUNNABLE
            d = end[i] - start[i]
            tot += d
            if waker[i] <= 0:  # none seen, or the idle task (a wakeup delivered from an idle CPU)
                unk += d
    return tot, unk
