"""`trace.spill.ColumnSpill`: rows added in chunks, read back by key range, equal the rows held in
memory stably sorted by key; batches cover every key once within their budget. `ColumnLog`: rows
read back in the order added, any number at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.spill import ColumnLog, ColumnSpill

DTYPES = {"slot": np.int32, "t": np.int64, "flag": np.bool_, "small": np.int16}


def chunk(rng, n, n_keys):
    return {"slot": rng.integers(0, n_keys, n).astype(np.int32), "t": rng.integers(-5, 10**12, n),
            "flag": rng.integers(0, 2, n).astype(bool), "small": rng.integers(-300, 300, n).astype(np.int16)}


@settings(max_examples=80, deadline=None)
@given(n_keys=st.integers(1, 9), sizes=st.lists(st.integers(0, 40), max_size=6), seed=st.integers(0, 10**6),
       data=st.data())
def test_reads_equal_the_rows_sorted_by_key(tmp_path_factory, n_keys, sizes, seed, data):
    rng = np.random.default_rng(seed)
    chunks = [chunk(rng, n, n_keys) for n in sizes]
    with ColumnSpill(DTYPES, "slot", n_keys, tmp_path_factory.mktemp("spill")) as sp:
        for c in chunks:
            sp.add(c)
        held = {k: np.concatenate([c[k] for c in chunks]) if chunks else np.zeros(0, v) for k, v in DTYPES.items()}
        order = np.argsort(held["slot"], kind="stable")  # chunk order, then the order within a chunk
        assert len(sp) == len(order) and np.array_equal(sp.counts(), np.bincount(held["slot"], minlength=n_keys))
        lo = data.draw(st.integers(0, n_keys))
        hi = data.draw(st.integers(lo, n_keys))
        got = sp.read(lo, hi)
        keep = order[(held["slot"][order] >= lo) & (held["slot"][order] < hi)]
        for k, v in DTYPES.items():
            assert got[k].dtype == v and np.array_equal(got[k], held[k][keep]), k
        # a part of one key's rows, of some columns
        key = data.draw(st.integers(0, n_keys - 1))
        mine = order[held["slot"][order] == key]
        a = data.draw(st.integers(0, len(mine) + 2))
        b = data.draw(st.integers(a, len(mine) + 3))
        names = data.draw(st.lists(st.sampled_from(list(DTYPES)), min_size=1, unique=True))
        part = sp.read_rows(key, a, b, names)
        assert sorted(part) == sorted(names)
        for k in names:
            assert part[k].dtype == DTYPES[k] and np.array_equal(part[k], held[k][mine[a:b]]), k
        budget = data.draw(st.integers(1, 60))
        batches = sp.batches(budget)
        assert batches[0][0] == 0 and batches[-1][1] == n_keys
        assert all(a[1] == b[0] for a, b in zip(batches, batches[1:], strict=False))
        counts = sp.counts()
        for a, b in batches:
            assert b > a and (counts[a:b].sum() <= budget or np.count_nonzero(counts[a:b]) == 1)


def test_errors_and_cleanup(tmp_path):
    sp = ColumnSpill(DTYPES, "slot", 3, tmp_path)
    with pytest.raises(ValueError, match="outside"):
        sp.add({"slot": np.array([3], np.int32), "t": [1], "flag": [True], "small": [1]})
    with pytest.raises(ValueError, match="rows"):
        sp.add({"slot": np.array([1, 2], np.int32), "t": [1], "flag": [True, False], "small": [1, 2]})
    assert len(os.listdir(tmp_path)) == 1
    assert sorted(os.listdir(tmp_path / os.listdir(tmp_path)[0])) == ["flag", "small", "t"]  # not the key's
    sp.close()
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="closed"):
        sp.read(0, 3)
    with pytest.raises(ValueError, match="key column"):
        ColumnSpill(DTYPES, "tid", 3, tmp_path)
    with pytest.raises(ValueError, match="the only one"):
        ColumnSpill({"slot": np.int32}, "slot", 3, tmp_path)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), max_size=6), rows=st.integers(1, 50), seed=st.integers(0, 10**6))
def test_a_log_reads_back_its_rows_in_order_any_number_at_a_time(tmp_path_factory, sizes, rows, seed):
    rng = np.random.default_rng(seed)
    chunks = [chunk(rng, n, 5) for n in sizes]
    d = tmp_path_factory.mktemp("log")
    with ColumnLog(DTYPES, d) as log:
        for c in chunks:
            log.add(c)
        got = list(log.chunks(rows))
        assert len(log) == sum(sizes) and all(len(g["t"]) == rows for g in got[:-1])
        for k, v in DTYPES.items():
            held = np.concatenate([c[k] for c in chunks]) if chunks else np.zeros(0, v)
            cat = np.concatenate([g[k] for g in got]) if got else np.zeros(0, v)
            assert cat.dtype == v and np.array_equal(cat, held), k
        with pytest.raises(ValueError, match="different lengths"):
            log.add({**chunk(rng, 3, 5), "t": np.zeros(2, np.int64)})
    assert os.listdir(d) == []  # the log's directory is gone
    with pytest.raises(ValueError, match="closed"):
        log.add(chunk(rng, 1, 5))


def test_written_behind_an_error_comes_at_the_next_call_and_the_caller_may_change_its_arrays(tmp_path):
    """Chunks are written by the spill's thread: a failed write (here its file's descriptor closed
    under it: EBADF) is raised by the next append or read, and the directory still goes; the caller's
    arrays, changed once `add` returned, are written as they were."""
    rng = np.random.default_rng(3)
    sp = ColumnSpill(DTYPES, "slot", 2, tmp_path)
    rows = {k: v for k, v in chunk(rng, 50, 1).items()}  # one key: in order, so no sorted copy is made
    want = {k: v.copy() for k, v in rows.items()}
    sp.add(rows)
    for v in rows.values():
        v[:] = 0
    got = sp.read(0, 2)
    assert all(np.array_equal(got[k], want[k]) for k in DTYPES)
    os.close(sp._files["t"].fileno())
    sp.add(chunk(rng, 10, 2))
    with pytest.raises(OSError) as exc:
        for _ in range(3):
            sp.add(chunk(rng, 10, 2))
        sp.read(0, 2)
    assert exc.value.errno == 9
    sp.close()
    assert os.listdir(tmp_path) == []
    log = ColumnLog({"t": np.int64}, tmp_path)
    t = np.arange(5)
    log.add({"t": t})
    t[:] = -1
    assert list(log.chunks(2))[0]["t"].tolist() == [0, 1]
    log.close()
