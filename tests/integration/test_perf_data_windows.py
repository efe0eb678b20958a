"""The perf.data reader reads the data section in windows, on several threads: every window size
and thread count gives the same events as one window on one thread, and as perf script's text,
on a real recording that spans many windows (a switch storm of workloads/c/prodcons.c), plain
and compressed (`perf record -z`)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.ingest import perf_data
from scalestack.ingest.parts import part_read_from
from scalestack.ingest.perf_data import parse_perf_data, read_events, read_perf_data
from scalestack.trace import streaming
from scalestack.trace.events import RECORD_TRACEPOINTS

from ..conftest import requires_recording

pytestmark = requires_recording


@pytest.fixture(scope="module", params=["plain", "compressed"])
def storm(request, c_programs, tmp_path_factory):
    data = tmp_path_factory.mktemp(f"storm-{request.param}") / "perf.data"  # the tests tell the two apart by path
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-m", "16M", "-o", str(data),
                    *(["-z"] if request.param == "compressed" else []), "-e", ",".join(RECORD_TRACEPOINTS), "--",
                    str(c_programs["prodcons"]), "100000", "2", "200"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    one = read_perf_data(data, threads=1, window=1 << 40)
    return data, one


def _same(a, b):
    assert len(a) == len(b)
    for k in ("time", "cpu", "tid", "pid", "kind", "arg0", "arg1", "arg2"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    for k in ("comm0", "comm1"):  # string tables may number the strings differently
        sa = np.array(a.comms + [""], dtype=object)[getattr(a, k)]
        sb = np.array(b.comms + [""], dtype=object)[getattr(b, k)]
        assert np.array_equal(sa, sb), k
    assert a.stats == b.stats


def _part(events, lo, hi):
    """The events a part [lo, hi) is read with: its own and those of the context before it."""
    part = events.take(np.flatnonzero((events.time >= part_read_from(lo)) & (events.time < hi)))
    part.stats.update(between_ns=[lo, hi], time_range_ns=[int(events.time[0]), int(events.time[-1])])
    return part


def test_many_windows_on_threads_equal_perf_script(storm):
    data, one = storm
    # (~5 events an item when the two threads hand over across CPUs; 43 491 in one run where the
    # scheduler kept them on one CPU, handing over a buffer of 200 at a time: still many windows)
    assert len(one) > 20_000 and np.all(one.time[1:] >= one.time[:-1])
    many = read_perf_data(data, threads=3, window=1 << 16)
    # many windows of the file (perf -z packs the same events into fewer bytes: ~0.5 MB, fewer windows)
    assert data.stat().st_size > 8 * (1 << 16) or "storm-compressed" in str(data)
    _same(one, many)
    assert many.equals(read_events(str(data), "perf", reader="perf-script"))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=st.integers(1 << 16, 1 << 20), threads=st.integers(1, 4))
def test_any_window_and_thread_count_gives_the_same_events(storm, window, threads):
    data, one = storm
    _same(one, read_perf_data(data, threads=threads, window=window))
    _same(one, parse_perf_data(data.read_bytes(), "f.data", threads=threads, window=window))


def test_progress_follows_both_passes_to_the_end(storm):
    data, one = storm
    calls = []
    read_perf_data(data, threads=2, window=1 << 16, progress=lambda done, total, stage: calls.append((stage, done, total)))
    for stage in ("checking records", "decoding events"):
        mine = [(d, t) for s, d, t in calls if s == stage]
        assert len(mine) > 1 and mine[-1][0] == mine[-1][1]  # many windows, the last one completes
        assert all(b[0] > a[0] for a, b in zip(mine, mine[1:], strict=False))  # each window adds to what is done


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=st.floats(0, 1), b=st.floats(0, 1), window=st.integers(1 << 16, 1 << 20), threads=st.integers(1, 3),
       header=st.booleans())
def test_a_part_of_the_recording_is_the_whole_readings_events_in_it(storm, a, b, window, threads, header):
    """Absolute and relative times; relative ones from perf's header (its first sample's time),
    or, for a file without it, from a first pass that finds the first event."""
    data, one = storm
    first, last = int(one.time[0]), int(one.time[-1])
    assert one.stats["sample_time"] in ([first, last], [0, 0])  # perf record -z leaves it 0
    lo, hi = sorted((first + int(a * (last - first)), first + int(b * (last - first))))
    hi += 1
    want = _part(one, lo, hi)
    if not np.any(want.time >= lo):  # a part inside a gap between events: one line says so
        with pytest.raises(UserError, match="holds no events"):
            read_perf_data(data, threads=threads, window=window, between=(lo, hi))
        return
    part = read_perf_data(data, threads=threads, window=window, between=(lo, hi))  # absolute ns
    _same(want, part)
    names = dict(perf_data._FEATURE_NAMES)
    if not header:
        del names[21]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perf_data, "_FEATURE_NAMES", names)
        relative = read_perf_data(data, threads=threads, window=window, between=(f"{lo - first}ns", f"{hi - first}ns"))
    relative.stats.pop("sample_time", None)
    part.stats.pop("sample_time")
    _same(part, relative)


def test_a_part_with_nothing_in_it_says_so_in_one_line(storm):
    data, one = storm
    with pytest.raises(UserError, match="holds no events: the recording runs"):
        read_perf_data(data, between=("1000s", "1001s"))
    with pytest.raises(UserError, match="not after the start"):
        read_perf_data(data, between=("2ms", "1ms"))


def test_import_in_windows_gives_the_whole_reads_trace(storm, tmp_path, monkeypatch):
    """`import --chunk-rows N` of the recorded storm (~10^5 events): read in windows of N events and
    built pass by pass, the trace file loads equal to the whole read's, table for table and key for key."""
    import sys

    from scalestack.trace.store import load

    data, one = storm
    out = {}
    for rows in ("0", "5000"):
        out[rows] = tmp_path / f"{rows}.trace"
        subprocess.run([sys.executable, "-m", "scalestack.cli", "import", "perf-data", str(data), "--comm", "prodcons",
                        "--chunk-rows", rows, "-o", str(out[rows])], check=True, capture_output=True)
    whole = load(out["0"])
    assert len(one) > 4 * 5000 and len(whole.states) > 1000
    # and built a few threads at a time, in batches of a quarter of the busiest thread's rows (how many
    # a recording gives its threads varies with the machine: 2000 rows cut none once), so that one is
    # cut in time
    batch = max(100, int(np.bincount(np.unique(whole.states.tid, return_inverse=True)[1]).max()) // 4)
    batched = tmp_path / "batched.trace"
    pieces, cuts = [], streaming._SpilledRows._cuts
    monkeypatch.setattr(streaming._SpilledRows, "_cuts", lambda self, *a: pieces.append(cuts(self, *a)) or pieces[-1])
    small = perf_data.import_file(str(data), str(batched), comm="prodcons", chunk_rows=5000, batch_rows=batch)
    assert len(small.states) == 0 and small.threads == whole.threads and pieces and max(len(p) for p in pieces) >= 2
    for streamed in (load(out["5000"]), load(batched)):
        for name in ("threads", "states", "names", "switch_spans", "samples"):
            assert getattr(whole, name) == getattr(streamed, name), name
        assert whole.meta == streamed.meta
    res = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", "chrome", str(data), "--chunk-rows", "5"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "--chunk-rows is for perf.data inputs" in res.stderr
    assert "Traceback" not in res.stderr
