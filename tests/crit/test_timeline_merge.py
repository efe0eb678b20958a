"""criticality.timeline merges the laid-out endpoints from their sorted runs (_merge_sweep) where
it used to sort them: the same timeline, point for point, as the stable sort gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis import criticality as c


def _by_sorting(a, b, t0, t1):
    n = len(a)
    m = 2 * n + 2
    u, r, F, idle, where = (np.empty(m, dt) for dt in (np.int64, np.int32, np.float64, np.int64, np.int32))
    times = np.empty(m, np.int64)
    times[0:2 * n:2], times[1:2 * n:2] = a, b
    times[2 * n], times[2 * n + 1] = t0, t1
    c._sweep(times, np.argsort(times, kind="stable"), n, u, r, F, idle, where)
    return (u, r, F, idle), where


def _same(a, b, t0, t1):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    tl, where = c.timeline(a, b, t0, t1)
    want, want_where = _by_sorting(a, b, t0, t1)
    got = (tl.u, tl.r, tl.F, tl.idle_cum)
    assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(got, want, strict=True))
    assert np.array_equal(where, want_where)
    return tl, where


def test_hand_checked_merge():
    # intervals [0,4), [6,8) (one thread's: one run) and [2,6) (a second run), window [0,10)
    tl, where = _same([0, 6, 2], [4, 8, 6], 0, 10)
    assert tl.u.tolist() == [0, 0, 2, 4, 6, 6, 8, 10] and tl.r.tolist() == [1, 1, 2, 1, 2, 1, 0, 0]
    assert where.tolist() == [0, 3, 4, 6, 2, 5, 1, 7]  # at 0 the start before t0; at 6 the start first
    assert tl.F.tolist() == [0.0, 0.0, 2.0, 3.0, 5.0, 5.0, 7.0, 7.0] and tl.idle_cum.tolist() == [0] * 7 + [2]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=40), st.integers(0, 5),
       st.integers(20, 40), st.booleans())
def test_merge_is_the_stable_sort(pairs, t0, t1, runs):
    if runs:  # one thread's intervals one after the other: one run, merged (else many: sorted)
        cuts = sorted({x for p in pairs for x in p})
        pairs = list(zip(cuts[:-1], cuts[1:], strict=True))
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    _same(a, b, t0, t1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=40), st.integers(0, 5),
       st.integers(20, 40), st.booleans())
def test_interval_F_is_the_timelines(pairs, t0, t1, runs):
    """F(b) - F(a) and the idle time without a timeline: the timeline's, bit for bit, merged or
    sorted."""
    if runs:
        cuts = sorted({x for p in pairs for x in p})
        pairs = list(zip(cuts[:-1], cuts[1:], strict=True))
    a = np.asarray([x for x, _ in pairs], np.int64)
    b = np.asarray([y for _, y in pairs], np.int64)
    tl, where = c.timeline(a, b, t0, t1)
    m = len(a)
    diff, idle = c.interval_F(a, b, t0, t1)
    assert np.array_equal(diff, tl.F[where[1:2 * m:2]] - tl.F[where[0:2 * m:2]])
    assert idle == float(tl.idle_cum[where[2 * m + 1]] - tl.idle_cum[where[2 * m]])
