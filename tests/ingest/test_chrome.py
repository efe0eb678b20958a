"""Chrome / Perfetto JSON: generic slices in, exact round trip of our own export."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings

from scalestack.errors import UserError
from scalestack.ingest.chrome import export_chrome, from_chrome, load, sniff
from scalestack.trace import State, make_trace

from ..unit.test_trace import tiled_traces

EVENTS = [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "worker"}},
    {"ph": "B", "pid": 1, "tid": 7, "ts": 0, "name": "outer"},
    {"ph": "B", "pid": 1, "tid": 7, "ts": 2, "name": "inner"},
    {"ph": "E", "pid": 1, "tid": 7, "ts": 3},
    {"ph": "E", "pid": 1, "tid": 7, "ts": 5},
    {"ph": "X", "pid": 1, "tid": 7, "ts": 9, "dur": 1, "name": "later"},
]


def test_generic_nested_slices_become_running_and_sleep():
    doc = {"traceEvents": [*EVENTS, {"ph": "X", "pid": 1, "tid": 8, "ts": 1, "dur": 2, "name": "sync_wait"}]}
    tr = from_chrome(doc)
    tr.validate()
    s = tr.states
    rows = list(zip(s.tid.tolist(), s.start_ns.tolist(), s.end_ns.tolist(), s.state.tolist(), strict=True))
    assert rows == [(7, 0, 5000, State.RUNNING), (7, 5000, 9000, State.SLEEP), (7, 9000, 10000, State.RUNNING),
                    (8, 1000, 3000, State.SYNC_WAIT)]
    assert tr.threads.name.tolist() == ["worker", "8"]


@pytest.mark.parametrize("doc,match", [
    ({"traceEvents": [{"ph": "E", "tid": 1, "ts": 1}]}, "never begun"),
    ({"traceEvents": [{"ph": "B", "tid": 1, "ts": 1}]}, "never ended"),
    ({"traceEvents": [{"ph": "X", "tid": 1, "ts": "x", "dur": 1}]}, "numeric"),
    ({"traceEvents": [{"ph": "X", "tid": 1, "ts": 1, "dur": -1}]}, "negative"),
    ({"foo": 1}, "not a Chrome trace"),
    ({"traceEvents": []}, "no slices"),
])
def test_bad_documents_give_one_clear_line(doc, match):
    with pytest.raises(UserError, match=match):
        from_chrome(doc)


def test_invalid_json_names_the_byte(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [1, 2,,]}')
    with pytest.raises(UserError, match="byte"):
        load(str(p))


def _rows(tr):
    s = tr.states
    return list(zip(s.tid.tolist(), s.start_ns.tolist(), s.end_ns.tolist(), s.state.tolist(), strict=True))


def test_events_in_any_order_are_matched_in_time_order():
    """The Trace Event Format does not ask for events sorted by time: B and E pair up in it."""
    want = _rows(from_chrome(EVENTS))
    assert _rows(from_chrome(EVENTS[::-1])) == want
    assert _rows(from_chrome([EVENTS[0], EVENTS[4], EVENTS[2], EVENTS[1], EVENTS[3], EVENTS[5]])) == want


def test_threads_of_two_processes_with_one_tid_stay_two_threads():
    doc = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "p1main"}},
           {"ph": "M", "name": "thread_name", "pid": 2, "tid": 1, "args": {"name": "p2main"}},
           {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 100_000},
           {"ph": "X", "pid": 2, "tid": 1, "ts": 50_000, "dur": 200_000}]
    tr = from_chrome(doc)
    tr.validate()
    assert tr.threads.name.tolist() == ["p1main", "p2main"] and tr.threads.pid.tolist() == [1, 2]
    assert tr.threads.tid.tolist() == [1, 2]
    assert tr.time_in_states()[:, State.RUNNING].tolist() == [100_000_000, 200_000_000]
    assert any("tid 1 is a thread of process 1 and of process 2" in w for w in tr.meta["warnings"])


@pytest.mark.parametrize("tail", ["", ",", ",\n  "])
def test_an_array_without_its_closing_bracket_is_read(tmp_path, tail):
    """The JSON Array Format may end without its ']' (a tracer killed mid-run)."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps(EVENTS)[:-1] + tail)
    assert _rows(load(str(p))) == _rows(from_chrome(EVENTS))


@settings(max_examples=40, deadline=None)
@given(tiled_traces())
def test_export_import_roundtrip_is_exact(trace):
    doc = json.loads(json.dumps(export_chrome(trace)))
    assert sniff(json.dumps(doc).encode()[:4096])
    back = from_chrome(doc)
    assert back.equals(trace, meta_keys=("start_ns", "end_ns"))


def test_export_large_times_keep_nanoseconds():
    t0 = 1_700_000_000_123_456_789
    tr = make_trace({"tid": [1], "name": ["a"], "start_ns": [t0], "end_ns": [t0 + 7]},
                    {"tid": [1, 1], "start_ns": [t0, t0 + 3], "end_ns": [t0 + 3, t0 + 7], "state": [0, 2],
                     "addr": np.array([0, 2**63 + 5], dtype=np.uint64)})
    back = from_chrome(json.loads(json.dumps(export_chrome(tr))))
    assert back.equals(tr)
