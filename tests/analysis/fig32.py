"""The thesis's Figure 3.2 program (thesis-methods.md §1), as a Trace."""

from __future__ import annotations

import numpy as np

from scalestack.trace import State, make_trace

RUNNING_SETS = [{0, 1, 2, 3}, {1, 2, 3}, {2, 3}, {1, 2, 3}, {1, 3}, {1, 2, 3}, {0, 1, 2, 3}, {0}]


def fig32_trace(durations=(3, 3, 1, 3, 1, 3, 3, 5), unit: int = 1_000_000):
    """Thread k is RUNNING in the intervals whose running set holds k, SYNC_WAIT otherwise."""
    edges = np.concatenate([[0], np.cumsum(durations)]) * unit
    tid, a, b, st = [], [], [], []
    for k in range(4):
        for i, rs in enumerate(RUNNING_SETS):
            tid.append(10 + k)
            a.append(edges[i])
            b.append(edges[i + 1])
            st.append(int(State.RUNNING) if k in rs else int(State.SYNC_WAIT))
    # merge equal neighbours so the states are maximal intervals, as a recording gives them
    rows = []
    for t_, a_, b_, s_ in zip(tid, a, b, st, strict=True):
        if rows and rows[-1][0] == t_ and rows[-1][3] == s_ and rows[-1][2] == a_:
            rows[-1] = (t_, rows[-1][1], b_, s_)
        else:
            rows.append((t_, a_, b_, s_))
    cols = list(zip(*rows, strict=True))
    return make_trace(
        {"tid": [10, 11, 12, 13], "name": ["T0", "T1", "T2", "T3"], "start_ns": [0] * 4, "end_ns": [edges[-1]] * 4},
        {"tid": cols[0], "start_ns": cols[1], "end_ns": cols[2], "state": cols[3]},
        meta={"source": "test"},
    )
