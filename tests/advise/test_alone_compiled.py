"""alone_time, the waits each thread ends (advice._alone, WaitSums.caused) and the criticality
stack's Run_j (criticality._active_ns) are compiled passes over the states: the same numbers as
the sweep, the loop and np.bincount they replace."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.advice import (
    WaitSums,
    _alone_by_sweep,
    alone_time,
    with_inferred_wakers,
)
from scalestack.analysis.criticality import active_intervals, active_ns

from ..unit.test_replay_events import _any_traces, _trace


def test_hand_checked_alone_and_run():
    # thread 1 runs [0,10) then waits; thread 2 waits, runs [5,15), runs again [20,30) (clipped at 25)
    tr = _trace([(1, 0), (2, 0)], [(1, 0, 10, 0, -1), (1, 10, 30, 2, -1),
                                   (2, 0, 5, 2, -1), (2, 5, 15, 0, -1), (2, 15, 20, 1, -1), (2, 20, 30, 0, -1)])
    assert alone_time(tr) == {1: 5, 2: 15} == _alone_by_sweep(tr)  # [0,5), [10,15) + [20,30): one runner
    assert active_ns(tr, "running", 0, 25).tolist() == [10.0, 15.0]
    assert active_ns(tr, "running+runnable", 0, 100).tolist() == [10.0, 25.0]
    # thread 1's rows out of time order (the sweep is used): alone [0,5) and [25,30), 2 alone [10,20)
    tr = _trace([(1, 0), (2, 0)], [(1, 20, 30, 0, -1), (1, 0, 10, 0, -1), (2, 5, 25, 0, -1)])
    assert alone_time(tr) == {1: 10, 2: 10} == _alone_by_sweep(tr)


@settings(max_examples=300, deadline=None)
@given(_any_traces(), st.integers(0, 10), st.integers(0, 40))
def test_compiled_passes_match_the_sweep(tr, t0, width):
    got = alone_time(tr)
    want = _alone_by_sweep(tr)
    assert got == want and list(got) == list(want)
    for active in ("running", "running+runnable"):
        rows, a, b = active_intervals(tr, active, t0, t0 + width)
        ref = np.bincount(rows, weights=(b - a).astype(np.float64), minlength=len(tr.threads))
        assert np.array_equal(active_ns(tr, active, t0, t0 + width), ref)


def _caused_by_loop(trace, woken):
    """The sum per waker as it was computed: a Python loop over the waits."""
    st = trace.states
    caused: dict[int, int] = {}
    for w, d in zip(st.waker[woken].tolist(), st.duration_ns[woken].tolist(), strict=True):
        caused[w] = caused.get(w, 0) + int(d)
    return caused


def test_hand_checked_caused_wait():
    # thread 1 waits [0,4) for 2 and [6,9) for 2; thread 2 waits [4,6) for 1; a wait by a stranger (99) is left out
    tr = _trace([(1, 0), (2, 0)], [(1, 0, 4, 2, 2), (1, 4, 6, 0, -1), (1, 6, 9, 2, 2), (2, 0, 4, 0, -1),
                                   (2, 4, 6, 2, 1), (2, 6, 9, 2, 99)])
    got = WaitSums.of(tr.states, tr.threads.tid).caused()
    assert got == {2: 7, 1: 2} and list(got) == [2, 1]


@settings(max_examples=200, deadline=None)
@given(_any_traces())
def test_caused_wait_is_the_loop(tr):
    """In (thread, start) row order, as the builder writes states: wakers in order of first wait."""
    st = tr.states
    tr = dataclasses.replace(tr, states=st.take(np.lexsort((st.start_ns, st.tid))))
    woken = (tr.states.state == 2) & np.isin(tr.states.waker, tr.threads.tid)
    got, want = WaitSums.of(tr.states, tr.threads.tid).caused(), _caused_by_loop(tr, woken)
    assert got == want
    st = tr.states
    first = {w: min((t, s) for t, s, x in zip(st.tid[woken].tolist(), st.start_ns[woken].tolist(),
                                              st.waker[woken].tolist(), strict=True) if x == w) for w in got}
    keys = [first[w] for w in got]  # waits tied at one (waiter, start) may come in either order
    assert keys == sorted(keys)


def _inferred_by_numpy(trace, slack_ns=50_000):
    """The wakers with_inferred_wakers gave with its 64-column NumPy arrays."""
    st = trace.states
    waker = st.waker.copy()
    lost = np.flatnonzero((st.state == 2) & ~np.isin(st.waker, trace.threads.tid))
    run = np.flatnonzero(st.state == 0)
    if len(lost) == 0 or len(run) == 0:
        return waker
    order = run[np.argsort(st.start_ns[run], kind="stable")]
    starts, ends, who = st.start_ns[order], st.end_ns[order], st.tid[order]
    t = st.end_ns[lost]
    k = np.searchsorted(starts, t, side="right")
    idx = k[:, None] - 1 - np.arange(64)[None, :]
    ok = idx >= 0
    idx = np.maximum(idx, 0)
    near = ok & (ends[idx] >= (t - slack_ns)[:, None]) & (who[idx] != st.tid[lost][:, None])
    cand = who[idx].astype(np.int64)
    lo = np.where(near, cand, np.iinfo(np.int64).max).min(axis=1)
    hi = np.where(near, cand, -1).max(axis=1)
    one = (lo == hi) & (hi >= 0)
    waker[lost[one]] = hi[one]
    return waker


def test_hand_checked_inferred_waker():
    # threads 1 and 3 wait [0,10) for no traced thread (-1, 77); thread 2 ran [0,9), the only
    # candidate: within 5 ns of their end it is their waker, within 0 ns it is not
    tr = _trace([(1, 0), (2, 0), (3, 0)], [(1, 0, 10, 2, -1), (2, 0, 9, 0, -1), (2, 9, 10, 4, -1),
                                           (3, 0, 10, 2, 77)])
    assert with_inferred_wakers(tr, slack_ns=5).states.waker.tolist() == [2, -1, -1, 2]
    assert with_inferred_wakers(tr, slack_ns=0).states.waker.tolist() == [-1, -1, -1, 77]  # 2 stopped at 9


@settings(max_examples=200, deadline=None)
@given(_any_traces(), st.integers(0, 3))
def test_inferred_wakers_are_numpys(tr, slack):
    got = with_inferred_wakers(tr, slack_ns=slack).states.waker
    assert np.array_equal(got, _inferred_by_numpy(tr, slack))
