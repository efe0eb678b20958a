"""The synthetic perf.data (benchmarks/speed/synth_perf_data.py) is one perf itself reads, and its
ground truth is what both of scalestack's readers and the state builder find.

The schedule's invariants (one thread per CPU, a woken thread switched in later, runtimes equal
to run lengths, rounds in time order) are checked without perf; the file against perf script,
perf sched timehist and `scalestack import`, which need perf and a recording (for the template).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.ingest.perf_data import read_events
from scalestack.trace.model import State
from scalestack.trace.store import load as load_trace

from ..conftest import ROOT, requires_recording

_spec = importlib.util.spec_from_file_location("synth_perf_data", ROOT / "benchmarks" / "speed" / "synth_perf_data.py")
synth = sys.modules.setdefault("synth_perf_data", importlib.util.module_from_spec(_spec))  # dataclasses look it up
_spec.loader.exec_module(synth)

SWITCH, WAKEUP, ENTER, EXIT, STAT = synth.SWITCH, synth.WAKEUP, synth.ENTER, synth.EXIT, synth.STAT


def replay(threads, cpus, steps, steps_chunk, seed, round_events):
    """Run the schedule and replay it as the kernel would have lived it; return per-thread
    running time from the switches, and what `schedule` itself added up."""
    rings = synth.make_rings(threads, cpus)
    first = {int(r.tids[0]) for r in rings}  # each ring's first holder starts without a wake-up
    running = np.zeros(threads, np.int64)
    chunks = list(synth.schedule(rings, steps, steps_chunk, 10**9, np.random.default_rng(seed), running,
                                 round_events))
    kind, t, cpu, ctx, a0, a1, a2 = (np.concatenate([c[j] for c, _ in chunks]) for j in range(7))
    rnd = np.concatenate([r for _, r in chunks])
    # file order: rounds ascending, within a round each CPU's buffer in turn, each in time order
    assert np.all(np.diff(rnd) >= 0)
    rounds = np.unique(rnd)
    for r in rounds:
        assert np.all(np.diff(cpu[rnd == r]) >= 0)
    for c in np.unique(cpu):
        assert np.all(np.diff(t[cpu == c]) >= 0)
    # perf flushes at each round's end what is older than the previous round's newest event:
    # nothing may come later that is older still
    r_min = np.array([t[rnd == r].min() for r in rounds])
    r_max = np.array([t[rnd == r].max() for r in rounds])
    assert np.all(r_min[1:] >= r_max[:-1])
    on_cpu = {}  # cpu -> running tid (0: idle)
    where, since, stat = {}, {}, {}  # tid -> its CPU, its switch-in time, the runtime it reported
    woken = set(first)
    got = Counter()
    for i in np.argsort(t, kind="stable"):
        k, ti, c, x = int(kind[i]), int(t[i]), int(cpu[i]), int(ctx[i])
        assert on_cpu.get(c, 0) == x, "an event in the context of a thread not on that CPU"
        if k == SWITCH:
            prev, nxt = int(a0[i]), int(a1[i])
            if prev:
                assert where.pop(prev) == c and a2[i] == 1  # S: blocked in its futex wait
                run = ti - since.pop(prev)
                assert stat.pop(prev) == run, "sched_stat_runtime is not the run's length"
                got[prev] += run
            if nxt:
                assert nxt not in where, "a thread on two CPUs"
                assert nxt in woken, "switched in without a wake-up"
                woken.discard(nxt)
                where[nxt], since[nxt] = c, ti
            on_cpu[c] = nxt
        elif k == WAKEUP:
            assert int(a0[i]) not in where, "woke a running thread"
            woken.add(int(a0[i]))
        elif k == STAT:
            assert int(a0[i]) == x
            stat[x] = int(a1[i])
    assert not where, "a thread still running at the end"
    return got, running


@settings(max_examples=40, deadline=None)
@given(threads=st.integers(2, 9), cpus=st.integers(1, 6), steps=st.integers(1, 60), steps_chunk=st.integers(1, 25),
       seed=st.integers(0, 2**32 - 1), round_events=st.integers(1, 50))
def test_schedule_is_consistent(threads, cpus, steps, steps_chunk, seed, round_events):
    got, running = replay(threads, cpus, steps, steps_chunk, seed, round_events)
    assert {tid: got.get(tid, 0) for tid in range(synth.PID, synth.PID + threads)} == \
        {synth.PID + k: int(v) for k, v in enumerate(running)}


def test_rings_use_disjoint_cpus_and_every_thread():
    for threads, cpus in [(2, 1), (4, 4), (8, 4), (3, 2), (16, 8), (5, 3)]:
        rings = synth.make_rings(threads, cpus)
        assert sorted(int(t) for r in rings for t in r.tids) == list(range(synth.PID, synth.PID + threads))
        used = [set(r.cpu_of.tolist()) for r in rings]
        assert all(u.isdisjoint(v) for a, u in enumerate(used) for v in used[a + 1:])
        assert set().union(*used) <= set(range(cpus))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    from ..conftest import can_record

    if can_record() is not None:
        pytest.skip(str(can_record()))
    path = tmp_path_factory.mktemp("synth") / "synth.data"
    return synth.write(path, 100_000, threads=6, cpus=4, seed=7, chunk=30_000)  # several chunks and rounds


def _clean(stderr: str) -> list[str]:
    """perf's stderr lines other than timehist's note that tracepoints carry no callchains."""
    return [line for line in stderr.splitlines() if line.strip() and "do not have callchains" not in line]


@requires_recording
def test_perf_script_reads_every_event(written):
    proc = subprocess.run(["perf", "script", "-i", written.path, "--show-lost-events", "-F",
                           "comm,pid,tid,cpu,time,event"], capture_output=True, text=True)
    assert proc.returncode == 0 and not _clean(proc.stderr), proc.stderr[-2000:]
    names = Counter(m.group(1) for m in re.finditer(r" (\w+:\w+):\s*$", proc.stdout, re.M))
    assert dict(names) == {k: v for k, v in written.counts.items() if v}
    assert sum(written.counts.values()) == written.events > 90_000


@requires_recording
def test_perf_sched_timehist_runs_clean_and_agrees(written):
    proc = subprocess.run(["perf", "sched", "timehist", "-i", written.path], capture_output=True, text=True)
    assert proc.returncode == 0 and not _clean(proc.stderr), proc.stderr[-2000:]
    run_ms, rows = Counter(), Counter()
    for m in re.finditer(r"^\s*[\d.]+\s+\[\d+\]\s+synth\[(\d+)(?:/\d+)?\]\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$",
                         proc.stdout, re.M):
        run_ms[int(m.group(1))] += float(m.group(2))
        rows[int(m.group(1))] += 1
    assert set(run_ms) == set(written.tids)
    for tid, ns in written.running_ns.items():  # timehist truncates each run to whole microseconds
        assert 0 <= ns - round(run_ms[tid] * 1e6) < rows[tid] * 1000, tid


@requires_recording
def test_scalestack_import_finds_the_ground_truth(written, tmp_path):
    out = tmp_path / "synth.trace"
    env = {**os.environ, "SCALESTACK_CHECK_READERS": "1", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", "perf-data", written.path, "--comm",
                           "synth", "-o", str(out)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tr = load_trace(out)
    s = tr.states
    running = {int(tid): int(((s.end_ns - s.start_ns)[(s.state == State.RUNNING) & (s.tid == tid)]).sum())
               for tid in np.unique(s.tid)}
    assert running == written.running_ns
    assert tr.meta["lost_events"] == 0 and not tr.meta["warnings"]
    assert tr.meta["kernel_runtime_check"]["max_abs_rel_diff"] == 0.0


@requires_recording
def test_both_readers_agree(written, monkeypatch):
    monkeypatch.setenv("SCALESTACK_CHECK_READERS", "1")  # read_events raises if the two differ
    ev = read_events(written.path, "perf", reader="perf-data")
    assert len(ev) == written.events
    assert ev.stats["lost_events"] == 0 and ev.stats["unknown_events"] == 0
    assert ev.stats["nr_cpus"] == {"online": written.cpus, "available": written.cpus}
