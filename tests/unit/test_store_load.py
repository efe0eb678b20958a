"""Loading decodes each column a row group at a time into its NumPy array (store._read): the
loaded tables are what was saved, column for column, dtype for dtype, read-only."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.trace import SampleTable, StateTable, store

from .test_trace import small_trace, tiled_traces

TABLES = ("threads", "states", "names", "samples", "switch_spans", "frames", "stacks", "futex_calls")


def _same(a, b):
    for m in TABLES:
        for (name, x), y in zip(getattr(a, m).columns().items(), getattr(b, m).columns().values(), strict=True):
            assert x.dtype == y.dtype and not x.flags.writeable and x.flags.c_contiguous, (m, name)
            assert np.array_equal(x, y), (m, name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), data=st.data(), group=st.integers(1, 7), threads=st.sampled_from([1, 2, 3]))
def test_a_loaded_trace_is_the_saved_one(tmp_path_factory, monkeypatch, trace, data, group, threads):
    """Also with the columns shared among 2 or 3 threads, as a member of 2^16 rows or more is read."""
    monkeypatch.setattr(store, "ROW_GROUP", group)  # chunks that start inside a byte of a bool column
    monkeypatch.setattr(store, "_read_threads", lambda rows, columns: min(threads, columns))
    n = len(trace.states)
    cols = trace.states.columns()
    cols["repaired"] = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    cols["addr"] = np.array(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), np.uint64)
    k = data.draw(st.integers(0, 20))
    words = st.sampled_from(["main", "[unknown]", "", "f\u00fc"])
    samples = SampleTable(tid=np.full(k, 100), time_ns=np.arange(k), cpu=np.full(k, -1), ip=np.arange(k),
                          offset=np.arange(k), symbol=data.draw(st.lists(words, min_size=k, max_size=k)),
                          binary=data.draw(st.lists(words, min_size=k, max_size=k)), stack=np.full(k, -1))
    trace = type(trace)(threads=trace.threads, states=StateTable(**cols), names=trace.names, meta=trace.meta,
                        samples=samples)
    path = tmp_path_factory.mktemp("l") / "t.trace"
    store.save(trace, path)
    _same(store.load(path), trace)


def test_an_older_file_with_wider_columns_and_a_missing_one(tmp_path):
    """A member written by plain pyarrow: int64 where the schema has int32, strings not dictionary
    encoded, and no `stack` column (added later: filled with its default)."""
    t = small_trace()
    path = tmp_path / "t.trace"
    store.save(t, path)
    k = 5
    old = pa.table({"tid": pa.array([10] * k, pa.int64()), "time_ns": pa.array(range(k), pa.int64()),
                    "cpu": pa.array([0, 1, 0, 1, 0], pa.int64()), "ip": pa.array(range(k), pa.uint64()),
                    "offset": pa.array(range(k), pa.int64()), "symbol": ["a", "b", "a", "c", "a"],
                    "binary": ["x"] * k})
    buf = io.BytesIO()
    pq.write_table(old, buf, use_dictionary=False, row_group_size=2)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_STORED) as zf:
        zf.writestr("samples.parquet", buf.getvalue())
    s = store.load(path).samples
    assert s.tid.dtype == np.int32 and s.cpu.dtype == np.int16 and not s.tid.flags.writeable
    assert s.tid.tolist() == [10] * k and s.cpu.tolist() == [0, 1, 0, 1, 0]
    assert s.symbol.tolist() == ["a", "b", "a", "c", "a"] and s.stack.tolist() == [-1] * k
