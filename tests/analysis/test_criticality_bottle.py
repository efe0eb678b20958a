"""Criticality stacks and bottle graphs: the thesis's worked example and their invariants."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.bottle import bottle
from scalestack.analysis.criticality import criticality
from scalestack.errors import UserError
from scalestack.trace import State

from ..unit.test_trace import tiled_traces
from .fig32 import fig32_trace


def test_thesis_figure_3_2():
    res = criticality(fig32_trace(unit=1))
    assert res.criticality_ns.tolist() == [6.5, 5.0, 5.0, 5.5]
    assert res.running_ns.tolist() == [11, 16, 16, 17]
    assert np.allclose(res.parallelism, [11 / 6.5, 3.2, 3.2, 17 / 5.5])
    assert res.most_critical_tid == 10 and res.idle_ns == 0 and res.span_ns == 22


@settings(max_examples=30, deadline=None)
@given(st.tuples(st.integers(1, 9), st.integers(1, 9)), st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9)))
def test_figure_3_2_is_the_same_for_every_split(t06, t135):
    """C, Run and P only depend on t0 + t6 = 6 and t1 + t3 + t5 = 9 (spec property)."""
    a, b = t06
    x, y, z = t135
    # scale so t0 + t6 = 6u and t1 + t3 + t5 = 9u with u = a + b = x + y + z in a common unit
    u = (a + b) * (x + y + z)
    durations = (6 * a * (x + y + z), 9 * x * (a + b), u, 9 * y * (a + b), u, 9 * z * (a + b), 6 * b * (x + y + z), 5 * u)
    res = criticality(fig32_trace(durations, unit=1))
    assert np.allclose(res.criticality_ns / u, [6.5, 5, 5, 5.5])
    assert np.allclose(res.running_ns / u, [11, 16, 16, 17])


@settings(max_examples=80, deadline=None)
@given(tiled_traces(), st.sampled_from(["running", "running+runnable"]))
def test_invariants(trace, active):
    res = criticality(trace, active=active)
    # criticalities plus idle time cover the span exactly
    assert res.criticality_ns.sum() + res.idle_ns == pytest.approx(res.span_ns, abs=1e-6 * max(res.span_ns, 1))
    # C x P = running time, 1 <= P <= max concurrency
    ran = res.criticality_ns > 0
    assert np.allclose(res.criticality_ns[ran] * res.parallelism[ran], res.running_ns[ran])
    states = (State.RUNNING,) if active == "running" else (State.RUNNING, State.RUNNABLE)
    assert np.all(res.parallelism[ran] >= 1 - 1e-9)
    assert np.all(res.parallelism[ran] <= len(trace.threads) + 1e-9)
    times = trace.time_in_states()
    assert np.allclose(res.running_ns, sum(times[:, s] for s in states))
    # grouping adds heights and areas
    whole = bottle(trace, group_by=".*=all", active=active)
    assert len(whole.boxes) == 1
    assert whole.boxes[0].height_ns == pytest.approx(res.criticality_ns.sum())
    assert whole.boxes[0].area_ns == pytest.approx(res.running_ns.sum())
    by_role = bottle(trace, group_by="role", active=active)
    assert sum(b.height_ns for b in by_role.boxes) == pytest.approx(res.criticality_ns.sum())


@settings(max_examples=40, deadline=None)
@given(tiled_traces(), st.integers(1, 4000))
def test_windows_add_up_to_the_whole(trace, window):
    whole = criticality(trace)
    wb = bottle(trace, window=window)
    per_thread: dict[int, list[float]] = {}
    for w in wb.windows:
        assert sum(b.height_ns for b in w.boxes) + w.idle_ns == pytest.approx(w.span_ns, abs=1e-6 * w.span_ns)
        for b in w.boxes:
            acc = per_thread.setdefault(b.tids[0], [0.0, 0.0])
            acc[0] += b.height_ns
            acc[1] += b.area_ns
    for i, tid in enumerate(whole.tids):
        got = per_thread.get(int(tid), [0.0, 0.0])
        assert got[0] == pytest.approx(whole.criticality_ns[i], abs=1e-6 * max(whole.span_ns, 1))
        assert got[1] == pytest.approx(whole.running_ns[i])


def test_bottle_layout_widest_at_the_bottom():
    res = bottle(fig32_trace(unit=1))
    widths = [b.width for b in res.boxes]
    assert widths == sorted(widths, reverse=True)
    assert res.boxes[-1].tids == (10,)  # the neck on top: T0, critical
    assert res.height_ns == 22


def test_between_and_json_roundtrip():
    tr = fig32_trace(unit=1)
    res = criticality(tr, between=(3, 10))
    assert res.span_ns == 7 and res.criticality_ns.sum() == pytest.approx(7)
    data = json.loads(res.to_json())
    assert data["kind"] == "criticality" and data["threads"][0]["tid"] == res.most_critical_tid
    bj = json.loads(bottle(tr, window="8ns").to_json())
    assert bj["window_ns"] == 8 and len(bj["windows"]) == 3


def test_errors():
    tr = fig32_trace(unit=1)
    with pytest.raises(UserError):
        criticality(tr, active="sleeping")
    with pytest.raises(UserError):
        bottle(tr, window="fast")
    with pytest.raises(UserError):
        bottle(tr, group_by="no-equals-sign")
    with pytest.raises(UserError):
        criticality(tr, between=(50, 60))


def _timeline_reference(start, end, t0, t1):
    """F(t) by whole-array cumulative sums (the sweep's definition, as first written)."""
    n = len(start)
    times = np.empty(2 * n + 2, dtype=np.int64)
    times[0:2 * n:2], times[1:2 * n:2], times[2 * n], times[2 * n + 1] = start, end, t0, t1
    delta = np.zeros(2 * n + 2, dtype=np.int64)
    delta[0:2 * n:2], delta[1:2 * n:2] = 1, -1
    order = np.argsort(times, kind="stable")
    u, r = times[order], np.cumsum(delta[order])
    dt, rk = np.diff(u), r[:-1]
    F = np.concatenate([[0.0], np.cumsum(np.where(rk > 0, dt / np.maximum(rk, 1), 0.0))])
    idle = np.concatenate([[0], np.cumsum(np.where(rk == 0, dt, 0))])
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order))
    return u, r, F, idle, where


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)), max_size=80), st.integers(0, 2_000))
def test_compiled_timeline_equals_the_cumulative_sums_bit_for_bit(spans, t0):
    from scalestack.analysis.criticality import timeline

    a = np.array([s for s, _ in spans], np.int64)
    b = a + np.array([d for _, d in spans], np.int64)
    tl, where = timeline(a, b, t0, 13_000)
    got = (tl.u, tl.r, tl.F, tl.idle_cum, where)
    for x, y in zip(got, _timeline_reference(a, b, t0, 13_000), strict=True):
        assert np.array_equal(x, y)


def test_one_window_over_the_run_is_the_whole_runs_graph():
    """A recorded trace's criticality lies over its switch spans (where each slice was in time);
    windowed graphs took the states' intervals instead, so one window over the run differed from
    the whole run's graph (idle 425 against 199 µs on a 0.3 s recording)."""
    from scalestack.ingest.perf_data import load

    from ..conftest import ROOT

    trace = load(str(ROOT / "tests/data/barrier.perf.data"), comm="bi")
    assert len(trace.switch_spans)
    whole = bottle(trace)
    (one,) = bottle(trace, window=trace.wall_ns + 1).windows
    assert one.idle_ns == pytest.approx(whole.idle_ns)
    assert [(b.label, b.height_ns, b.area_ns) for b in one.boxes] == \
        [(b.label, pytest.approx(b.height_ns), pytest.approx(b.area_ns)) for b in whole.boxes]
