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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.trace import SampleTable, StateTable, SwitchSpanTable, store
from scalestack.trace.model import SCHEMA_VERSION

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
