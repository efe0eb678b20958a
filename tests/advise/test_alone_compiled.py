"""alone_time, the waits each thread ends (advice._alone, advice._caused) and the criticality
stack's Run_j (criticality._active_ns) are compiled passes over the states: the same numbers as
the sweep, the loop and np.bincount they replace."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.advice import _alone_by_sweep, alone_time, caused_wait
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
    woken = (tr.states.state == 2) & np.isin(tr.states.waker, tr.threads.tid)
    got = caused_wait(tr, woken)
    assert got == {2: 7, 1: 2} and list(got) == [2, 1]


@settings(max_examples=200, deadline=None)
@given(_any_traces())
def test_caused_wait_is_the_loop(tr):
    woken = (tr.states.state == 2) & np.isin(tr.states.waker, tr.threads.tid)
    got, want = caused_wait(tr, woken), _caused_by_loop(tr, woken)
    assert got == want and list(got) == list(want)
