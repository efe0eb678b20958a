"""What-if: predicted program speedup when one thread runs `factor` times faster, from a trace alone.

Two estimates: (1) criticality-based, runtime shrinks by C_X (1 - 1/F) (thesis Ch. 3: the
critical time of X is the time the program waits on it); (2) a replay of the inter-thread
dependency graph: every thread's segments are re-timed in original end-time order, X's RUNNING
segments divided by F, and a wait with a known waker ends when the waker reaches, in its own
re-timed schedule, the point where it released the waiter. Waits with no known waker keep their
duration. Limitation: the replay does not model core contention (RUNNABLE time is kept as is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    st = trace.states
    tids = trace.threads.tid
    pos = {int(t): k for k, t in enumerate(tids)}
    n = len(tids)
    root = trace.meta.get("root_tid", int(tids[0]) if n else -1)
    root_k = pos.get(int(root), -1)
    inv = np.array([1.0 / scale.get(int(t), 1.0) for t in tids])
    cursor = np.zeros(n)
    last_end = trace.threads.start_ns.astype(np.float64).copy()
    # next segment state per thread is needed for interpolation: index of next unprocessed row
    k_of = np.array([pos[int(t)] for t in st.tid], dtype=np.int64)
    # events: segment ends (kind 1 running first, 2 waits) and births (kind 0)
    ev_t = np.concatenate([trace.threads.start_ns, st.end_ns])
    ev_kind = np.concatenate([np.zeros(n, np.int64), np.where(st.state == State.RUNNING, 1, 2)])
    ev_idx = np.concatenate([np.arange(n), np.arange(len(st))])
    order = np.lexsort((ev_kind, ev_t))
    nxt_running = np.zeros(n, dtype=bool)
    first_row = np.full(len(st), False)
    if len(st):
        first_row[0] = True
        first_row[1:] = st.tid[1:] != st.tid[:-1]
    # next-segment state: at birth, the first row; after a row, the following row of that thread
    row_state = st.state
    next_row = np.arange(1, len(st) + 1)
    first_of = {}
    for r in np.flatnonzero(first_row):
        first_of[k_of[r]] = r
    t0 = float(trace.start_ns)

    def at(w: int, t: float) -> float:
        return cursor[w] + (t - last_end[w]) * (inv[w] if nxt_running[w] else 1.0)

    starts, ends, states, wakers = st.start_ns, st.end_ns, st.state, st.waker
    for e in order:
        kind, i = ev_kind[e], ev_idx[e]
        if kind == 0:
            s = float(trace.threads.start_ns[i])
            cursor[i] = at(root_k, s) if (root_k >= 0 and root_k != i and s > t0) else s
            last_end[i] = s
            r = first_of.get(i)
            nxt_running[i] = r is not None and row_state[r] == State.RUNNING
            continue
        k = k_of[i]
        d = float(ends[i] - starts[i])
        if states[i] == State.RUNNING:
            new_end = cursor[k] + d * inv[k]
        else:
            w = pos.get(int(wakers[i]), -1)
            if w >= 0 and w != k and states[i] != State.RUNNABLE:
                new_end = max(cursor[k], at(w, float(ends[i])))
            else:
                new_end = cursor[k] + d
        cursor[k] = new_end
        last_end[k] = float(ends[i])
        nr = next_row[i]
        nxt_running[k] = nr < len(st) and not first_row[nr] and row_state[nr] == State.RUNNING
    return float(cursor.max() - t0) if n else 0.0


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
