"""Writing a trace file without holding it: Parquet members stream into the ZIP (the bytes are
those `writestr` of a built member gave), and the thread-grouped tables (states, switch spans)
can be spilled to disk chunk by chunk and written from there (`ThreadSpill`, `TraceWriter`) into
the file `save` writes for the whole trace."""

from __future__ import annotations

import dataclasses
import io
import json
import time
import zipfile

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.trace import NameTable, SampleTable, StateTable, SwitchSpanTable, Trace, store
from scalestack.trace.model import SCHEMA_VERSION, make_trace

from .test_store_load import _same
from .test_trace import small_trace, tiled_traces


def _writestr_file(trace) -> bytes:
    """The trace file as `write` made it before members were streamed: each Parquet member built in
    a BytesIO, then `writestr`."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(store.MAGIC_MEMBER, str(SCHEMA_VERSION))
        meta = {**trace.meta, "schema_version": SCHEMA_VERSION}
        zf.writestr("meta.json", json.dumps(meta, indent=1, sort_keys=True, default=store._json_default))
        for member in [*store.TABLES, *(m for m in store.OPTIONAL_TABLES if len(getattr(trace, m)))]:
            table = getattr(trace, member)
            arrow = store._to_arrow(table)
            buf = io.BytesIO()
            with pq.ParquetWriter(buf, arrow.schema, **store._encodings(type(table))) as w:
                bounds = store.group_bounds(table.tid, store.ROW_GROUP) if member in store.THREAD_GROUPED else \
                    np.arange(0, len(table) + store.ROW_GROUP, store.ROW_GROUP).clip(max=len(table))
                for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                    w.write_table(arrow.slice(a, b - a), row_group_size=store.ROW_GROUP)
            zf.writestr(f"{member}.parquet", buf.getvalue())
    return out.getvalue()


def _frozen(monkeypatch):
    """One clock for every ZIP entry's date, so two writes can be compared byte for byte."""
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), group=st.integers(1, 9), k=st.integers(0, 12))
def test_streamed_members_give_the_bytes_writestr_gave(monkeypatch, trace, group, k):
    _frozen(monkeypatch)
    monkeypatch.setattr(store, "ROW_GROUP", group)
    samples = SampleTable(tid=np.full(k, 100), time_ns=np.arange(k), cpu=np.full(k, -1), ip=np.arange(k),
                          offset=np.arange(k), symbol=[f"f{i % 3}" for i in range(k)], binary=["b"] * k,
                          stack=np.full(k, -1))
    s = trace.states
    spans = SwitchSpanTable(tid=s.tid, start_ns=s.start_ns, end_ns=s.end_ns, repaired=s.state == 1)
    trace = dataclasses.replace(trace, samples=samples, switch_spans=spans)
    out = io.BytesIO()
    store.write(trace, out)
    assert out.getvalue() == _writestr_file(trace)


def test_a_member_that_may_pass_2_gib_gets_zip64_headers_and_reads_back(tmp_path):
    """`_write_member` told the rows take 2 GiB: ZIP64 headers (an extra field in the local header),
    which the memory-mapped read steps over."""
    states = small_trace().states
    path = tmp_path / "t.trace"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        store._write_member(zf, "states", StateTable, [store._to_arrow(states)], 1 << 31)
    with zipfile.ZipFile(path) as zf, store._mapped(str(path)) as mapped:
        info = zf.getinfo("states.parquet")
        head = mapped[info.header_offset:info.header_offset + 30]
        assert int.from_bytes(head[28:30], "little") == 20  # the ZIP64 extra: sizes as 8 bytes each
        assert store._read(StateTable, zf, "states", mapped) == states
        assert store._read(StateTable, zf, "states") == states


@st.composite
def chunked_tables(draw):
    """A state table cut into the chunks a streaming builder emits: each thread's rows (starts
    non-decreasing: ties across chunks too) spread over the chunks in order, each chunk's rows
    interleaved across threads at random, a thread's own order kept (or, with `mixed`, not even
    that). Returns the chunks and the whole table as `save` takes it: sorted by (tid, start_ns)."""
    tids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=6, unique=True))
    n_chunks = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cols = {name: [] for name in StateTable.SCHEMA}
    chunk_of = []
    for tid in tids:
        n = draw(st.integers(0, 60))
        start = np.cumsum(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
        cols["tid"].append(np.full(n, tid))
        cols["start_ns"].append(start)
        cols["end_ns"].append(start + rng.integers(1, 5, n))
        cols["state"].append(rng.integers(0, 6, n))
        cols["cpu"].append(rng.integers(-1, 8, n))
        cols["addr"].append(rng.integers(0, 2**63, n).astype(np.uint64))
        cols["waker"].append(rng.integers(-1, 1000, n))
        cols["repaired"].append(rng.random(n) < 0.3)
        chunk_of.append(np.sort(rng.integers(0, n_chunks, n)))
    table = StateTable(**{k: np.concatenate(v) for k, v in cols.items()})
    chunk_of = np.concatenate(chunk_of)
    mixed = draw(st.booleans())
    chunks = []
    for k in range(n_chunks):
        part = table.take(chunk_of == k)
        shuffle = rng.permutation(len(part))
        if not mixed:  # the shuffled positions take each thread's rows in their order
            place = np.empty(len(part), np.int64)
            place[np.argsort(part.tid[shuffle], kind="stable")] = np.argsort(part.tid, kind="stable")
            shuffle = place
        chunks.append(part.take(shuffle))
    whole = StateTable.concat(chunks)
    return chunks, whole.take(np.lexsort((whole.start_ns, whole.tid)))


def _spans(states: StateTable) -> SwitchSpanTable:
    return SwitchSpanTable(tid=states.tid, start_ns=states.start_ns, end_ns=states.end_ns, repaired=states.repaired)


def _trace_of(states: StateTable, spans: SwitchSpanTable) -> Trace:
    tids = np.unique(np.r_[states.tid, spans.tid]) if len(states) else np.array([7])
    threads = make_trace({"tid": tids, "name": [f"t{t}" for t in tids], "start_ns": np.zeros(len(tids)),
                          "end_ns": np.full(len(tids), 10**6)}, {"tid": [], "start_ns": [], "end_ns": [], "state": []},
                         meta={"source": "perf-data", "lost_events": 3}).threads
    names = NameTable(tid=threads.tid, time_ns=threads.start_ns, name=threads.name)
    return Trace(threads=threads, states=states, names=names, meta={"source": "perf-data", "lost_events": 3},
                 switch_spans=spans)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tables=chunked_tables(), group=st.integers(1, 17), spans=st.booleans())
def test_a_spilled_trace_is_the_saved_one(tmp_path_factory, monkeypatch, tables, group, spans):
    """Cut anywhere, shuffled across threads: the file loads as the whole table's save loads, with
    the same row groups, and is the same bytes."""
    _frozen(monkeypatch)
    monkeypatch.setattr(store, "ROW_GROUP", group)
    chunks, whole = tables
    trace = _trace_of(whole, _spans(whole) if spans else SwitchSpanTable.empty())
    d = tmp_path_factory.mktemp("s")
    store.save(trace, d / "saved.trace")
    with store.TraceWriter(d / "spilled.trace") as w:
        for c in chunks:
            w.states.add(c)
            if spans:
                w.switch_spans.add(_spans(c))
        w.finish(trace.threads, trace.names, trace.meta)
    assert sorted(p.name for p in d.iterdir()) == ["saved.trace", "spilled.trace"]  # no spill left
    saved, spilled = store.load(d / "saved.trace"), store.load(d / "spilled.trace")
    _same(spilled, saved)
    assert spilled.meta == saved.meta
    for member in store.THREAD_GROUPED:
        for a, b in zip(store.group_ranges(d / "spilled.trace", member), store.group_ranges(d / "saved.trace", member),
                        strict=True):
            np.testing.assert_array_equal(a, b)
    assert (d / "spilled.trace").read_bytes() == (d / "saved.trace").read_bytes()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=200), st.integers(1, 40))
def test_run_group_bounds_are_group_bounds_of_the_runs(labels, size):
    tid = np.asarray(labels, np.int32)
    runs = np.diff(np.r_[np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]]), len(tid)]) if len(tid) else np.zeros(0, int)
    np.testing.assert_array_equal(store.run_group_bounds(runs, size), store.group_bounds(tid, size))


def test_a_spill_gives_its_rows_in_row_groups_sorted_by_thread_and_start(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "ROW_GROUP", 16)
    a = _spans(small_trace().states)  # tids 10, 10, 11, 11, 11
    late = SwitchSpanTable(tid=[11, 12, 10, 11], start_ns=[90, 0, 100, 95], end_ns=[95, 9, 120, 99],
                           repaired=[True, False, False, True])
    with store.ThreadSpill(SwitchSpanTable, tmp_path) as spill:
        spill.add(a)
        spill.add(SwitchSpanTable.empty())
        spill.add(late)
        assert len(spill) == 9 and len(list(tmp_path.iterdir())) == 1
        groups = [SwitchSpanTable(**{c: g.column(c).to_numpy(zero_copy_only=False) for c in SwitchSpanTable.SCHEMA})
                  for g in spill.row_groups()]
    assert [len(g) for g in groups] == [3, 5, 1]  # threads of 16 // 8 rows or more in groups of their own
    rows = SwitchSpanTable.concat(groups)
    assert rows.tid.tolist() == [10, 10, 10, 11, 11, 11, 11, 11, 12]
    assert rows.start_ns.tolist() == [0, 40, 100, 5, 30, 60, 90, 95, 0]
    assert rows.repaired.tolist() == [False] * 6 + [True, True, False]
    assert list(tmp_path.iterdir()) == []  # the with block removed the directory


def test_a_thread_starting_before_its_rows_of_an_earlier_chunk_is_refused(tmp_path):
    with store.ThreadSpill(StateTable, tmp_path) as spill:
        spill.add(small_trace().states)  # tid 11's last row starts at 60
        late = small_trace().states.take(np.array([3]))  # tid 11 at 30
        with pytest.raises(ValueError, match="tid 11: a row starting at 30 comes after one starting at 60"):
            spill.add(late)
        with pytest.raises(TypeError, match="a StateTable spill got a SwitchSpanTable"):
            spill.add(SwitchSpanTable.empty())
    with pytest.raises(TypeError, match="text columns"):
        store.ThreadSpill(NameTable, tmp_path)


def test_an_error_midway_leaves_no_output_and_no_spill(tmp_path, monkeypatch):
    out = tmp_path / "out" / "t.trace"
    states = small_trace().states
    with pytest.raises(RuntimeError, match="builder failed"), store.TraceWriter(out) as w:
        w.states.add(states)
        raise RuntimeError("builder failed")
    assert list(out.parent.iterdir()) == []

    def failing_read(*args):
        raise OSError(5, "read error")

    monkeypatch.setattr(store, "pread_into", failing_read)  # while the states member is being written
    trace = _trace_of(states, SwitchSpanTable.empty())
    with pytest.raises(OSError, match="read error"), store.TraceWriter(out) as w:
        w.states.add(states)
        w.finish(trace.threads, trace.names, trace.meta)
    assert list(out.parent.iterdir()) == []


def test_a_trace_without_states_or_spans(tmp_path, monkeypatch):
    _frozen(monkeypatch)
    trace = _trace_of(StateTable.empty(), SwitchSpanTable.empty())
    store.save(trace, tmp_path / "saved.trace")
    with store.TraceWriter(tmp_path / "spilled.trace") as w:
        w.finish(trace.threads, trace.names, trace.meta)
    assert (tmp_path / "spilled.trace").read_bytes() == (tmp_path / "saved.trace").read_bytes()
