"""The lookup helpers of the state builder against the NumPy functions they replace."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.builder import _by_thread_then_start
from scalestack.trace.lookup import member, stable_order_by, unique_first

ints = st.lists(st.integers(-5, 300), max_size=60)


@settings(max_examples=200, deadline=None)
@given(ints, st.lists(st.integers(0, 250), max_size=8), st.sampled_from([np.int32, np.int64, np.uint8, np.int16]))
def test_member_is_isin(x, values, dtype):
    arr = np.array(x, np.int64)
    if dtype == np.uint8:
        arr = arr[(arr >= 0) & (arr < 256)]
    arr = arr.astype(dtype)
    np.testing.assert_array_equal(member(arr, values), np.isin(arr, values))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=80))
def test_counting_order_is_the_stable_argsort(keys):
    k = np.array(keys, np.int64)
    np.testing.assert_array_equal(stable_order_by(k, 7), np.argsort(k, kind="stable"))


@settings(max_examples=200, deadline=None)
@given(ints, st.sampled_from([np.int32, np.int64]))
def test_unique_first_is_unique_with_first_indices(x, dtype):
    arr = np.array(x, dtype)
    got, want = unique_first(arr), np.unique(arr, return_index=True)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_worked_examples():
    assert [a.tolist() for a in unique_first(np.array([5, 3, 5, 0]))] == [[0, 3, 5], [3, 1, 0]]
    assert member(np.array([3, -1, 7, 100]), [3, 7]).tolist() == [True, False, True, False]
    assert stable_order_by(np.array([1, 0, 1, 0]), 2).tolist() == [1, 3, 0, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5)), max_size=40), st.booleans())
def test_by_thread_then_start_is_the_lexsort(rows, in_time_order):
    if in_time_order:  # what the walk emits: each thread's rows in time order
        rows = sorted(rows, key=lambda r: r[1])
    slot = np.array([r[0] for r in rows], np.int32)
    start = np.array([r[1] for r in rows], np.int64)
    np.testing.assert_array_equal(_by_thread_then_start(slot, start, 4), np.lexsort((start, slot)))
