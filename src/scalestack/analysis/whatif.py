"""What-if: predicted program speedup when one thread runs `factor` times faster, from a trace alone.

Two estimates: (1) criticality-based, runtime shrinks by C_X (1 - 1/F) (thesis Ch. 3: the
critical time of X is the time the program waits on it); (2) a replay of the inter-thread
dependency graph: every thread's segments are re-timed in original end-time order, X's RUNNING
segments divided by F, and a wait with a known waker ends when the waker reaches, in its own
re-timed schedule, the point where it released the waiter. Waits with no known waker keep their
duration. Limitation: the replay does not model core contention (RUNNABLE time is kept as is).
The walk is sequential (each wait ends where its waker's re-timed schedule has got to), so it is one
numba-compiled loop over the events, sorted and indexed by NumPy beforehand.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from scalestack.analysis.criticality import shared
from scalestack.results import Result
from scalestack.trace import State, Trace


@dataclass(frozen=True)
class WhatIfResult(Result):
    """Predicted speedups for accelerating `tid` by `factor`.

    Attributes
    ----------
    runtime_ns : original span; crit_runtime_ns / replay_runtime_ns : predicted spans.
    unknown_waker_share : fraction of blocked time whose waker is unknown (-1).
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
    root_k = int(trace.thread_index(trace.meta.get("root_tid", int(tids[0])), missing=-1)[0])
    inv = 1.0 / np.array([scale.get(int(t), 1.0) for t in tids], dtype=np.float64)
    kinds, idxs, k_of, waker_k, first_row, first_of = shared(trace, ("replay-events",), lambda: _replay_events(trace))
    return _replay(kinds, idxs, trace.threads.start_ns.astype(np.int64, copy=False),
                   st.start_ns.astype(np.int64, copy=False), st.end_ns.astype(np.int64, copy=False), st.state, k_of,
                   waker_k, first_row, first_of, inv, root_k, float(trace.start_ns))


def _replay_events(trace: Trace) -> tuple[np.ndarray, ...]:
    """The replay's events in time order, the same for every thread and factor asked about (one
    report asks for several): births (kind 0), then per instant segment ends, RUNNING (kind 1)
    before waits (kind 2); with each state's thread, its waker's thread and each thread's first row."""
    st = trace.states
    n = len(trace.threads)
    k_of = trace.thread_index(st.tid).astype(np.int64, copy=False)
    waker_k = trace.thread_index(st.waker, missing=-1).astype(np.int64, copy=False)
    ev_t = np.concatenate([trace.threads.start_ns, st.end_ns])
    ev_kind = np.concatenate([np.zeros(n, np.int8), np.where(st.state == State.RUNNING, 1, 2).astype(np.int8)])
    order = np.lexsort((ev_kind, ev_t))
    del ev_t
    kinds = ev_kind[order]
    idxs = np.where(order < n, order, order - n)  # the thread (births) or the state row
    del order, ev_kind
    first_row = np.ones(len(st), dtype=np.bool_)
    first_row[1:] = st.tid[1:] != st.tid[:-1]
    first_of = np.full(n, -1, np.int64)
    rows = np.flatnonzero(first_row)
    first_of[k_of[rows]] = rows
    out = (kinds, idxs, k_of, waker_k, first_row, first_of)
    for x in out:
        x.flags.writeable = False  # shared between the calls
    return out


@numba.njit(cache=True)
def _replay(kinds, idxs, birth_ns, starts, ends, states, k_of, waker_k, first_row, first_of, inv, root_k, t0):
    """The replay's walk over events in time order: each thread's cursor in the re-timed schedule.

    cursor[k]: where thread k's re-timed schedule has reached; last_end[k]: the original instant it
    corresponds to; nxt_running[k]: whether k's next segment runs (so interpolating inside it scales)."""
    running, runnable = 0, 1  # State.RUNNING, State.RUNNABLE
    n = len(birth_ns)
    m = len(states)
    cursor = np.zeros(n)
    last_end = birth_ns.astype(np.float64)
    nxt_running = np.zeros(n, dtype=np.bool_)
    for e in range(len(kinds)):
        kind, i = kinds[e], idxs[e]
        if kind == 0:
            s = float(birth_ns[i])
            if root_k >= 0 and root_k != i and s > t0:
                w = root_k
                cursor[i] = cursor[w] + (s - last_end[w]) * (inv[w] if nxt_running[w] else 1.0)
            else:
                cursor[i] = s
            last_end[i] = s
            r = first_of[i]
            nxt_running[i] = r >= 0 and states[r] == running
            continue
        k = k_of[i]
        d = float(ends[i] - starts[i])
        if states[i] == running:
            new_end = cursor[k] + d * inv[k]
        else:
            w = waker_k[i]
            if w >= 0 and w != k and states[i] != runnable:
                at_w = cursor[w] + (float(ends[i]) - last_end[w]) * (inv[w] if nxt_running[w] else 1.0)
                new_end = max(cursor[k], at_w)
            else:
                new_end = cursor[k] + d
        cursor[k] = new_end
        last_end[k] = float(ends[i])
        nr = i + 1
        nxt_running[k] = nr < m and not first_row[nr] and states[nr] == running
    return cursor.max() - t0


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
    from scalestack.errors import UserError

    if tid not in set(int(t) for t in trace.threads.tid):
        raise UserError(f"thread {tid} is not in the trace; see 'scalestack info'")
    if factor <= 0:
        raise UserError("--factor must be positive")
    span = int(trace.wall_ns)
    cr = criticality(trace)
    c = float(cr.criticality_ns[list(map(int, cr.tids)).index(tid)])
    crit_rt = span - c * (1.0 - 1.0 / factor)
    rep = replay_runtime(trace, {tid: factor})
    st = trace.states
    blocked = (st.state != State.RUNNING) & (st.state != State.RUNNABLE)
    dur = st.duration_ns
    tot = dur[blocked].sum()
    unk = dur[blocked & (st.waker < 0)].sum()
    return WhatIfResult(tid, float(factor), span, crit_rt, rep, float(unk / tot) if tot else 0.0)
