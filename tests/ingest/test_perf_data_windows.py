"""The perf.data read in time windows (`read_perf_data_windows`): cut anywhere, the windows
concatenated are the whole read (`read_perf_data`), with its stats and its errors; no event is
lost or doubled at a window's edge, one time's events are never split, and a window holds at
most max_rows events unless they share one time.

On the two real recordings of tests/data (plain and `perf record -z`), on a synthetic file
(benchmarks/speed/synth_perf_data.py, templated on barrier.perf.data: no perf or root needed)
whose 64 KiB spans each cover a stretch of time, and on copies of both whose samples' times are
rounded so that many share one time across CPUs and spans.
"""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.ingest import perf_data as P
from scalestack.ingest.perf_data import (
    PerfDataWindows,
    parse_perf_data,
    parse_perf_data_windows,
    read_header,
    read_perf_data,
    read_perf_data_windows,
    sample_layout,
)
from scalestack.trace.events import Kind, RawEvents, concat_events

from ..conftest import ROOT
from .test_perf_data import BASES, DATA, _mutate, patch

_spec = importlib.util.spec_from_file_location("synth_perf_data", ROOT / "benchmarks" / "speed" / "synth_perf_data.py")
synth = sys.modules.setdefault("synth_perf_data", importlib.util.module_from_spec(_spec))
if not hasattr(synth, "write"):
    _spec.loader.exec_module(synth)

LO, HI = -(1 << 63), (1 << 63) - 1
SPAN = 1 << 16  # the smallest span: a 2 MB file is read in ~30


def _samples(data: bytes):
    """(offset, sample_layout) of each sample of the (uncompressed) perf.data `data`."""
    info = read_header(data, "x")
    attr_of = {i: a for a in info.attrs for i in a.ids}
    i, end = info.data_offset, info.data_offset + info.data_size
    while i < end:
        typ, _misc, size = struct.unpack_from("<IHH", data, i)
        if typ == 9:
            at = attr_of[struct.unpack_from("<Q", data, i + 8)[0]]
            yield i, sample_layout(at.sample_type, at.read_format)
        i += size


def _retimed(data: bytes, quantum: int) -> bytes:
    """A copy of `data` whose samples' times are rounded down to a multiple of `quantum`: runs of
    samples on every CPU and in several spans share one time."""
    out = bytearray(data)
    for i, lay in _samples(data):
        (t,) = struct.unpack_from("<Q", out, i + lay[1])
        struct.pack_into("<Q", out, i + lay[1], t // quantum * quantum)
    return bytes(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """name -> (path, bytes): the recordings, a synthetic file of 7 rounds, and retimed copies."""
    out = {name: (DATA / f"{name}.perf.data", data) for name, data in BASES.items()}
    path = tmp_path_factory.mktemp("windows") / "synth.data"
    synth.write(path, 20_000, threads=6, cpus=4, seed=7, chunk=3_000, template=str(DATA / "barrier.perf.data"))
    out["synth"] = (path, path.read_bytes())
    for name, quantum in (("barrier", 10**7), ("synth", 200_000)):
        ties = tmp_path_factory.mktemp("windows") / f"{name}-ties.data"
        ties.write_bytes(_retimed(out[name][1], quantum))
        out[f"{name}-ties"] = (ties, ties.read_bytes())
    return out


def _check(windows: PerfDataWindows, whole: RawEvents) -> list[RawEvents]:
    """The windows of `windows`, checked against the whole read; read again (each window's end
    then as the first reading cut it), the same windows."""
    parts = list(windows)
    again = list(windows)
    assert [p.stats["window_ns"] for p in again] == [p.stats["window_ns"] for p in parts]
    assert all(a.equals(b) for a, b in zip(again, parts, strict=True))
    del again
    bounds = [p.stats["window_ns"] for p in parts]
    for part, (lo, hi) in zip(parts, bounds, strict=True):
        assert len(part) and lo < hi
        assert np.all((part.time >= lo) & (part.time < hi))
        assert len(part) <= windows.max_rows or part.time[0] == part.time[-1]  # ties only
        assert {k: v for k, v in part.stats.items() if k != "window_ns"} == whole.stats
    for (_, hi), (lo, _) in zip(bounds, bounds[1:], strict=False):
        assert hi <= lo  # consecutive, in time order
    for a, b in zip(parts, parts[1:], strict=False):
        assert a.time[-1] < b.time[0]  # no time in two windows
    if parts:
        assert bounds[-1][1] == HI  # (the first may start after an empty [-2**63, first time))
    cat = concat_events(parts, windows.stats)
    for k in ("time", "cpu", "tid", "pid", "kind", "arg0", "arg1", "arg2"):
        assert np.array_equal(getattr(cat, k), getattr(whole, k)), k
    assert cat.equals(whole) and windows.stats == whole.stats
    return parts


@pytest.mark.parametrize("name", ["barrier", "barrier-z", "synth", "barrier-ties", "synth-ties"])
@pytest.mark.parametrize("max_rows", [1, 7, 1000, 10**12])
def test_windows_are_the_whole_read(files, name, max_rows):
    if max_rows in (1, 7) and name.startswith("synth"):
        # a few events a window are the barrier files' case: the synthetic file's 10^4 windows took
        # 15 s, its ~2 000 windows of 7 events 45-55 s (2-vCPU EPYC VM)
        max_rows = {1: 97, 7: 29}[max_rows]
    path, data = files[name]
    whole = read_perf_data(path)
    assert len(whole) > 90
    for span in (SPAN, P.WINDOW):
        parts = _check(read_perf_data_windows(path, max_rows=max_rows, window=span), whole)
        assert len(parts) <= 2 * len(whole) / max_rows + 2  # about max_rows each, not far fewer
        _check(parse_perf_data_windows(data, max_rows=max_rows, window=span), whole)
    if max_rows >= len(whole):
        assert len(parts) == 1


def test_a_compressed_file_is_decompressed_to_an_unnamed_file_not_held(files):
    """perf record -z: the windows read the decompressed records from a temporary file that has no
    name (nothing to clean up), made once by the first pass, which says so in its progress."""
    path, _ = files["barrier-z"]
    stages = []
    w = read_perf_data_windows(path, max_rows=7, window=SPAN, progress=lambda d, t, s: stages.append(s))
    st_ = os.fstat(w._scan.z_file.fileno())
    assert st_.st_nlink == 0 and st_.st_size == w._scan.end > 0  # the decompressed records, read from there
    assert "decompressing records" in stages and "checking records (decompressed)" in stages
    _check(w, read_perf_data(path))
    _check(w, read_perf_data(path))  # read again from the same file


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_rows=st.integers(1, 3000), name=st.sampled_from(["barrier-z", "synth", "synth-ties", "barrier-ties"]),
       span=st.sampled_from([SPAN, 3 * SPAN, P.WINDOW]), threads=st.sampled_from([1, 2, 3]))
def test_any_max_rows_any_span_same_events(files, max_rows, name, span, threads):
    _, data = files[name]
    whole = parse_perf_data(data)
    _check(parse_perf_data_windows(data, max_rows=max_rows, window=span, threads=threads), whole)


def test_summary_of_the_first_pass(files):
    for name, (path, _) in files.items():
        whole = read_perf_data(path)
        w = read_perf_data_windows(path, max_rows=100, window=SPAN)
        assert w.events == len(whole)
        assert (w.first_ns, w.last_ns) == (int(whole.time[0]), int(whole.time[-1]))
        assert w.max_cpu == int(whole.cpu.max())
        assert w.kinds == {Kind(k): int(c) for k, c in enumerate(np.bincount(whole.kind)) if c}, name
        # no per-event array: the kept times are every `every`-th of each span's samples
        assert len(w._times) <= w.events // w._every + len(w._spans[0])
    synth_file = read_perf_data_windows(files["synth"][0], window=SPAN)
    assert len(synth_file._spans[0]) > 20 and synth_file._every == 64 and synth_file.max_cpu == 3


def test_the_bound_from_the_data_sections_size_holds_and_spares_the_scan(files):
    """`windows_if_big` decides from the header whether a file can hold more events than are read
    whole (`_Scan.most_events`): never fewer than the file has; a -z file is not bounded; a file
    under the bound is not scanned (no progress), one over it is."""
    for name, (path, _) in files.items():
        n = len(read_perf_data(path))
        with P._opened(str(path)) as (size, get, read):
            info = P._header(get, size, str(path))
            most = P._Scan(info, str(path), read, None, SPAN).most_events()
        if name.endswith("-z"):
            assert most == 1 << 62
            continue
        assert n <= most <= info.data_size // 64, name  # tighter than a 64-byte event
        seen = []
        assert P.windows_if_big(str(path), most // 4 + 1, lambda *a, seen=seen: seen.append(a)) is None and not seen, name
        w = P.windows_if_big(str(path), max(1, n // 5), lambda *a, seen=seen: seen.append(a))
        assert w is not None and w.events == n and seen, name


def test_a_time_shared_by_more_than_max_rows_is_one_window(files):
    data = _retimed(files["synth"][1], 1 << 62)  # every sample at time 0
    whole = parse_perf_data(data)
    parts = _check(parse_perf_data_windows(data, max_rows=3, window=SPAN), whole)
    assert len(parts) == 1 and len(parts[0]) == len(whole) > 10_000
    ties = _check(parse_perf_data_windows(files["synth-ties"][1], max_rows=1, window=SPAN), parse_perf_data(
        files["synth-ties"][1]))
    assert max(len(p) for p in ties) > 20 and len(ties) == len(np.unique(np.concatenate([p.time for p in ties])))


def test_iterating_again_reads_the_same_windows_and_progress(files):
    path, _ = files["synth"]
    seen = []
    w = read_perf_data_windows(path, max_rows=5000, window=SPAN, progress=lambda *a: seen.append(a))
    assert seen and all(stage.startswith("checking records") for _, _, stage in seen)
    assert seen[-1][0] == seen[-1][1]
    first = [p.time.copy() for p in w]
    assert seen[-1] == (w.events, w.events, "decoding windows")
    second = [p.time for p in w]
    assert len(first) == len(second) > 3 and all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_errors_as_the_whole_read_raises_them(tmp_path):
    with pytest.raises(UserError, match="No such file"):
        read_perf_data_windows(tmp_path / "missing.data")
    (tmp_path / "e.data").write_bytes(b"")
    with pytest.raises(UserError, match="empty file"):
        read_perf_data_windows(tmp_path / "e.data")
    with pytest.raises(UserError, match="max_rows must be at least 1"):
        parse_perf_data_windows(BASES["barrier"], max_rows=0)
    first = struct.unpack_from("<Q", BASES["barrier"], 40)[0]
    bad = bytearray(BASES["barrier"])
    struct.pack_into("<H", bad, first + 6, 0xFFFF)
    with pytest.raises(UserError, match=f"at byte {first}: record runs past the end of the data"):
        parse_perf_data_windows(bytes(bad), name="f.data")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.none() | st.integers(0, len(BASES["barrier"])), patches=st.lists(patch, min_size=1, max_size=4),
       which=st.sampled_from(["barrier", "barrier-z"]), max_rows=st.sampled_from([1, 10, 10**6]))
def test_any_corruption_same_events_or_same_error(cut, patches, which, max_rows):
    data = _mutate(BASES[which], cut, patches)
    try:
        whole = parse_perf_data(data, "f.data")
    except UserError as exc:
        with pytest.raises(UserError) as got:
            list(parse_perf_data_windows(data, max_rows=max_rows, name="f.data"))
        assert str(got.value) == str(exc)
        return
    _check(parse_perf_data_windows(data, max_rows=max_rows, name="f.data"), whole)


def test_a_wild_cpu_is_refused_by_the_first_pass(files):
    """A sample naming a CPU beyond the machine's: `read_perf_data` refuses it in its decode, the
    windowed reader in its first pass (with the same message), before any window is read."""
    data = bytearray(files["synth"][1])
    for k, (i, lay) in enumerate(_samples(bytes(data))):
        if k in (5000, 15000):  # two, in different spans: the first in the file is named
            struct.pack_into("<I", data, i + lay[2], 1000)
    with pytest.raises(UserError) as whole:
        parse_perf_data(bytes(data), "f.data", threads=2, window=SPAN)
    assert "names CPU 1000, but the machine had 4 CPUs" in str(whole.value)
    with pytest.raises(UserError) as windowed:
        parse_perf_data_windows(bytes(data), max_rows=100, name="f.data", window=SPAN)
    assert str(windowed.value) == str(whole.value)


def test_compressed_stream_ending_inside_a_record(monkeypatch):
    """The -z stream cut inside its last record after a full-size compressed record (see
    test_perf_data): the windows skip the partial record too and say so in their stats."""
    real = P._decompress
    info = read_header(BASES["barrier-z"], "z")
    data, _ = real(np.frombuffer(BASES["barrier-z"], np.uint8)[info.data_offset:], 0, info.data_size, "z")
    last = 0
    while last + (int(data[last + 6]) | int(data[last + 7]) << 8) < len(data):
        last += int(data[last + 6]) | int(data[last + 7]) << 8
    monkeypatch.setattr(P, "_decompress", lambda *a: (data[:last + 8], True))
    whole = parse_perf_data(BASES["barrier-z"], "f.data")
    assert whole.stats["partial_record_bytes"] == 8
    _check(parse_perf_data_windows(BASES["barrier-z"], max_rows=9, name="f.data"), whole)


def test_bound_plans_about_max_rows_and_moves_past_ties():
    w = PerfDataWindows.__new__(PerfDataWindows)
    w._times, w._ahead = np.array([5, 5, 5, 7, 9, 9, 12], np.int64), 2
    assert w._bound(LO) == 5  # the first window ends where the kept times start (before them: < every)
    assert w._bound(5) == 7  # [5, 5] then 5 again: past the tie, not an empty window
    assert w._bound(7) == 9 and w._bound(9) == 12
    assert w._bound(12) == HI  # two ahead of 12 is past the last kept time
    w._times = np.zeros(0, np.int64)
    assert w._bound(LO) == HI


def test_cut_keeps_at_most_max_rows_or_one_whole_time():
    w = PerfDataWindows.__new__(PerfDataWindows)
    w.max_rows = 3
    spans = [(100, 10, 0), (200, 10, 4), (300, 10, 6)]
    t = np.array([8, 3, 5, 3, 9, 4, 6, 3], np.int64)  # file order; spans hold t[0:4], t[4:6], t[6:8]
    hi, out, kept, n = w._cut(spans, t, 8, 100)
    assert hi == 4 and n == 3 and kept.tolist() == [3, 3, 3]  # before the 4th earliest time (4)
    assert out == [(100, 10, 0), (300, 10, 2)]  # the middle span has none left
    w.max_rows = 2  # the 3 earliest share time 3: all of them, up to the next time
    hi, out, kept, n = w._cut(spans, t, 8, 100)
    assert hi == 4 and kept.tolist() == [3, 3, 3]
    t = np.full(5, 7, np.int64)  # one time only: nothing to cut
    assert w._cut([(0, 1, 0)], t, 5, 8)[0] == 8


def test_concat_events_merges_the_string_tables():
    a = RawEvents.from_rows([(1, 0, 1, 1, 1, 0, 0, 0, 0, 1), (2, 0, 1, 1, 1, 0, 0, 0, -1, 0)], ["x", "y"],
                            {"lost_events": 0})
    b = RawEvents.from_rows([(3, 1, 2, 2, 1, 0, 0, 0, 1, 0)], ["z", "y"])
    cat = concat_events([a, b])
    assert cat.time.tolist() == [1, 2, 3] and cat.comms == ["x", "y", "z"]
    assert [cat.comm(i) for i in cat.comm0] == ["x", "", "y"] and [cat.comm(i) for i in cat.comm1] == ["y", "x", "z"]
    assert cat.stats == {"lost_events": 0} and concat_events([a], {"k": 1}).stats == {"k": 1}
    assert len(concat_events([])) == 0
