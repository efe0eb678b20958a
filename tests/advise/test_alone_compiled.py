"""alone_time and the criticality stack's Run_j are compiled passes over the states (advice._alone,
criticality._active_ns): the same numbers as the sweep and np.bincount over the active intervals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.advice import _alone_by_sweep, alone_time
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
