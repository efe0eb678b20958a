"""The Trace model: tiling checks, derived views, save/load."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.errors import UserError
from scalestack.trace import State, make_trace

from .test_replay_events import _any_traces


def small_trace():
    return make_trace(
        {"tid": [10, 11], "name": ["main", "worker"], "start_ns": [0, 5], "end_ns": [100, 90]},
        {"tid": [10, 10, 11, 11, 11], "start_ns": [0, 40, 5, 30, 60], "end_ns": [40, 100, 30, 60, 90],
         "state": [0, 2, 0, 1, 0]},
        meta={"root_tid": 10},
    )


def test_validate_and_time_in_states():
    t = small_trace()
    t.validate()
    times = t.time_in_states()
    assert times[0, State.RUNNING] == 40 and times[0, State.SYNC_WAIT] == 60
    assert times[1, State.RUNNING] == 55 and times[1, State.RUNNABLE] == 30
    assert list(t.threads.role) == ["main", "app"]
    assert t.wall_ns == 100


def test_thread_index_raises_or_marks_unknown_tids():
    t = small_trace()
    assert t.thread_index(np.array([11, 10, 11])).tolist() == [1, 0, 1]
    with pytest.raises(KeyError, match="tid 99"):
        t.thread_index(np.array([10, 99]))
    assert t.thread_index(np.array([11, -1, 99, 10]), missing=-1).tolist() == [1, -1, -1, 0]  # e.g. wakers
    empty = make_trace({"tid": [], "name": [], "start_ns": [], "end_ns": []},
                       {"tid": [], "start_ns": [], "end_ns": [], "state": []})
    assert empty.thread_index(np.array([5]), missing=-1).tolist() == [-1]
    with pytest.raises(KeyError, match="tid 5"):
        empty.thread_index(5)


def test_validate_rejects_gap():
    t = make_trace({"tid": [1], "name": ["a"], "start_ns": [0], "end_ns": [10]},
                   {"tid": [1, 1], "start_ns": [0, 6], "end_ns": [5, 10], "state": [0, 0]})
    with pytest.raises(ValueError, match="gap"):
        t.validate()


def test_between_clips():
    t = small_trace().between(20, 70)
    t.validate()
    assert t.wall_ns == 50
    assert t.time_in_states().sum() == 50 + 50


def test_save_load_roundtrip(tmp_path):
    t = small_trace()
    p = tmp_path / "x.trace"
    scalestack.save(t, p)
    u = scalestack.load(p)
    assert u.equals(t, meta_keys=("root_tid", "start_ns", "end_ns"))


def test_load_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        scalestack.load(tmp_path / "missing.trace")
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"hello")
    with pytest.raises(UserError, match="not a scalestack trace"):
        scalestack.load(bad)


@st.composite
def tiled_traces(draw):
    """Random traces whose states tile each thread's lifetime."""
    n = draw(st.integers(1, 5))
    tids, starts, ends, s_tid, s_a, s_b, s_st = [], [], [], [], [], [], []
    for k in range(n):
        cuts = sorted(set(draw(st.lists(st.integers(0, 10_000), min_size=2, max_size=12))))
        if len(cuts) < 2:
            cuts = [0, 1]
        tids.append(100 + k)
        starts.append(cuts[0])
        ends.append(cuts[-1])
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            s_tid.append(100 + k)
            s_a.append(a)
            s_b.append(b)
            s_st.append(draw(st.integers(0, 5)))
    return make_trace({"tid": tids, "name": [f"t{i}" for i in tids], "start_ns": starts, "end_ns": ends},
                      {"tid": s_tid, "start_ns": s_a, "end_ns": s_b, "state": s_st})


@settings(max_examples=60, deadline=None)
@given(tiled_traces(), st.integers(0, 10_000), st.integers(1, 10_000))
def test_between_keeps_tiling(trace, t0, width):
    trace.validate()
    lo, hi = max(t0, trace.start_ns), min(t0 + width, trace.end_ns)
    if hi <= lo:
        return
    part = trace.between(lo, hi)
    part.validate()
    # time in states inside the window = sum of each thread's overlap with it
    overlap = np.clip(np.minimum(trace.threads.end_ns, hi) - np.maximum(trace.threads.start_ns, lo), 0, None)
    assert part.time_in_states().sum() == overlap.sum()


def _time_in_states_numpy(trace):
    """time_in_states as NumPy computes it (the compiled lookup.state_sums replaces it)."""
    out = np.zeros((len(trace.threads), len(State)), dtype=np.int64)
    if len(trace.states):
        flat = trace.thread_index(trace.states.tid) * len(State) + trace.states.state.astype(np.int64)
        out.ravel()[:] = np.bincount(flat, weights=trace.states.duration_ns, minlength=out.size).astype(np.int64)
    return out


@settings(max_examples=100, deadline=None)
@given(tiled_traces(), st.data())
def test_time_in_states_is_the_bincount(trace, data):
    assert np.array_equal(trace.time_in_states(), _time_in_states_numpy(trace))
    other = data.draw(_any_traces())  # rows in any order, a thread's rows apart
    assert np.array_equal(other.time_in_states(), _time_in_states_numpy(other))


def test_time_in_states_of_a_tid_that_is_not_a_thread():
    t = small_trace()
    cols = t.states.columns()
    cols["tid"] = np.where(cols["tid"] == 11, 12, cols["tid"])
    bad = type(t)(threads=t.threads, states=type(t.states)(**cols), names=t.names, meta=t.meta)
    with pytest.raises(KeyError, match="tid 12"):
        bad.time_in_states()
