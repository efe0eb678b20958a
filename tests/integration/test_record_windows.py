"""`record --chunk-rows N` with the eBPF collector: the recording is read in windows of N events and
its trace written as it is built; the file loads equal to the trace the same records give when
held whole, and the exit check (from per-thread sums, the written trace holding no states) equals
the one of the held trace."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import scalestack
from scalestack.collect import ebpf
from scalestack.collect import exit_check as exits
from scalestack.trace import streaming
from scalestack.trace.builder import build_trace
from scalestack.trace.store import load
from scalestack.trace.streaming import build_trace_windows

from ..conftest import requires_recording
from ..top.conftest import requires_ebpf

pytestmark = [requires_recording, requires_ebpf]

GIVEN = ("attached_pid", "clock", "collector", "command", "cores", "cpus_allowed", "cpus_online", "duration_s",
         "ebpf_buffer_bytes", "ebpf_records", "exit_status", "host", "kernel", "record_elapsed_s", "recorded_at",
         "sample_hz", "signal", "source", "tracepoints")


def _held_is_written(events, written, keys, tables=("threads", "states", "names", "switch_spans", "samples"),
                     finish=lambda held: held):
    """The trace `build_trace` makes of the recording's `events` (the recorded meta `keys` given it,
    `finish` applied) equals the trace `record` wrote in windows, table for table and in its meta."""
    meta = written.meta
    given = {k: meta[k] for k in GIVEN if k in meta} | {k: meta[k] for k in keys}
    held = finish(build_trace(events, root_pids=[meta["root_tid"]], start_ns=meta["start_ns"], root_known=True,
                              meta=given | {"warnings": []}))
    for name in tables:
        assert getattr(held, name) == getattr(written, name), name
    assert {k: v for k, v in meta.items() if k not in ("exit_check", "warnings")} == \
        {k: v for k, v in held.meta.items() if k != "warnings"}
    return held


def test_record_in_windows_writes_the_held_trace(c_programs, tmp_path, monkeypatch):
    kept, windows = tmp_path / "events.bin", ebpf.RecordWindows

    class Keeping(windows):  # the records file is removed when record returns: keep a copy
        def __init__(self, path, max_rows):
            shutil.copyfile(path, kept)
            super().__init__(path, max_rows)

    monkeypatch.setattr(ebpf, "RecordWindows", Keeping)
    out = tmp_path / "w.trace"
    calls = []
    small = scalestack.record([str(c_programs["prodcons"]), "20000", "2", "200"], str(out), collector="ebpf",
                              chunk_rows=2000, progress=lambda *a: calls.append(a))
    written = load(out)
    n = ebpf.record_count(str(kept))
    stages = {stage for _, _, stage in calls}
    assert {"1/5 threads", "2/5 states, spans and names"} <= stages  # 3-5 only when asked something
    assert all(0 < done <= total <= n for done, total, _ in calls) and (n, n, "1/5 threads") in calls
    for stage in stages:  # each pass reads to the end
        done, total = [(d, t) for d, t, s in calls if s == stage][-1]
        assert done == total, stage
    assert n > 4 * 2000 and len(small.states) == 0 and len(written.states) > 200
    meta = written.meta
    held = build_trace(ebpf.read_records(str(kept)), root_pids=[meta["root_tid"]], start_ns=meta["start_ns"],
                       root_known=True, meta={k: meta[k] for k in GIVEN} | {"warnings": []})
    batched = tmp_path / "b.trace"  # and a few threads at a time, each batch with its own run-delay reports,
    pieces, cuts = [], streaming._SpilledRows._cuts  # a thread of more rows than that cut in time
    monkeypatch.setattr(streaming._SpilledRows, "_cuts", lambda self, *a: pieces.append(cuts(self, *a)) or pieces[-1])
    # a third of the busiest thread's intervals a batch (600 left every thread whole in one CI run)
    budget = max(50, int(np.bincount(np.unique(held.states.tid, return_inverse=True)[1]).max()) // 3)
    build_trace_windows(lambda: iter(windows(str(kept), 3000)), output=str(batched), batch_rows=budget,
                        root_pids=[meta["root_tid"]], start_ns=meta["start_ns"], root_known=True)
    assert held.meta["runnable_reconciled_ns"]  # the kernel's run delays resized waits
    assert max(len(p) for p in pieces) >= 2, [len(p) for p in pieces]
    for name in ("threads", "states", "names", "switch_spans", "samples"):
        assert getattr(held, name) == getattr(written, name), name
        assert getattr(held, name) == getattr(load(batched), name), name
    assert small.threads == written.threads
    result = meta["exit_check"]
    assert result["available"] and len(result["threads"]) >= 2  # prodcons' producer and consumers exit
    assert {k: v for k, v in meta.items() if k not in ("exit_check", "warnings")} == \
        {k: v for k, v in held.meta.items() if k != "warnings"}
    readings = {int(t): (on_cpu, rq, 0) for t, (_run, on_cpu, _rq, rq) in result["threads"].items()}
    assert exits.check(held, readings) == result
    assert meta["warnings"] == held.warnings + ([exits.warning(result)] if exits.warning(result) else [])


def test_perf_record_with_stacks_in_windows_writes_the_held_trace(c_programs, tmp_path):
    """`--stacks` (samples at 1 kHz and a call stack on each sample and futex call) read in windows:
    the tracepoints by the direct reader a window at a time, the samples (read by perf script) put
    among them, the stacks attached before the trace is written: the trace of the same perf.data
    read whole, samples, frames, stacks and futex calls included."""
    from scalestack.ingest.perf_data import read_events, read_stacks_of
    from scalestack.ingest.perf_stacks import attach_stacks
    from scalestack.tools import which

    kept, out = tmp_path / "perf.data", tmp_path / "s.trace"
    small = scalestack.record([str(c_programs["prodcons"]), "20000", "2", "200"], str(out), collector="perf",
                              stacks=True, keep_perf_data=str(kept), chunk_rows=2000)
    written = load(out)
    perf = which("perf") or "perf"
    events = read_events(str(kept), perf, samples=True)
    assert len(events) > 4 * 2000 and len(small.states) == 0 and len(written.states) > 200

    def with_stacks(held):
        return attach_stacks(held, read_stacks_of(str(kept), perf, np.unique(held.threads.pid))).with_meta(
                stacks="dwarf")
    held = _held_is_written(events, written, ("mmap_size", "perf_version", "reader", "sample_hz"),
                            ("threads", "states", "names", "switch_spans", "samples", "frames", "stacks", "futex_calls"),
                            with_stacks)
    assert len(held.samples) > 5 and len(held.futex_calls) > 100 and (held.samples.stack >= 0).any()
    assert written.meta["stacks"] == "dwarf" and written.meta["exit_check"]["available"]


def test_tracefs_record_in_windows_writes_the_held_trace(c_programs, tmp_path, monkeypatch):
    """The tracefs collector's page files read in windows (`ftrace_raw.FtraceWindows`): the trace of
    the same pages read whole."""
    from scalestack.collect import tracefs
    from scalestack.ingest.ftrace_raw import read_cpu_buffers

    kept, windows = {}, tracefs.FtraceWindows

    class Keeping(windows):  # the page files are removed when record returns: keep their bytes
        def __init__(self, files, formats, max_rows):
            kept.update(pages={cpu: open(path, "rb").read() for cpu, path in files.items()}, formats=formats)
            super().__init__(files, formats, max_rows)

    monkeypatch.setattr(tracefs, "FtraceWindows", Keeping)
    out = tmp_path / "f.trace"
    small = scalestack.record([str(c_programs["prodcons"]), "20000", "2", "200"], str(out), collector="tracefs",
                              chunk_rows=2000)
    written = load(out)
    events = read_cpu_buffers(kept["pages"], kept["formats"])
    events.stats["lost_events"] = written.meta["lost_events"]
    assert len(events) > 4 * 2000 and len(small.states) == 0 and len(written.states) > 200
    _held_is_written(events, written, ("ftrace_buffer_kb",))


def test_chunk_rows_is_for_recordings_read_directly(tmp_path):
    res = subprocess.run([sys.executable, "-m", "scalestack.cli", "record", "--collector", "perf", "--reader",
                          "perf-script", "--chunk-rows", "5", "-o", str(tmp_path / "t.trace"), "--", "true"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "--chunk-rows reads the recording in windows; --reader perf-script reads it whole" in res.stderr
    assert not (tmp_path / "t.trace").exists()


def test_perf_record_in_windows_writes_the_held_trace(c_programs, tmp_path):
    """The perf collector's perf.data read in windows (`perf_data.windows_if_big`): the trace of the
    same file read whole (kept with --keep-perf-data)."""
    from scalestack.ingest.perf_data import read_perf_data

    kept, out = tmp_path / "perf.data", tmp_path / "p.trace"
    small = scalestack.record([str(c_programs["prodcons"]), "20000", "2", "200"], str(out), collector="perf",
                              keep_perf_data=str(kept), chunk_rows=2000)
    written = load(out)
    events = read_perf_data(kept)
    assert len(events) > 4 * 2000 and len(small.states) == 0 and len(written.states) > 200
    _held_is_written(events, written, ("mmap_size", "perf_version", "reader"))
    assert written.meta["exit_check"]["available"]


@pytest.mark.parametrize("rows", [0, 1 << 30])
def test_a_recording_within_the_limit_is_held(c_programs, tmp_path, rows):
    trace = scalestack.record([str(c_programs["prodcons"]), "500", "2", "200"], str(tmp_path / "h.trace"),
                              collector="ebpf", chunk_rows=rows)
    assert len(trace.states) > 0 and load(tmp_path / "h.trace").states == trace.states


def test_records_out_of_order_by_more_than_a_window_are_read_whole(c_programs, tmp_path, monkeypatch):
    class Disordered(ebpf.RecordWindows):  # never seen on a real ring buffer: as if it were
        def __iter__(self):
            raise ebpf.OutOfOrder("out of order")
            yield

    monkeypatch.setattr(ebpf, "RecordWindows", Disordered)
    trace = scalestack.record([str(c_programs["prodcons"]), "20000", "2", "200"], str(tmp_path / "d.trace"),
                              collector="ebpf", chunk_rows=2000)
    assert len(trace.states) > 200 and load(tmp_path / "d.trace").states == trace.states
    assert trace.meta["exit_check"]["available"] and trace.meta["n_events"] > 4 * 2000
