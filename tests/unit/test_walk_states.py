"""The compiled finish of the state walk (clip to the window, order by thread then start, split into
columns) against the NumPy statement it replaces, on random walk rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.builder import _walk_states


def reference(rows, tail, t0, t1, tids):
    out = np.concatenate([rows, tail]).reshape(-1, 8)
    keep = (out[:, 2] > t0) & (out[:, 1] < t1)
    out = out[keep]
    start, end = np.maximum(out[:, 1], t0), np.minimum(out[:, 2], t1)
    order = np.lexsort((start, out[:, 0]))
    return (tids[out[:, 0]][order].astype(np.int32), start[order], end[order], out[order, 3].astype(np.uint8),
            out[order, 4].astype(np.int16), out[order, 5], out[order, 6].astype(np.int32), out[order, 7].astype(bool))


row = st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 15), st.integers(0, 5), st.integers(-1, 3),
                st.sampled_from([0, 0xABC, -(1 << 62)]), st.sampled_from([-1, 100]), st.integers(0, 1))


def table(rs):
    return np.array([(s, a, a + d, *rest) for s, a, d, *rest in rs], np.int64).reshape(-1, 8)


def columns(rows):
    """Walk rows (an 8-column int64 table) as the walk emits them: one array a column."""
    return tuple(rows[:, j].astype(t) for j, t in enumerate((np.int32, np.int64, np.int64, np.uint8, np.int16, np.int64,
                                                             np.int32, np.bool_)))


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=30), st.lists(row, max_size=5), st.integers(0, 20), st.integers(1, 30))
def test_walk_states_is_the_clip_and_lexsort(rows, tail, t0, width):
    tids = np.array([100, 101, 250], np.int64)
    *got, in_order = _walk_states(columns(table(rows)), columns(table(tail)), t0, t0 + width, tids, 0)
    want = reference(table(rows), table(tail), t0, t0 + width, tids)
    if not in_order:
        order = np.lexsort((got[1], got[0]))
        got = [g[order] for g in got]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_worked_example():
    """Slot 1's rows come first, clipped to [5, 20); slot 0's row ending at 5 is outside."""
    rows = np.array([[1, 0, 10, 2, -1, 0, -1, 0], [0, 0, 5, 0, 1, 0, -1, 1], [1, 10, 30, 0, 0, 0, 100, 1]])
    tid, start, end, state, cpu, addr, waker, rep, in_order = _walk_states(columns(rows), columns(rows[:0]), 5, 20,
                                                                           np.array([7, 8]), 0)
    assert in_order and tid.tolist() == [8, 8] and start.tolist() == [5, 10] and end.tolist() == [10, 20]
    assert state.tolist() == [2, 0] and waker.tolist() == [-1, 100] and rep.tolist() == [False, True]


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3000))
def test_giving_the_rows_back_changes_nothing(seed, release):
    """Given back every `release` rows as they are copied (the builder's way: the source is
    dropped afterwards), the columns are the same: no row is read after its memory went back
    (it would read zeros). Rows of many pages, so that whole pages go back."""
    rng = np.random.default_rng(seed)
    n = 20_000
    start = np.cumsum(rng.integers(0, 5, n)) + 1
    rows = np.stack([rng.integers(0, 3, n), start, start + rng.integers(0, 9, n), rng.integers(0, 6, n) + 1,
                     rng.integers(-1, 4, n), rng.integers(1, 1 << 40, n), rng.integers(-1, 99, n),
                     rng.integers(0, 2, n)], axis=1)
    tail = rows[:7].copy()
    tids = np.array([100, 101, 250], np.int64)
    want = _walk_states(columns(rows), columns(tail), 50, int(start[-1]) - 50, tids, 0)
    got = _walk_states(columns(rows), columns(tail), 50, int(start[-1]) - 50, tids, release)
    for g, w in zip(got[:-1], want[:-1], strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    assert got[-1] == want[-1]
