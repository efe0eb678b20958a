"""Simulator: hand-computed timelines, thesis Fig. 3.2, invariants, what-if, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.criticality import criticality
from scalestack.analysis.whatif import whatif
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import fig32, random_workload
from scalestack.trace import State

ROOT = Path(__file__).resolve().parents[2]


def rows(res):
    s = res.trace.states
    return [(int(a), int(b), int(c), int(d), int(w)) for a, b, c, d, w in zip(s.tid, s.start_ns, s.end_ns, s.state, s.waker, strict=True)]


def test_fig32_criticality_exact():
    r = simulate(fig32(), cores=4, freq_ghz=1.0)
    c = criticality(r.trace)
    assert c.criticality_ns.tolist() == [6500.0, 5000.0, 5000.0, 5500.0]
    assert c.running_ns.tolist() == [11000.0, 16000.0, 16000.0, 17000.0]
    assert r.runtime_ns == 22000
    assert c.most_critical_tid == 1000


def test_fifo_lock_and_frequency_timeline():
    # 2 GHz: 2000 cycles = 1000 ns, plus 100 ns memory and 50 ns store (non-scaling)
    wl = {"name": "t", "threads": [
        {"name": "main", "start": True, "ops": [["lock", 0], ["compute", 2000, 100, 50], ["unlock", 0]]},
        {"name": "w1", "start": True, "ops": [["lock", 0], ["compute", 2000], ["unlock", 0]]},
    ]}
    r = simulate(wl, cores=2, freq_ghz=2.0)
    assert rows(r) == [(1000, 0, 1150, State.RUNNING, -1),
                       (1001, 0, 1150, State.SYNC_WAIT, 1000), (1001, 1150, 2150, State.RUNNING, -1)]
    assert r.truth["compute_ns"] == [1000, 1000] and r.truth["memory_ns"] == [100, 0]
    r4 = simulate(wl, cores=2, freq_ghz={0: 4.0, 1: 2.0})
    assert r4.runtime_ns == 500 + 150 + 1000


def test_unfair_lock_lifo_handoff():
    wl = {"name": "t", "mutex_policy": {"0": "unfair"}, "threads": [
        {"start": True, "ops": [["lock", 0], ["compute", 1000], ["unlock", 0]]},
        {"start": True, "ops": [["compute", 100], ["lock", 0], ["compute", 100], ["unlock", 0]]},
        {"start": True, "ops": [["compute", 200], ["lock", 0], ["compute", 100], ["unlock", 0]]},
    ]}
    r = simulate(wl, cores=3, freq_ghz=1.0)
    ends = {t: e for t, s, e, st_, w in rows(r) if st_ == State.SYNC_WAIT}
    assert ends == {1002: 1000, 1001: 1100}  # the last waiter gets the lock first


def test_oversubscription_runqueue_and_join():
    wl = {"name": "t", "threads": [
        {"start": True, "ops": [["spawn", 1], ["spawn", 2], ["join", 1], ["join", 2]]},
        {"start": False, "ops": [["compute", 1000]]},
        {"start": False, "ops": [["compute", 1000]]},
    ]}
    r = simulate(wl, cores=1, freq_ghz=1.0)
    # one core: main blocks in join, worker 1 runs, worker 2 waits in the run queue ahead of main
    assert rows(r) == [(1000, 0, 1000, State.SYNC_WAIT, 1001), (1000, 1000, 2000, State.RUNNABLE, -1),
                       (1001, 0, 1000, State.RUNNING, -1),
                       (1002, 0, 1000, State.RUNNABLE, -1), (1002, 1000, 2000, State.RUNNING, -1)]
    assert r.runtime_ns == 2000
    assert r.trace.meta["cores"] == 1 and r.trace.meta["root_tid"] == 1000


def test_barrier_wakes_all_with_last_arriver_as_waker():
    wl = {"name": "t", "threads": [
        {"start": True, "ops": [["compute", 100 * (i + 1)], ["barrier", 0, 3], ["compute", 10]]}
        for i in range(3)]}
    r = simulate(wl, cores=3, freq_ghz=1.0)
    waits = [(t, s, e, w) for t, s, e, st_, w in rows(r) if st_ == State.SYNC_WAIT]
    assert waits == [(1000, 100, 300, 1002), (1001, 200, 300, 1002)]
    assert r.runtime_ns == 310


@settings(max_examples=25, deadline=None)
@given(threads=st.integers(2, 10), cores=st.integers(1, 8), seed=st.integers(0, 10_000))
def test_states_tile_lifetimes_and_determinism(threads, cores, seed):
    wl = random_workload(threads, seed)
    r = simulate(wl, cores=cores)
    tr = r.trace
    tr.validate()
    s = tr.states
    for k, t in enumerate(tr.threads.tid):
        m = s.tid == t
        assert s.start_ns[m][0] == tr.threads.start_ns[k] and s.end_ns[m][-1] == tr.threads.end_ns[k]
        assert np.all(s.start_ns[m][1:] == s.end_ns[m][:-1])
    # never more threads running than cores
    run = s.state == State.RUNNING
    ev = np.concatenate([np.stack([s.start_ns[run], np.ones(run.sum())], 1), np.stack([s.end_ns[run], -np.ones(run.sum())], 1)])
    ev = ev[np.lexsort((ev[:, 1], ev[:, 0]))]
    assert np.cumsum(ev[:, 1]).max() <= cores
    assert rows(simulate(wl, cores=cores)) == rows(r)
    # factor 1 replays the original run exactly
    w = whatif(tr, 1000, 1.0)
    assert abs(w.replay_runtime_ns - tr.wall_ns) < 1e-6 and w.crit_speedup == 1.0


def test_faster_thread_never_slows_barrier_program():
    wl = {"name": "t", "threads": [
        {"start": True, "ops": [["compute", 1000 * (i + 1)], ["barrier", 0, 3]] * 3} for i in range(3)]}
    base = simulate(wl, cores=3, freq_ghz=1.0)
    w = whatif(base.trace, 1002, 2.0)
    fast = simulate(wl, cores=3, freq_ghz={0: 1.0, 1: 1.0, 2: 2.0})
    assert base.runtime_ns / fast.runtime_ns == w.replay_speedup == 9000 / 6000


def test_cli_run_writes_loadable_trace(tmp_path):
    from scalestack.commands.sim import command as sim_cmd
    from scalestack.commands.whatif import command as whatif_cmd

    out = tmp_path / "f.sstrace"
    r = CliRunner().invoke(sim_cmd, ["run", "fig32", "--freq", "1", "--accelerate", "1000", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["runtime_ns"] == 22000 and d["accelerated_runtime_ns"] == 17000
    tr = scalestack.load(str(out))
    assert tr.meta["source"] == "sim"
    r = CliRunner().invoke(whatif_cmd, [str(out), "--accelerate", "1000", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["tid"] == 1000


def test_validate_criticality_quick():
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/validate_criticality.py"), "--quick"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "largest criticality" in p.stdout and "replay" in p.stdout


def test_bounded_queue_timeline():
    # producer makes 3 items (100 ns each), queue of 1 slot; consumer takes 300 ns per item
    wl = {"name": "q", "threads": [
        {"start": True, "ops": [["compute", 100], ["put", 0, 1]] * 3},
        {"start": True, "ops": [["get", 0], ["compute", 300]] * 3},
    ]}
    r = simulate(wl, cores=2, freq_ghz=1.0)
    # item 1 handed to the waiting consumer at 100; item 2 queued at 200; item 3 full at 300
    # until the consumer takes item 2 at 400; consumer ends at 100 + 3*300 = 1000
    assert r.runtime_ns == 1000
    waits = [(t, s, e, w) for t, s, e, st_, w in rows(r) if st_ == State.SYNC_WAIT]
    assert waits == [(1000, 300, 400, 1001), (1001, 0, 100, 1000)]


def test_named_workloads_and_yaml_file(tmp_path):
    from scalestack.sim.workloads import NAMED, get

    for name in NAMED:
        r = simulate(get(name, 6, 1), cores=4)
        r.trace.validate()
        assert r.runtime_ns > 0
    gc = simulate(get("gc_heavy", 6), cores=8).trace
    assert "gc" in set(gc.threads.role)
    # BFS: the worker running the sequential step is the most critical and the one to accelerate
    wl = get("bfs", 6)
    r = simulate(wl, cores=8)
    assert criticality(r.trace).most_critical_tid == 1001
    y = simulate(get(str(ROOT / "workloads/sim/lock_then_barrier.yaml")), cores=2, freq_ghz=1.0)
    # worker-1: lock 0..2.1 ms, then 1 ms; worker-2 waits, 0.5 ms, 0.45 ms, then waits at the barrier
    assert y.runtime_ns == 3_100_000


def test_round_robin_timeslices():
    # 3 threads of 3000 ns on 2 cores, 1000 ns slices: at each tick the longest-running thread
    # yields to the one waiting; the total work (9000 ns) ends at 5000 ns on 2 cores
    wl = {"name": "t", "threads": [{"start": True, "ops": [["compute", 3000]]} for _ in range(3)]}
    r = simulate(wl, cores=2, freq_ghz=1.0, timeslice_ns=1000)
    r.trace.validate()
    s = r.trace.states
    # t=1000: 1000 yields to 1002; t=2000: 1001 (longest on its core) yields to 1000; t=3000: 1002
    # yields to 1001; 1000 and 1001 finish at 4000 and 1002 runs its last 1000 ns
    assert rows(r) == [(1000, 0, 1000, 0, -1), (1000, 1000, 2000, 1, -1), (1000, 2000, 4000, 0, -1),
                       (1001, 0, 2000, 0, -1), (1001, 2000, 3000, 1, -1), (1001, 3000, 4000, 0, -1),
                       (1002, 0, 1000, 1, -1), (1002, 1000, 3000, 0, -1), (1002, 3000, 4000, 1, -1),
                       (1002, 4000, 5000, 0, -1)]
    assert r.runtime_ns == 5000 and r.truth["compute_ns"] == [3000, 3000, 3000]
    assert int((s.duration_ns[s.state == State.RUNNING]).sum()) == 9000


def test_policy_changes_frequency_mid_segment():
    from scalestack.sim.engine import Policy

    class Boost(Policy):
        period_ns = 1000

        def decide(self, now_ns, criticality_ns, freq_ghz):
            assert criticality_ns[0] == now_ns  # alone: all time is its critical time
            return {0: 3.0} if now_ns == 1000 else None

    wl = {"name": "t", "threads": [{"start": True, "ops": [["compute", 4000, 10]]}]}
    r = simulate(wl, cores=1, freq_ghz=1.0, policy=Boost())
    # 1000 cycles in the first 1000 ns at 1 GHz, then 3000 cycles at 3 GHz, then 10 ns memory
    assert r.runtime_ns == 2010 and r.truth["compute_ns"] == [2000]


def test_spin_then_block():
    def wl(spin):
        return {"name": "t", "threads": [
            {"start": True, "ops": [["lock", 0], ["compute", 1000], ["unlock", 0]]},
            {"start": True, "ops": [["compute", 100], ["lock", 0, spin], ["compute", 100], ["unlock", 0]]},
        ]}

    # spins 100..1000 and gets the lock while spinning: RUNNING throughout, "spinning" in the truth
    r = simulate(wl(2000), cores=2, freq_ghz=1.0)
    assert rows(r) == [(1000, 0, 1000, State.RUNNING, -1), (1001, 0, 1100, State.RUNNING, -1)]
    assert (1001, 100, 1000, "spinning", 1000) in r.truth["waits"]
    # spins 100..400, then blocks until the release at 1000
    r = simulate(wl(300), cores=2, freq_ghz=1.0)
    assert rows(r) == [(1000, 0, 1000, State.RUNNING, -1), (1001, 0, 400, State.RUNNING, -1),
                       (1001, 400, 1000, State.SYNC_WAIT, 1000), (1001, 1000, 1100, State.RUNNING, -1)]
    assert (1001, 100, 400, "spinning", -1) in r.truth["waits"]
