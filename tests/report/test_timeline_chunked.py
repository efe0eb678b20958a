"""The timeline's data of a stored trace read in time chunks is the whole trace's: the same payload
(the packed bytes too) and summary, interval by interval and summarised, whatever the chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis import chunked
from scalestack.ingest.perf_data import read_perf_data
from scalestack.report import ReportOptions
from scalestack.report import timeline as timeline_module
from scalestack.report.timeline import timeline_data
from scalestack.report.timeline_chunked import timeline_data_stored
from scalestack.trace import store
from scalestack.trace.builder import build_trace

from ..analysis.test_chunked import _with_spans
from ..unit.test_trace import tiled_traces
from .test_timeline import traces

DATA = Path(__file__).resolve().parents[1] / "data"


def _marks(trace, draw_marks: bool) -> list[dict] | None:
    """A phase and a lock mark (one on a thread, one on a tid that is none), or no marks (the page
    then adds its windows)."""
    if not draw_marks:
        return None
    t0, t1 = trace.start_ns, trace.end_ns
    return [{"kind": "phase", "label": "p", "t0_ns": t0, "t1_ns": (t0 + t1) // 2},
            {"kind": "lock", "label": "l", "t0_ns": t0 + 1, "t1_ns": t1, "tid": int(trace.threads.tid[0])},
            {"kind": "lock", "label": "m", "t0_ns": t0 + 2, "t1_ns": t1, "tid": 99999}]


def _same(path, options, marks, max_rows: int) -> dict:
    whole = timeline_data(scalestack.load(path), options, marks)
    calls: list[tuple[int, int]] = []
    part = timeline_data_stored(path, options, marks, max_rows=max_rows, progress=lambda d, n: calls.append((d, n)))
    assert part["summary"] == whole["summary"]
    assert part["payload"]["blob"] == whole["payload"]["blob"]
    assert part["payload"] == whole["payload"]
    assert calls and calls[-1][0] == calls[-1][1] and [d for d, _ in calls] == list(range(1, len(calls) + 1))
    return whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=st.one_of(tiled_traces(), traces()), spans=st.sampled_from([None, 0, 7]), group=st.integers(1, 6),
       max_rows=st.integers(1, 40), active=st.sampled_from(["running", "running+runnable"]),
       group_by=st.sampled_from([None, "role"]), marks=st.booleans(),
       limit=st.one_of(st.none(), st.integers(5, 50)))
def test_chunks_give_the_whole_traces_timeline(tmp_path_factory, monkeypatch, trace, spans, group, max_rows, active,
                                               group_by, marks, limit):
    monkeypatch.setattr(store, "ROW_GROUP", group)  # many row groups, so chunks can skip most
    if limit is not None:  # summarised: each lane's dominant state per bucket
        monkeypatch.setattr(timeline_module, "MAX_DETAIL", limit)
    if spans is not None:
        trace = _with_spans(trace, spans)
    path = tmp_path_factory.mktemp("tl") / "t.trace"
    store.save(trace, path)
    _same(path, ReportOptions(active=active, group_by=group_by), _marks(trace, marks), max_rows)


def test_a_recording_in_chunks_is_the_whole(tmp_path, monkeypatch):
    """A real recording (switch spans, CPUs, futex waits, wakers) and a simulated run, read in many
    chunks, interval by interval and summarised."""
    from scalestack.sim.engine import simulate
    from scalestack.sim.workloads import random_workload

    monkeypatch.setattr(store, "ROW_GROUP", 4)
    runs = {"rec": build_trace(read_perf_data(DATA / "barrier.perf.data"), comm="bi"),
            "sim": simulate(random_workload(8, 3), cores=3, timeslice_ns=20_000).trace}  # preempted: 330 rows
    for name, trace in runs.items():
        path = tmp_path / f"{name}.trace"
        store.save(trace, path)
        t0, t1 = chunked._stored_range(path, store.read_meta(path))
        assert len(chunked.plan(path, t0, t1, 12)) >= 4
        for limit in (timeline_module.MAX_DETAIL, 30):
            monkeypatch.setattr(timeline_module, "MAX_DETAIL", limit)
            for active in ("running", "running+runnable"):
                whole = _same(path, ReportOptions(active=active), _marks(trace, True), 12)
                assert (whole["payload"]["summaryNs"] > 0) == (limit == 30)


def test_an_empty_interval_at_a_chunks_edge_is_kept_once(tmp_path, monkeypatch):
    """A zero-length state row where one window ends and the next begins (no valid trace has one,
    but a stored one may), in a row group that ends there: the window before reads it and keeps it."""
    monkeypatch.setattr(store, "ROW_GROUP", 2)
    n, z = 40, 19
    starts = np.arange(n) * 10
    st_cols = {"tid": [1] * (n + 1) + [2] * n, "start_ns": [*starts[:z], z * 10, *starts[z:]] + list(starts),
               "end_ns": [*(starts[:z] + 10), z * 10, *(starts[z:] + 10)] + list(starts + 10),
               "state": [i % 3 for i in range(n + 1)] + [(i + 1) % 3 for i in range(n)]}
    trace = scalestack.trace.make_trace({"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0],
                                         "end_ns": [n * 10, n * 10]}, st_cols)
    path = tmp_path / "t.trace"
    store.save(trace, path)
    rows, lo, hi = store.group_ranges(path, "states")
    assert np.any(hi == z * 10)  # the empty row's group ends where it is
    for max_rows in range(1, 12):
        assert max_rows > 9 or any(a == z * 10 for a, _ in chunked.plan(path, 0, n * 10, max_rows))
        _same(path, ReportOptions(), None, max_rows)


def test_rows_outside_the_traces_range_are_kept_once(tmp_path, monkeypatch):
    """State rows before the meta's start or after its end (a trace cut without its rows) are
    read by the first or last window, as the whole trace holds them."""
    monkeypatch.setattr(store, "ROW_GROUP", 2)
    n = 40
    starts = np.arange(n) * 10
    trace = scalestack.trace.make_trace(
        {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [n * 10, n * 10]},
        {"tid": [1] * n + [2] * n, "start_ns": list(starts) * 2, "end_ns": list(starts + 10) * 2,
         "state": [i % 3 for i in range(2 * n)]}, meta={"start_ns": 45, "end_ns": n * 10 - 45})
    path = tmp_path / "t.trace"
    store.save(trace, path)
    for max_rows in (1, 4, 12):
        _same(path, ReportOptions(), None, max_rows)
