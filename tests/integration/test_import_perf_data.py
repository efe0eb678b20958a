"""A perf.data recorded with plain `perf record -a` imports as the chosen program's Trace."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import scalestack
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace import State
from scalestack.trace.builder import list_processes
from scalestack.trace.events import RECORD_TRACEPOINTS

from ..conftest import requires_recording

pytestmark = requires_recording


def test_import_perf_data_by_name(c_programs, tmp_path):
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(c_programs["barrier_imbalance"]), "4", "2000000", "3"],
                   check=True, capture_output=True)
    def run(*args):
        return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True)

    listing = run("import", str(data), "--list")
    assert listing.returncode == 0 and "barrier_imbalan" in listing.stdout
    proc = run("import", str(data), "--comm", "barrier_imbalan", "-o", str(tmp_path / "b.trace"))
    assert proc.returncode == 0, proc.stderr
    trace = scalestack.load(tmp_path / "b.trace")
    trace.validate()
    assert trace.meta["source"] == "perf-data" and len(trace.threads) == 3
    # the dummy software event perf record -a adds samples nothing: no perf script run for samples
    assert "samples_read_by" not in trace.meta and len(trace.samples) == 0
    assert scalestack.criticality(trace).share.max() > 0.5


def test_import_a_part_of_a_recording(c_programs, tmp_path):
    """`import --between`: all of the recording gives the whole import's Trace exactly; a part
    spans exactly that part, and from each thread's first event in it on, its time in each state
    is the whole import's over the same stretch (to 2%); a part outside the recording, or a
    --between for a Chrome trace, is one line and writes nothing."""
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(c_programs["prodcons"]), "20000", "2", "200"],
                   check=True, capture_output=True)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "scalestack.cli", "import", str(data), "--comm", "prodcons", *args],
                              capture_output=True, text=True)

    for name, args in [("whole", []), ("all", ["--between", "0", "1000s"])]:
        assert run(*args, "-o", str(tmp_path / f"{name}.trace")).returncode == 0
    whole = scalestack.load(tmp_path / "whole.trace")
    assert whole.equals(scalestack.load(tmp_path / "all.trace"))
    t0, t1 = whole.start_ns + whole.wall_ns // 4, whole.start_ns + whole.wall_ns // 2
    proc = run("--between", str(t0), str(t1), "-o", str(tmp_path / "part.trace"))
    assert proc.returncode == 0, proc.stderr
    part = scalestack.load(tmp_path / "part.trace")
    part.validate()
    assert (part.start_ns, part.end_ns) == (t0, t1) and part.meta["imported_between_ns"] == [t0, t1]
    cut = whole.between(t0, t1)
    checked = 0
    for tid in part.threads.tid:
        s = part.states
        known = (s.tid == tid) & (s.state != State.UNKNOWN)
        if not known.any():
            continue
        since = int(s.start_ns[known].min())
        for state in (State.RUNNING, State.RUNNABLE, State.SYNC_WAIT):
            a, b = _time_in(cut, tid, state, since), _time_in(part, tid, state, since)
            assert abs(a - b) <= max(0.02 * a, 1_000_000), (tid, state.label, a, b)
            checked += a > 0
    assert checked >= 4
    # --list of the part: its own events, not those of the context read before it
    events = read_perf_data(data)
    want = {r["pid"]: r["events"] for r in list_processes(events.take(np.flatnonzero((events.time >= t0) & (events.time < t1))))}
    listing = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", str(data), "--list", "--between", str(t0),
                              str(t1)], capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    assert {int(f[0]): int(f[2]) for f in (ln.split() for ln in listing.stdout.splitlines()[1:])} == want
    bad = run("--between", "1000s", "1001s", "-o", str(tmp_path / "none.trace"))
    assert bad.returncode != 0 and "holds no events" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "none.trace").exists()
    (tmp_path / "t.json").write_text("[]")
    chrome = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", "chrome", str(tmp_path / "t.json"),
                             "--between", "0", "1s"], capture_output=True, text=True)
    assert chrome.returncode != 0 and "--between is for perf inputs" in chrome.stderr


def _time_in(trace, tid, state, since):
    s = trace.states
    m = (s.tid == tid) & (s.state == state)
    return int(np.clip(s.end_ns[m] - np.maximum(s.start_ns[m], since), 0, None).sum())


def test_a_recording_with_cpu_samples_imports_them(c_programs, tmp_path, monkeypatch):
    """`perf record -e cpu-clock` beside the tracepoints: the import keeps the samples, their code
    named by perf script (the workers spin in `worker`), read whole and in windows alike; without
    perf they are left out with a warning."""
    from scalestack.ingest import perf_data
    from scalestack.ingest.perf_data import load

    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "-e", "cpu-clock/period=500000/", "--",
                    str(c_programs["balanced"]), "2", "10", "4000000"], check=True, capture_output=True)
    whole = load(str(data), comm="balanced")
    s = whole.samples
    th = whole.threads  # the workers: not the main thread, which only starts and joins them (its samples are the
    workers = [t for t, p in zip(th.tid.tolist(), th.pid.tolist(), strict=True)  # kernel's: exec, faults, exit)
               if t != p and np.sum(s.tid == t) > 5]
    assert len(s) > 20 and len(workers) >= 2 and whole.meta["samples_read_by"] == "perf script"
    for w in workers:
        assert np.mean(s.symbol[s.tid == w] == "worker") > 0.8
    windows = load(str(data), comm="balanced", chunk_rows=20)
    assert len(read_perf_data(data)) > 4 * 20  # (so the second import was read in windows)
    for name in ("threads", "states", "names", "switch_spans", "samples"):
        assert getattr(windows, name) == getattr(whole, name), name
    monkeypatch.setattr(perf_data, "which", lambda _name: None)
    bare = load(str(data), comm="balanced")
    assert len(bare.samples) == 0 and bare.states == whole.states
    assert any("CPU samples were not read" in w for w in bare.warnings)


def test_events_of_exiting_threads_named_minus_one_break_no_chain(c_programs, tmp_path):
    """perf writes the last events of an exiting thread (its runtime report, its final switch's
    context) with tid -1, once the kernel has unhashed its pid. The builder's chain gaps are those
    of a reference check (by CPU: each event's task must be the one the previous switch left
    there) that reads such an event, a CPU sample or a side-band record as naming no task; 300
    rounds of 3 short threads give hundreds of such events."""
    from scalestack.ingest.perf_data import load
    from scalestack.trace.events import Kind

    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(c_programs["thread_churn"]), "300"],
                   check=True, capture_output=True)
    ev = read_perf_data(data).sorted()
    side = np.isin(ev.kind, [Kind.TASK_COMM, Kind.TASK_FORK, Kind.TASK_EXIT, Kind.SAMPLE])
    switch = ev.kind == Kind.SWITCH
    task = np.where(switch, ev.arg0, ev.tid)
    unnamed = ~side & (task == -1)
    assert unnamed.sum() > 50, "no events of unhashed exiting threads: this kernel names them"
    seen = ~side & ~unnamed & (ev.cpu >= 0)
    after = np.where(switch, ev.arg1, task)  # the task on the CPU after the event
    trace = load(str(data), comm="thread_churn")
    want = []
    for c in range(len(trace.meta["chain_gaps_per_cpu"])):
        rows = np.flatnonzero(seen & (ev.cpu == c))
        want.append(int(np.sum(task[rows[1:]] != after[rows[:-1]])))
    assert trace.meta["chain_gaps_per_cpu"] == want
    assert len(trace.threads) == 901
