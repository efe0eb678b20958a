"""A window of a saved trace is read without the rest (Parquet row groups skipped by their time
statistics) and cuts to exactly what the whole trace cut to the same window gives."""

from __future__ import annotations

import zipfile

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.trace import store

from .test_trace import tiled_traces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), t0=st.integers(0, 10_000), width=st.integers(1, 10_000), threads=st.sampled_from([1, 2]))
def test_a_window_loads_what_the_whole_trace_cut_there_holds(tmp_path_factory, monkeypatch, trace, t0, width, threads):
    monkeypatch.setattr(store, "ROW_GROUP", 3)  # many row groups, so most are skipped
    monkeypatch.setattr(store, "_read_threads", lambda rows, columns: min(threads, columns))
    path = tmp_path_factory.mktemp("w") / "t.trace"
    store.save(trace, path)
    lo, hi = max(t0, trace.start_ns), min(t0 + width, trace.end_ns)
    if hi <= lo:
        return
    part = store.load(path, window=(lo, hi))
    assert part.between(lo, hi).equals(store.load(path).between(lo, hi))
    assert len(part.states) <= len(trace.states)


def test_row_groups_outside_the_window_are_not_read(tmp_path, monkeypatch):
    from .test_trace import make_trace

    monkeypatch.setattr(store, "ROW_GROUP", 10)
    n = 1000  # one thread, 1000 states of 1 us
    trace = make_trace({"tid": [7], "name": ["t"], "start_ns": [0], "end_ns": [n * 1000]},
                       {"tid": [7] * n, "start_ns": [i * 1000 for i in range(n)],
                        "end_ns": [(i + 1) * 1000 for i in range(n)], "state": [i % 3 for i in range(n)]})
    path = tmp_path / "t.trace"
    store.save(trace, path)
    with zipfile.ZipFile(path) as zf, zf.open("states.parquet") as fh:
        assert pq.ParquetFile(fh).num_row_groups == 100
    part = store.load(path, window=(500_000, 505_000))
    assert len(part.states) == 10  # the one row group that holds 500-505 us, not the other 990 rows
    assert store.read_meta(path)["start_ns"] == 0


def test_a_file_saved_again_under_its_name_is_read_by_its_new_row_groups(tmp_path, monkeypatch):
    """The row groups' time ranges are kept between the windows a chunked analysis loads: a trace
    saved again under the same name (another recording) is read by its own ranges, not the kept ones."""
    from .test_trace import make_trace

    monkeypatch.setattr(store, "ROW_GROUP", 10)

    def states(n, step):
        return make_trace({"tid": [7], "name": ["t"], "start_ns": [0], "end_ns": [n * step]},
                          {"tid": [7] * n, "start_ns": [i * step for i in range(n)],
                           "end_ns": [(i + 1) * step for i in range(n)], "state": [i % 3 for i in range(n)]})

    path = tmp_path / "t.trace"
    store.save(states(100, 1000), path)
    assert len(store.load(path, window=(50_000, 55_000)).states) == 10
    store.save(states(1000, 100), path)  # the same times, ten times the rows
    part = store.load(path, window=(50_000, 55_000))
    assert part.between(50_000, 55_000).equals(store.load(path).between(50_000, 55_000))
    assert len(part.states) == 50


def test_meta_of_a_file_that_is_not_a_trace(tmp_path):
    bad = tmp_path / "x.trace"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UserError, match="not a scalestack trace"):
        store.read_meta(bad)


def test_a_trace_damaged_inside_a_member_is_one_error_line(tmp_path, monkeypatch):
    """Bytes overwritten inside the states member: loading it whole, a window of it, or a chunked
    analysis of it says the file is damaged (the decoder's or the ZIP's CRC complaint), in a
    UserError, not a traceback; the memory map's close, refused while the failed read's buffers are
    alive, does not hide it. A trace cut short says so (a file that was never a ZIP reads as not a
    trace: `test_meta_of_a_file_that_is_not_a_trace`)."""
    from scalestack.analysis.chunked import criticality as chunked_criticality

    from .test_trace import make_trace

    monkeypatch.setattr(store, "ROW_GROUP", 1000)
    n = 20_000
    trace = make_trace({"tid": [7], "name": ["t"], "start_ns": [0], "end_ns": [n * 1000]},
                       {"tid": [7] * n, "start_ns": [i * 1000 for i in range(n)],
                        "end_ns": [(i + 1) * 1000 for i in range(n)], "state": [(i * 7919) % 5 for i in range(n)]})
    path = tmp_path / "t.trace"
    store.save(trace, path)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("states.parquet")
    with open(path, "r+b") as fh:
        fh.seek(info.header_offset + 26)  # the member's local header: its name's and extra field's lengths
        name_len = int.from_bytes(fh.read(2), "little")
        extra_len = int.from_bytes(fh.read(2), "little")
        fh.seek(info.header_offset + 30 + name_len + extra_len + info.file_size // 2)
        fh.write(b"\xff" * 512)
    for read in (lambda: store.load(path), lambda: store.load(path, window=(0, n * 500)),
                 lambda: chunked_criticality(path, max_rows=5000)):
        with pytest.raises(UserError, match="damaged trace file"):
            read()
    cut = tmp_path / "cut.trace"  # cut short: the ZIP's directory at its end is gone
    cut.write_bytes(path.read_bytes()[:info.header_offset + 100])
    with pytest.raises(UserError, match="damaged trace file .its end is missing"):
        store.load(cut)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), t0=st.integers(0, 10_000), width=st.integers(1, 10_000))
def test_crit_and_bottle_between_read_only_the_window_and_agree(tmp_path_factory, monkeypatch, trace, t0, width):
    """What `scalestack crit/bottle --between` compute from the rows they read."""
    import numpy as np

    from scalestack.analysis.bottle import bottle
    from scalestack.analysis.criticality import criticality

    monkeypatch.setattr(store, "ROW_GROUP", 2)
    path = tmp_path_factory.mktemp("w") / "t.trace"
    store.save(trace, path)
    lo, hi = max(t0, trace.start_ns), min(t0 + width, trace.end_ns)
    if hi <= lo:
        return
    whole, part = store.load(path), store.load(path, window=(lo, hi))
    try:
        a = criticality(whole, between=(lo, hi))
    except UserError:
        with pytest.raises(UserError):
            criticality(part, between=(lo, hi))
        return
    b = criticality(part, between=(lo, hi))
    assert np.array_equal(a.criticality_ns, b.criticality_ns) and a.idle_ns == b.idle_ns
    assert bottle(whole, between=(lo, hi)).to_dict() == bottle(part, between=(lo, hi)).to_dict()
