"""The compiled per-thread RUNNING sums of `kernel_runtime_check` against the NumPy statement they
replace, on random state rows (tids in and out of the list, in any order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.builder import _running_sums


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([3, 5, 5, 9, 12, 40]), st.integers(0, 50), st.integers(0, 30),
                          st.integers(0, 5)), max_size=40))
def test_running_sums_are_the_add_at_statement(rows):
    tid = np.array([r[0] for r in rows], np.int32)
    start = np.array([r[1] for r in rows], np.int64)
    end = start + np.array([r[2] for r in rows], np.int64)
    state = np.array([r[3] for r in rows], np.uint8)
    tids = np.array([5, 9, 12], np.int64)
    run, ok = _running_sums(tid, start, end, state, tids, 1)
    want = np.zeros(len(tids), np.int64)
    m = state == 1
    pos = np.searchsorted(tids, tid[m])
    assert ok == bool(np.all(pos < len(tids)))
    if ok:
        np.add.at(want, pos, (end - start)[m])
        assert run.tolist() == want.tolist()
