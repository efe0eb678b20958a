"""The timeline's compiled passes against the NumPy statements they replace: the criticality strip
read off the shared sweep (timeline._strip), each thread's block of rows (timeline._blocks) and the
intervals that do not follow their predecessor (timeline._gaps)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.criticality import critical_sweep
from scalestack.report import timeline
from scalestack.report.timeline import critical_segments, lane_order

from ..unit.test_replay_events import _any_traces, _trace
from .test_timeline import traces


def _strip_by_sorting(trace, lane_of_row, active="running"):
    """The strip as it was computed: the endpoints sorted again, counts and lane sums cumulated."""
    t0, t1 = trace.start_ns, trace.end_ns
    rows, a, b, _, _ = critical_sweep(trace, active, t0, t1)
    lanes = lane_of_row[rows].astype(np.int64)
    times = np.concatenate([a, b, [t0, t1]]).astype(np.int64)
    delta = np.concatenate([np.ones(len(a), np.int64), -np.ones(len(b), np.int64), [0, 0]])
    order = np.argsort(times, kind="stable")
    u = times[order]
    r = np.cumsum(delta[order])
    s = np.cumsum(np.concatenate([lanes, -lanes, [0, 0]])[order])
    lone = np.where(r == 1, s, -1)
    start, end, rr, ll = u[:-1], u[1:], r[:-1], lone[:-1]
    keep = end > start
    start, end, rr, ll = start[keep], end[keep], rr[keep], ll[keep]
    if len(start) == 0:
        return start, end, rr, ll
    change = np.r_[True, (rr[1:] != rr[:-1]) | (ll[1:] != ll[:-1]) | (start[1:] != end[:-1])]
    idx = np.flatnonzero(change)
    return start[idx], np.r_[end[idx[1:] - 1], end[-1]], rr[idx], ll[idx]


def _lanes(trace):
    order, _ = lane_order(trace)
    lane_of_row = np.empty(len(order), np.int64)
    lane_of_row[order] = np.arange(len(order))
    return order, lane_of_row


def test_hand_checked_blocks_gaps_and_strip():
    # thread 2's rows come first; thread 1's are out of time order and leave a gap at [5,6)
    tr = _trace([(1, 0), (2, 0)], [(2, 0, 10, 0, -1), (2, 10, 20, 2, 1), (1, 6, 20, 0, -1), (1, 0, 5, 1, -1)])
    st_, lo, hi = timeline._thread_blocks(tr)
    assert st_.start_ns.tolist() == [0, 6, 0, 10] and lo.tolist() == [0, 2] and hi.tolist() == [2, 4]
    rows, starts = timeline._gaps(st_.start_ns, st_.end_ns, lo, hi)
    assert rows.tolist() == [1] and starts.tolist() == [6]
    # running: thread 2 in [0,10), thread 1 in [6,20): lone 2, both, lone 1, then nobody until 100
    order, lane_of_row = _lanes(tr)
    a, b, r, lone = critical_segments(tr, lane_of_row)
    assert (a.tolist(), b.tolist(), r.tolist()) == ([0, 6, 10, 20], [6, 10, 20, 100], [1, 2, 1, 0])
    assert lone.tolist() == [lane_of_row[1], -1, lane_of_row[0], -1]


@settings(max_examples=150, deadline=None)
@given(st.one_of(traces(), _any_traces()), st.sampled_from(["running", "running+runnable"]))
def test_compiled_passes_match_numpy(trace, active):
    order, lane_of_row = _lanes(trace)
    got, want = critical_segments(trace, lane_of_row, active), _strip_by_sorting(trace, lane_of_row, active)
    assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(got, want, strict=True))
    s = trace.states
    idx = np.lexsort((s.start_ns, lane_of_row[trace.thread_index(s.tid)]))  # lane order, as it was sorted
    st_, lo, hi = timeline._thread_blocks(trace)
    mine = np.concatenate([np.arange(a, b) for a, b in zip(lo[order], hi[order], strict=True)] + [np.zeros(0, int)])
    for name in ("tid", "start_ns", "end_ns", "state", "waker"):
        assert np.array_equal(getattr(st_, name)[mine], getattr(s, name)[idx])
    starts, ends = s.start_ns[idx], s.end_ns[idx]
    counts = hi[order] - lo[order]
    gaps = starts != np.r_[0, ends[:-1]] if len(starts) else np.zeros(0, bool)
    gaps[np.r_[0, np.cumsum(counts)][:-1][counts > 0]] = False
    rows, at = timeline._gaps(st_.start_ns, st_.end_ns, lo[order], hi[order])
    assert np.array_equal(rows, np.flatnonzero(gaps)) and np.array_equal(at, starts[gaps])
