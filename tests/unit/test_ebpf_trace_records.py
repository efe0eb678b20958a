"""The eBPF trace collector's record file, read without the kernel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.collect import ebpf
from scalestack.collect.ebpf import RECORD, OutOfOrder, RecordWindows, read_records
from scalestack.errors import UserError
from scalestack.trace.events import Kind, concat_events


def _write(path, rows):
    rec = np.zeros(len(rows), RECORD)
    for i, (t, cpu, tid, pid, kind, a0, a1, a2, c0, c1) in enumerate(rows):
        rec[i] = (t, a0, a1, a2, cpu, tid, pid, kind, c0, c1)
    rec.tofile(path)


def test_records_become_raw_events_sorted_with_one_string_table(tmp_path):
    f = tmp_path / "events.bin"
    _write(f, [
        (30, 1, 12, 10, Kind.SWITCH, 12, 0, 1, b"worker", b"swapper/1"),
        (10, 0, 10, 10, Kind.FUTEX_ENTER, 0xABC, 128, 0, b"", b""),
        (20, 0, 10, 10, Kind.RENAME, 12, 0, 0, b"worker", b"main"),
        (30, 1, 12, 10, Kind.RUN_DELAY, 12, 5000, 3, b"", b""),
        (40, 0, 10, 10, Kind.WAKEUP, 12, 1, 0, b"worker", b""),
    ])
    ev = read_records(str(f))
    assert ev.time.tolist() == [10, 20, 30, 30, 40]  # the ring buffer interleaves CPUs: sorted, stable
    assert ev.kind.tolist() == [Kind.FUTEX_ENTER, Kind.RENAME, Kind.SWITCH, Kind.RUN_DELAY, Kind.WAKEUP]
    assert ev.arg0.tolist() == [0xABC, 12, 12, 12, 12] and ev.arg1.tolist() == [128, 0, 0, 5000, 1]
    assert ev.pid.tolist() == [10] * 5 and ev.tid.tolist() == [10, 10, 12, 12, 10] and ev.cpu.tolist() == [0, 0, 1, 1, 0]
    names = [(ev.comm(a), ev.comm(b)) for a, b in zip(ev.comm0, ev.comm1, strict=True)]
    # futex and run-delay records carry no name; only switch, fork and rename carry two
    assert names == [("", ""), ("worker", "main"), ("worker", "swapper/1"), ("", ""), ("worker", "")]
    assert ev.comm0[0] == -1 and ev.comm1[4] == -1


def test_a_file_cut_mid_record_is_one_clear_error(tmp_path):
    f = tmp_path / "events.bin"
    _write(f, [(1, 0, 1, 1, Kind.EXIT, 1, 0, 0, b"x", b"")])
    f.write_bytes(f.read_bytes() + b"\0" * 7)
    with pytest.raises(UserError, match="not a whole number of 80-byte eBPF records"):
        read_records(str(f))


def _reference(path):
    """The records read the plain NumPy way: one fromfile, one np.unique of the names, one sort."""
    rec = np.fromfile(path, dtype=RECORD)
    n = len(rec)
    no_comm = np.isin(rec["kind"], [Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV, Kind.RUN_DELAY])
    two = np.isin(rec["kind"], [Kind.SWITCH, Kind.FORK, Kind.RENAME])
    names = [c.split(b"\0", 1)[0].decode("utf-8", "replace") for c in rec["c0"].tolist()]
    names1 = [c.split(b"\0", 1)[0].decode("utf-8", "replace") for c in rec["c1"].tolist()]
    order = np.argsort(rec["time"].astype(np.int64), kind="stable")
    rows = []
    for i in order.tolist():
        rows.append((int(rec["time"][i]), int(rec["cpu"][i]), int(rec["tid"][i]), int(rec["pid"][i]),
                     int(rec["kind"][i]) & 0xFF, int(rec["a0"][i]), int(rec["a1"][i]), int(rec["a2"][i]),
                     None if no_comm[i] else names[i], names1[i] if two[i] else None))
    assert len(rows) == n
    return rows


_name = st.binary(max_size=16).map(lambda b: b.replace(b"\0", b"a") if len(b) < 4 else b)


@settings(max_examples=60, deadline=None)  # the first example compiles the decoder
@given(rows=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3), st.integers(1, 9), st.integers(1, 9),
                               st.sampled_from([int(k) for k in Kind] + [300]), st.integers(-2**63, 2**63 - 1),
                               st.integers(0, 9), st.integers(0, 9), _name, _name), max_size=40),
       window=st.integers(1, 7), threads=st.integers(1, 3))
def test_windows_and_threads_give_the_plain_reading(tmp_path_factory, rows, window, threads):
    f = tmp_path_factory.mktemp("rec") / "events.bin"
    _write(f, rows)
    ev = read_records(str(f), threads=threads, window=window)
    assert _rows(ev) == _reference(f)


def _rows(ev):
    return [(int(ev.time[i]), int(ev.cpu[i]), int(ev.tid[i]), int(ev.pid[i]), int(ev.kind[i]), int(ev.arg0[i]),
             int(ev.arg1[i]), int(ev.arg2[i]), None if ev.comm0[i] < 0 else ev.comm(int(ev.comm0[i])),
             None if ev.comm1[i] < 0 else ev.comm(int(ev.comm1[i]))) for i in range(len(ev))]


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 9), st.integers(1, 9), st.sampled_from([int(k) for k in Kind]),
                               st.integers(0, 9), _name, _name), max_size=60),
       gaps=st.lists(st.integers(0, 3), min_size=60, max_size=60),
       noise=st.lists(st.floats(0, 1), min_size=60, max_size=60), window=st.integers(1, 12), far=st.booleans(),
       earliest_slice=st.integers(1, 5), share=st.sampled_from([1, 2, 3, 1 << 17]))
def test_record_windows_give_the_whole_reading(tmp_path_factory, rows, gaps, noise, window, far, earliest_slice,
                                               share):
    """Records in time order moved at most half a window (the ring buffer's interleaving) come out
    of `RecordWindows` in windows in time order that concatenate to `read_records`'; moved further,
    they do the same or say they cannot. (A window's earliest time is read `earliest_slice` records
    at a time; a window's records are shared out among threads `share` or more each.)"""
    times = np.cumsum(gaps[:len(rows)])  # ties too
    reach = (3 * window if far else window // 2) + 0.5
    moved = np.argsort(np.arange(len(rows)) + np.asarray(noise[:len(rows)]) * reach, kind="stable")
    f = tmp_path_factory.mktemp("rec") / "events.bin"
    _write(f, [(int(times[i]), cpu, tid, 7, kind, a0, 0, 0, c0, c1)
               for i, (cpu, tid, kind, a0, c0, c1) in ( (int(i), rows[i]) for i in moved)])
    src = RecordWindows(str(f), max_rows=window, threads=2)
    assert src.events == len(rows)
    kept, ebpf.EARLIEST_SLICE = ebpf.EARLIEST_SLICE, earliest_slice
    kept_share, ebpf.SHARE = ebpf.SHARE, share
    try:
        for _ in range(2):  # each iteration reads again (the second with the earliest times kept)
            try:
                parts = list(src)
            except OutOfOrder:
                assert far
                continue
            assert all(len(p) for p in parts) and all(np.all(np.diff(p.time) >= 0) for p in parts)
            assert all(a.time[-1] <= b.time[0] for a, b in zip(parts, parts[1:], strict=False))
            assert _rows(concat_events(parts)) == _reference(f)
    finally:
        ebpf.EARLIEST_SLICE, ebpf.SHARE = kept, kept_share


def test_a_window_is_cut_at_the_earliest_record_of_the_next_wherever_it_lies(tmp_path, monkeypatch):
    """The next window's earliest record is its second: read a record at a time, the first window
    still holds back its 4 (given, it would make the 3 out of order)."""
    f = tmp_path / "events.bin"
    _write(f, [(t, 0, 1, 1, Kind.EXIT, 1, 0, 0, b"x", b"") for t in (1, 2, 4, 5, 3, 6, 7, 9, 8)])
    monkeypatch.setattr(ebpf, "EARLIEST_SLICE", 1)
    parts = list(RecordWindows(str(f), max_rows=3))
    assert [p.time.tolist() for p in parts] == [[1, 2], [3, 4, 5, 6], [7, 8, 9]]
    assert _rows(concat_events(parts)) == _reference(f)


def test_record_windows_stop_at_a_record_out_of_order_by_more_than_a_window(tmp_path):
    f = tmp_path / "events.bin"
    _write(f, [(t, 0, 1, 1, Kind.EXIT, 1, 0, 0, b"x", b"") for t in (10, 11, 12, 13, 14, 15, 5)])
    with pytest.raises(OutOfOrder, match="record 6 is earlier than records 2 or more before it"):
        list(RecordWindows(str(f), max_rows=2))
    assert _rows(concat_events(list(RecordWindows(str(f), max_rows=4)))) == _reference(f)


def test_a_window_given_is_held_by_its_reader_alone(tmp_path):
    """While the caller reads a window, the reader holds neither it nor the records it came from:
    dropped by the caller, it is gone (a long recording's memory is one window, not two)."""
    import gc
    import weakref

    f = tmp_path / "events.bin"
    _write(f, [(t, 0, 1, 1, Kind.EXIT, 1, 0, 0, b"x", b"") for t in range(40)])
    it = iter(RecordWindows(str(f), max_rows=8))
    w = next(it)
    gone = weakref.ref(w.time.base if w.time.base is not None else w.time)
    del w
    gc.collect()
    assert gone() is None
    assert sum(len(w) for w in it) == 40 - 8


def test_windows_big_enough_to_be_mapped_give_the_whole_reading(tmp_path, monkeypatch):
    """Windows of 15 000 records (1.2 MB, mapped from the file rather than read; their offsets not
    on a page boundary) with the CPUs' records interleaved up to 2 000 places: the same events
    as `read_records`, and a record file that shrank since it was counted is one clear error."""
    n, rng = 50_000, np.random.default_rng(7)
    rec = np.zeros(n, RECORD)
    t = np.cumsum(rng.integers(0, 3, n))  # ties too
    moved = np.argsort(np.arange(n) + rng.random(n) * 2_000, kind="stable")
    kinds = np.array([int(k) for k in Kind], np.uint32)
    rec["time"], rec["kind"] = t[moved], kinds[rng.integers(0, len(kinds), n)]
    rec["cpu"], rec["tid"], rec["pid"], rec["a0"] = rng.integers(0, 4, n), rng.integers(1, 9, n), 7, np.arange(n)
    rec["c0"] = np.array([b"main", b"worker-1", b"swapper/0"], "S16")[rng.integers(0, 3, n)]
    rec["c1"] = np.array([b"", b"gc", b"x" * 16], "S16")[rng.integers(0, 3, n)]
    f = tmp_path / "events.bin"
    rec.tofile(f)
    src = RecordWindows(str(f), max_rows=15_000)
    parts = list(src)
    monkeypatch.setattr(ebpf, "SHARE", 4_000)  # each window decoded by two threads
    assert all(a.equals(b) for a, b in zip(RecordWindows(str(f), max_rows=15_000, threads=2), parts, strict=True))
    assert len(parts) >= 3 and all(a.time[-1] <= b.time[0] for a, b in zip(parts, parts[1:], strict=False))
    whole = read_records(str(f))
    got = concat_events(parts)
    for col in ("time", "cpu", "pid", "tid", "kind", "arg0", "arg1", "arg2"):
        assert np.array_equal(getattr(got, col), getattr(whole, col)), col
    for col in ("comm0", "comm1"):
        names = [None if c < 0 else got.comm(int(c)) for c in getattr(got, col).tolist()]
        assert names == [None if c < 0 else whole.comm(int(c)) for c in getattr(whole, col).tolist()], col
    with open(f, "r+b") as fh:
        fh.truncate(40_000 * RECORD.itemsize)
    with pytest.raises(UserError, match="changed while it was read"):
        list(src)
