"""The compiled join of split state rows (`_merge_adjacent`) against its NumPy statement."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace import StateTable
from scalestack.trace.builder import _merge_adjacent


def reference(s: StateTable) -> StateTable:
    """Rows of one thread that continue the previous one in every column (and no waker ends the
    previous one) are joined: the first row's columns, the last one's end and waker."""
    if len(s) < 2:
        return s
    same = ((s.tid[1:] == s.tid[:-1]) & (s.state[1:] == s.state[:-1]) & (s.cpu[1:] == s.cpu[:-1])
            & (s.addr[1:] == s.addr[:-1]) & (s.repaired[1:] == s.repaired[:-1]) & (s.waker[:-1] == -1)
            & (s.start_ns[1:] == s.end_ns[:-1]))
    starts = np.flatnonzero(np.r_[True, ~same])
    last = np.r_[starts[1:] - 1, len(s) - 1]
    cols = {k: v[starts] for k, v in s.columns().items()}
    cols["end_ns"] = s.end_ns[last]
    cols["waker"] = s.waker[last]
    return StateTable(**cols)


@st.composite
def tables(draw):
    cols = {k: [] for k in StateTable.SCHEMA}
    t = 0
    for _ in range(draw(st.integers(0, 30))):
        d = draw(st.integers(0, 3))
        cols["tid"].append(draw(st.sampled_from([100, 100, 100, 101])))
        cols["start_ns"].append(t)
        cols["end_ns"].append(t + d)
        cols["state"].append(draw(st.sampled_from([0, 0, 2])))
        cols["cpu"].append(draw(st.sampled_from([-1, 0])))
        cols["addr"].append(draw(st.sampled_from([0, 0, 1 << 63])))
        cols["waker"].append(draw(st.sampled_from([-1, -1, 7])))
        cols["repaired"].append(draw(st.booleans()))
        t += d + draw(st.sampled_from([0, 0, 1]))
    cols["tid"].sort()
    return StateTable(**cols)


@settings(max_examples=300, deadline=None)
@given(tables())
def test_compiled_merge_is_the_numpy_statement(s):
    got, want = _merge_adjacent(s), reference(s)
    for k, v in want.columns().items():
        assert getattr(got, k).dtype == v.dtype
        np.testing.assert_array_equal(getattr(got, k), v, err_msg=k)


def test_worked_example():
    """Rows 0-1 join (the first has no waker); row 2 follows a waker and stays; row 3 is another thread."""
    s = StateTable(tid=[1, 1, 1, 2], start_ns=[0, 5, 8, 8], end_ns=[5, 8, 9, 9], state=[2, 2, 2, 2],
                   cpu=[-1] * 4, addr=[3, 3, 3, 3], waker=[-1, 9, -1, -1], repaired=[False] * 4)
    got = _merge_adjacent(s)
    assert got.start_ns.tolist() == [0, 8, 8] and got.end_ns.tolist() == [8, 9, 9] and got.waker.tolist() == [9, -1, -1]
    assert _merge_adjacent(got) is got
