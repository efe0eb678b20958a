"""Advice from a trace: the thesis's example, invariants, the BFS-like workload, real programs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.advice import advise, alone_time, runnable_beside_free_cores
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import bfs, fig32, streamcluster
from scalestack.trace import State, make_trace

from ..analysis.fig32 import fig32_trace
from ..conftest import requires_recording


def test_fig32_names_thread_0_and_its_lone_stretch():
    res = advise(fig32_trace())
    crit = [f for f in res.findings if f.kind == "critical-thread"]
    assert crit and crit[0].tid == 10  # thesis: accelerating thread 0 helps most
    assert {t: v for t, v in res.alone_ns.items() if v} == {10: 5_000_000}  # interval t7: thread 0 alone
    assert "critical for 30%" in crit[0].detail
    # the simulated program (with who-woke-whom) also gets a prediction: thread 0 2x faster
    sim = advise(simulate(fig32(), cores=4).trace)
    first = next(f for f in sim.findings if f.kind == "critical-thread")
    assert first.tid == 1000 and first.predicted_speedup > 1.05


def _rows_of(spans):
    """(tid, start, end, state) rows of threads 1..n from per-thread (gap, length, runnable?) runs."""
    rows = []
    for k, thread in enumerate(spans):
        t = 0
        for gap, length, queued in thread:
            a = t + gap
            rows.append((k + 1, a, a + length, State.RUNNABLE if queued else State.RUNNING))
            t = a + length
    return rows


def _tiled(rows, end, tids=None):
    """A trace of threads `tids` (default: those of the rows) whose (tid, start, end, state) rows
    are filled out with SYNC_WAIT to `end`."""
    states = {"tid": [], "start_ns": [], "end_ns": [], "state": []}
    tids = sorted({r[0] for r in rows}) if tids is None else list(tids)
    for tid in tids:
        t = 0
        for _, a, b, state in sorted(r for r in rows if r[0] == tid):
            for s0, s1, s in ((t, a, State.SYNC_WAIT), (a, b, state)):
                if s1 > s0:
                    states["tid"].append(tid), states["start_ns"].append(s0), states["end_ns"].append(s1)
                    states["state"].append(int(s))
            t = b
        states["tid"].append(tid), states["start_ns"].append(t), states["end_ns"].append(end)
        states["state"].append(int(State.SYNC_WAIT))
    return make_trace({"tid": tids, "name": [f"t{i}" for i in tids], "start_ns": [0] * len(tids),
                       "end_ns": [end] * len(tids)}, states)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 10), st.booleans()), max_size=5), min_size=1,
                max_size=4))
def test_alone_time_is_the_time_exactly_one_thread_runs(spans):
    """Brute force on a unit grid: each unit with exactly one runner and no thread waiting for a CPU
    belongs to that runner (a RUNNABLE thread wants to work: another process keeps it off a core)."""
    rows = _rows_of(spans)
    if not rows:
        return
    end = max(r[2] for r in rows) + 1
    n = len(spans)
    trace = _tiled(rows, end, range(1, n + 1))  # every thread, those without runs waiting throughout
    runs = np.zeros((n, end), bool)
    active = np.zeros((n, end), bool)
    for tid, a, b, state in rows:
        active[tid - 1, a:b] = True
        runs[tid - 1, a:b] = state == State.RUNNING
    lone = active.sum(axis=0) == 1
    want = {tid: int((runs[tid - 1] & lone).sum()) for tid in range(1, n + 1)}
    got = alone_time(trace)
    assert {t: got.get(t, 0) for t in want} == want
    from scalestack.analysis.advice import _alone_by_sweep
    assert {t: _alone_by_sweep(trace).get(t, 0) for t in want} == want


def test_runnable_beside_free_cores_worked_example():
    """2 cores. [0, 10): threads 1 and 2 run, 3 waits for a CPU: the program fills both cores (its
    own oversubscription). [10, 20): thread 1 runs alone, 2 waits for a CPU: a core held by another
    process. [20, 30): nobody runs, 3 waits: both cores elsewhere. Free-core wait 10 + 10 = 20 of 30."""
    trace = _tiled([(1, 0, 20, State.RUNNING), (2, 0, 10, State.RUNNING), (2, 10, 20, State.RUNNABLE),
                    (3, 0, 10, State.RUNNABLE), (3, 20, 30, State.RUNNABLE)], 40)
    assert runnable_beside_free_cores(trace, 2) == 20
    assert runnable_beside_free_cores(trace, 3) == 30  # a third core: every wait had a free one
    assert runnable_beside_free_cores(trace, 1) == 10  # one core: only [20, 30) had it free
    assert runnable_beside_free_cores(trace, 2, 5, 15) == 5 and runnable_beside_free_cores(trace, 2, 15, 40) == 15


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10), st.booleans()), max_size=5), min_size=1,
                max_size=4), st.integers(1, 4))
def test_runnable_beside_free_cores_is_the_runnable_time_with_fewer_runners_than_cores(spans, cores):
    """Brute force on a unit grid: each unit a thread is RUNNABLE counts where fewer than `cores`
    threads run in it; never more than the RUNNABLE time."""
    rows = _rows_of(spans)
    if not rows:
        return
    end = max(r[2] for r in rows) + 1
    trace = _tiled(rows, end)
    runs = np.zeros(end, np.int64)
    waits = np.zeros(end, np.int64)
    for _, a, b, state in rows:
        (runs if state == State.RUNNING else waits)[a:b] += 1
    want = int(waits[runs < cores].sum())
    assert runnable_beside_free_cores(trace, cores) == want <= int(waits.sum())


def test_cpu_wait_advice_says_whose_the_cores_were():
    """Fewer threads are the advice only where the program's own threads filled the cores."""
    own = _tiled([(1, 0, 100, State.RUNNING), (2, 0, 100, State.RUNNING), (3, 0, 100, State.RUNNABLE)], 100)
    other = _tiled([(1, 0, 50, State.RUNNING), (1, 50, 100, State.RUNNABLE), (2, 0, 50, State.RUNNABLE),
                    (2, 50, 100, State.RUNNING)], 100)
    for trace, title, says in ((own, "threads wait 100 ns for a CPU", "use no more runnable threads than cores"),
                               (other, "for a CPU that other processes hold", "Fewer threads would not cut it")):
        trace = trace.with_meta(cores=2)
        f = next(f for f in advise(trace).findings if f.kind == "cpu-contention")
        assert title in f.title and says in f.detail, f
    # a trace that does not say how many cores: the wait alone, as before
    f = next(f for f in advise(other.with_meta(cores=None)).findings if f.kind == "cpu-contention")
    assert f.title == "threads wait 100 ns for a CPU" and "use no more runnable threads" in f.detail
    # taking turns on the one core their affinity allowed: their own doing
    f = next(f for f in advise(other.with_meta(cores=2, cpus_allowed=1)).findings if f.kind == "cpu-contention")
    assert f.title == "threads wait 100 ns for a CPU" and "(its affinity allowed 1 of them)" in f.detail, f


def test_bfs_advice_names_the_serial_step_and_fixing_it_beats_boosting():
    wl = bfs(4)
    base = simulate(wl, cores=4)
    res = advise(base.trace)
    crit = next(f for f in res.findings if f.kind == "critical-thread")
    assert crit.tid == 1001 and "runs alone" in crit.detail  # worker-1 merges the frontier alone
    assert any(f.kind == "serial" and f.tid == 1001 for f in res.findings)
    # act on it in the simulator: spread the merge step over the three workers ...
    fixed = bfs(4)
    for th in fixed["threads"][1:]:
        ops = []
        for op in th["ops"]:
            if op == ["compute", 300_000]:
                continue
            ops.append(op)
            if op[0] == "barrier" and op[1] % 2 == 0:
                ops.append(["compute", 100_000])
        th["ops"] = ops
    parallel = base.runtime_ns / simulate(fixed, cores=4).runtime_ns
    # ... versus boosting that thread from 2 to 2.5 GHz for the whole run (thesis Ch. 7)
    boosted = base.runtime_ns / simulate(wl, cores=4, freq_ghz={1: 2.5, 0: 2.0, 2: 2.0, 3: 2.0}).runtime_ns
    assert parallel > boosted > 1.0, (parallel, boosted)
    # ... and versus the thesis's dynamic criticality boosting
    from scalestack.sim.policies import run_policy

    dynamic = run_policy(wl, "boost-critical", cores=4, reference=base, slice_ns=base.runtime_ns // 50).speedup
    assert parallel > dynamic > 1.0, (parallel, dynamic)


@requires_recording
def test_real_programs_wait_for_a_cpu_their_own_threads_or_another_process_hold(c_programs):
    """Two busy threads on two cores beside a busy shell loop outside the recorded process: their
    wait for a CPU is the loop's doing, and fewer threads would not help. Four busy threads alone
    on two cores, or two on the one core their affinity allows: their own, and fewer threads
    would. (Skipped on a machine of another size.)"""
    if os.cpu_count() != 2 or len(os.sched_getaffinity(0)) != 2:
        pytest.skip("the scene needs exactly 2 CPUs")
    exe = str(c_programs["balanced"])
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.2)
        beside = advise(scalestack.record([exe, "2", "10", "60000000"], None))
    finally:
        hog.kill()
        hog.wait()
    alone = advise(scalestack.record([exe, "4", "10", "30000000"], None))
    # two threads that `taskset -c 0` around the recorder gave one core: their own doing too
    path = os.path.join(os.path.dirname(exe), "pinned.trace")
    subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "scalestack.cli", "record", "-o", path, "--", exe, "2",
                    "10", "30000000"], check=True, capture_output=True)
    pinned = advise(scalestack.load(path))
    f = next((f for f in pinned.findings if f.kind == "cpu-contention"), None)
    assert f is not None and "other processes" not in f.title and "affinity allowed 1" in f.detail, pinned.text()
    f = next((f for f in beside.findings if f.kind == "cpu-contention"), None)
    assert f is not None and "other processes hold" in f.title and "Fewer threads would not" in f.detail, beside.text()
    f = next((f for f in alone.findings if f.kind == "cpu-contention"), None)
    assert f is not None and "other processes" not in f.title, alone.text()
    assert "use no more runnable threads than cores" in f.detail, alone.text()


@requires_recording
def test_real_barrier_program_names_the_slow_thread_and_its_barrier(c_programs):
    trace = scalestack.record([str(c_programs["barrier_imbalance"]), "10", "3000000", "3"], None)
    res = advise(trace)
    crit = [f for f in res.findings if f.kind == "critical-thread"]
    st_ = trace.states
    workers = [int(t) for t in trace.threads.tid if int(t) != trace.threads.tid[0]]
    run = {t: int(st_.duration_ns[(st_.tid == t) & (st_.state == State.RUNNING)].sum()) for t in workers}
    slow, fast = max(run, key=run.get), min(run, key=run.get)
    assert crit and crit[0].tid == slow, res.text()
    barrier = st_.addr[(st_.tid == fast) & (st_.state == State.SYNC_WAIT)]
    assert crit[0].addr is not None and crit[0].addr in set(barrier.tolist()), res.text()
    assert f"{crit[0].addr:#x}" in crit[0].detail


@requires_recording
def test_real_program_whose_slow_thread_takes_turns_gets_the_phase_finding(c_programs):
    """barrier_imbalance with SHIFT=1: the slow thread alternates round by round, so each worker is
    the critical one in its own rounds while whole-run criticality sees two even threads."""
    trace = scalestack.record([str(c_programs["barrier_imbalance"]), "12", "8000000", "3", "2", "1"], None)
    st_ = trace.states
    waiting_for_cpu = int(st_.duration_ns[st_.state == State.RUNNABLE].sum())
    if waiting_for_cpu > 0.1 * (trace.end_ns - trace.start_ns):  # advise then leaves phases out, by design
        pytest.skip(f"other processes kept a CPU busy: the threads waited {waiting_for_cpu / 1e6:.0f} ms for one")
    res = advise(trace)
    workers = {int(t) for t in trace.threads.tid if int(t) != int(trace.threads.tid[0])}
    f = next((f for f in res.findings if f.kind == "phase-critical"), None)
    assert f is not None and f.tid in workers, res.text()
    assert "threads take turns" in f.title and f.predicted_speedup > 1.05, res.text()
    assert not any(x.kind == "balanced" for x in res.findings), res.text()


@requires_recording
def test_real_balanced_program_has_no_single_critical_thread(c_programs, tmp_path):
    out = tmp_path / "b.trace"
    for _ in range(3):
        trace = scalestack.record([str(c_programs["balanced"]), "2", "10", "20000000"], str(out))
        st_ = trace.states
        waiting_for_cpu = int(st_.duration_ns[st_.state == State.RUNNABLE].sum())
        run = sorted(int(st_.duration_ns[(st_.tid == t) & (st_.state == State.RUNNING)].sum()) for t in trace.threads.tid)
        # the premise: equal work takes equal time. Another process holding a CPU makes one thread wait for it
        # (beside a CPU-bound process: "critical for 53%, replay 1.16x"); a vCPU the host slows (its core's other
        # hyperthread busy) makes one take longer (4 runs in 12 on a 2-vCPU VM: 10-16% more running time, replay
        # 1.13x; the other 8 differed by 0.2-7.3%). Either way that thread is critical, rightly
        if waiting_for_cpu <= 0.1 * trace.wall_ns and run[-1] - run[-2] <= 0.08 * run[-1]:
            break
    else:
        pytest.skip(f"the two threads did not run alike in three runs (last: {waiting_for_cpu / 1e6:.0f} ms waited for a "
                    f"CPU, running {run[-2] / 1e6:.0f} and {run[-1] / 1e6:.0f} ms)")
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "advise", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("1. no single critical thread"), proc.stdout
    js = subprocess.run([sys.executable, "-m", "scalestack.cli", "advise", str(out), "--json"], capture_output=True,
                        text=True)
    assert '"kind": "balanced"' in js.stdout
    bad = subprocess.run([sys.executable, "-m", "scalestack.cli", "advise", str(out), "--factor", "0.5"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--factor" in bad.stderr


@requires_recording
def test_idle_threads_parked_on_a_condition_variable_are_not_the_lock(c_programs):
    """Four threads parked on a condition variable for the whole run wait far longer in all than the
    two workers do on their mutex (1.35 s against 0.19 s); the mutex is the finding."""
    for _ in range(3):
        trace = scalestack.record([str(c_programs["idle_pool"]), "2", "200", "4"], None)
        st_ = trace.states
        waiting_for_cpu = int(st_.duration_ns[st_.state == State.RUNNABLE].sum())
        # the premise: the two workers take turns on the mutex. Another process holding a CPU makes them
        # take turns on the core instead (284 ms waited for a CPU once: the finding was that wait)
        if waiting_for_cpu <= 0.1 * trace.wall_ns:
            break
    else:
        pytest.skip(f"other processes kept a CPU busy in three runs: {waiting_for_cpu / 1e6:.0f} ms waited for one")
    run = {int(t): int(st_.duration_ns[(st_.tid == t) & (st_.state == State.RUNNING)].sum()) for t in trace.threads.tid}
    busiest = max(run.values())
    workers = [t for t, r in run.items() if r > 0.2 * busiest]
    parked = [t for t, r in run.items() if r < 0.02 * busiest and t != int(trace.threads.tid[0])]
    assert len(workers) == 2 and len(parked) == 4, run
    sync = st_.state == State.SYNC_WAIT
    condvar = set(st_.addr[sync & np.isin(st_.tid, parked)].tolist())
    mutex = set(st_.addr[sync & np.isin(st_.tid, workers)].tolist())
    res = advise(trace)
    assert not any(f.addr in condvar for f in res.findings if f.addr is not None), res.text()
    assert any(f.addr in mutex for f in res.findings if f.addr is not None), res.text()


def test_critical_thread_finding_names_the_barrier_not_the_join():
    # BFS-like: worker-1 ends every level's barrier and the main thread's join; the join is one long
    # wait, the barriers are what the workers wait on again and again
    from scalestack.sim.engine import ADDR_BASE

    res = advise(simulate(bfs(4), cores=4).trace)
    crit = next(f for f in res.findings if f.kind == "critical-thread")
    assert ADDR_BASE["barrier"] <= crit.addr < ADDR_BASE["join"], crit.detail
    assert "main" not in crit.detail.split("waiting:")[1].split(")")[0]


def test_pool_serialised_on_one_lock_is_named_with_the_lock():
    # streamcluster-like: 8 identical workers serialised on lock 0 -> the pool, not one thread
    trace = simulate(streamcluster(9), cores=8).trace
    res = advise(trace)
    assert [f.kind for f in res.findings][:2] == ["pool", "balanced"], res.text()  # the pool's bound first
    pool = res.findings[0]
    box = next(b for b in scalestack.bottle(trace, group_by=[(r"^worker-\d+$", "w")]).boxes if b.label == "w")
    assert f"parallelism {box.width:.1f} of 8" in pool.title and box.width < 0.6 * 8
    assert pool.addr == 0x1000 and "0x1000" in pool.detail and "released by 8 threads" in pool.detail
    assert pool.predicted_speedup == pytest.approx(box.height_ns / (box.height_ns * box.width / 8), rel=0.02)
    assert not any(f.kind == "lock" and f.addr == 0x1000 for f in res.findings)  # said once, in the pool finding


def test_threads_without_numbered_names_form_no_pool():
    wl = streamcluster(5)
    for k, th in enumerate(wl["threads"]):
        th["name"] = ["main", "alpha", "beta", "gamma", "delta"][k]
    trace = simulate(wl, cores=4).trace
    res = advise(trace)
    assert not any(f.kind == "pool" for f in res.findings)
    # the lock is then its own finding, with the replay of its main releaser made 2x faster
    from scalestack.analysis.whatif import whatif

    lock = next(f for f in res.findings if f.kind == "lock")
    st_ = trace.states
    sel = (st_.state == State.SYNC_WAIT) & (st_.addr == lock.addr) & (st_.waker >= 0)
    w, c = np.unique(st_.waker[sel], return_counts=True)
    assert lock.predicted_speedup == pytest.approx(whatif(trace, int(w[np.argmax(c)]), 2.0).replay_speedup)


def test_threads_that_all_carry_the_programs_name_form_no_pool():
    """`python3 prog.py`: every thread is named python3; its digit numbers no pool member."""
    wl = streamcluster(9)  # 8 workers serialised on one lock: as `worker-N`, a pool finding
    for th in wl["threads"]:
        th["name"] = "python3"
    res = advise(simulate(wl, cores=8).trace)
    assert not any(f.kind == "pool" for f in res.findings), res.text()
    assert any(f.kind == "lock" and f.addr == 0x1000 for f in res.findings), res.text()


def _serial_start(n):  # a serial start-up, then 8 M cycles split over n workers (strong scaling)
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": [["compute", 2_000_000]] + [["spawn", i] for i in range(1, n + 1)]
            + [["join", i] for i in range(1, n + 1)]}]
    ths += [{"name": f"w{i}", "role": "app", "start": False, "ops": [["compute", 8_000_000 // n]]} for i in range(n)]
    return {"threads": ths}


def test_sweep_finding_names_the_largest_speedup_loss(tmp_path):
    from scalestack.analysis.advice import sweep_findings
    from scalestack.analysis.speedup import speedup_stack

    traces = {n: simulate(_serial_start(n), cores=4).trace for n in (1, 4)}
    (f,) = sweep_findings(traces)
    s = speedup_stack(traces[1], traces[4], 4)
    assert f.kind == "scaling" and "sequential part" in f.title and s.seq > 0.5
    assert f.predicted_speedup == pytest.approx((s.speedup + s.seq) / s.speedup)
    # the CLI reads a sweep directory as 'scalestack scale' writes it
    runs = []
    for n, tr in traces.items():
        scalestack.save(tr, str(tmp_path / f"t{n}.trace"))
        runs.append({"threads": n, "wall_ns": int(tr.wall_ns), "path": f"t{n}.trace"})
    (tmp_path / "sweep.json").write_text(json.dumps({"threads": [1, 4], "runs": runs}))
    out = subprocess.run([sys.executable, "-m", "scalestack.cli", "advise", str(tmp_path / "t4.trace"), "--sweep",
                          str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "at 4 threads the speedup is" in out.stdout and "sequential part" in out.stdout
    assert sweep_findings({4: traces[4]}) == []


def test_wakers_outside_the_trace_are_not_named():
    """A wait ended by the idle task or an interrupt (waker 0, not a traced thread) is not
    attributed to a thread, and the replay is not asked about it."""
    R, S = int(State.RUNNING), int(State.SYNC_WAIT)
    states = {"tid": [], "start_ns": [], "end_ns": [], "state": [], "addr": [], "waker": []}
    for k in range(6):  # thread 2 waits on futex 0x10 six times, woken by "thread 0" (the idle task), and works
        for tid, st_, w, a, b in ((1, R, -1, 0, 10), (2, S, 0, 0, 8), (2, R, -1, 8, 10)):
            states["tid"].append(tid), states["start_ns"].append(k * 10 + a), states["end_ns"].append(k * 10 + b)
            states["state"].append(st_), states["addr"].append(0x10 if st_ == S else 0), states["waker"].append(w)
    order = np.lexsort((states["start_ns"], states["tid"]))
    states = {k: np.asarray(v)[order] for k, v in states.items()}
    tr = make_trace({"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [60, 60]}, states)
    res = advise(tr)  # must not ask the replay about thread 0
    assert all(f.tid != 0 for f in res.findings) and 0 not in res.caused_wait_ns
    # thread 1 was the one traced thread running each time a wait ended: it is taken as the waker
    assert res.caused_wait_ns == {1: 48}
    from scalestack.analysis.advice import with_inferred_wakers

    two = make_trace({"tid": [1, 2, 3], "name": ["a", "b", "c"], "start_ns": [0] * 3, "end_ns": [60] * 3},
                     {"tid": [1, 2, 3], "start_ns": [0, 0, 0], "end_ns": [60, 60, 60],
                      "state": [R, S, R], "waker": [-1, 0, -1]})
    assert with_inferred_wakers(two).states.waker.tolist() == [-1, 0, -1]  # two candidates: left unknown


def test_critical_thread_that_changes_between_phases_is_a_finding():
    """Thesis §4.4 (Lu non-cont.): each worker is critical in its own phases, so whole-run
    criticality shows no critical thread, yet making any one of them 2x faster gains (1.19x, true)."""
    from scalestack.sim.workloads import barrier_imbalance, shifting_critical

    wl = shifting_critical(4)
    res = advise(simulate(wl, cores=4).trace)
    kinds = [f.kind for f in res.findings]
    assert "phase-critical" in kinds and "balanced" not in kinds  # "one thread would not help" would be wrong
    f = next(f for f in res.findings if f.kind == "phase-critical")
    assert "3 threads take turns" in f.title and "in 2 phases (33% of the run)" in f.detail
    base = simulate(wl, cores=4).truth["runtime_ns"]
    i = f.tid - 1000  # the simulator's tids are 1000 + thread index
    true = base / simulate(wl, cores=4, freq_ghz={j: 4.0 if j == i else 2.0 for j in range(4)}).truth["runtime_ns"]
    assert true > 1.1 and f.predicted_speedup == pytest.approx(true, rel=0.1)
    # one thread critical in every phase: the ordinary critical-thread finding, not this one
    assert "phase-critical" not in [f.kind for f in advise(simulate(barrier_imbalance(4), cores=4).trace).findings]


def test_threads_taking_turns_by_a_little_are_balanced():
    """Each worker has 10% more work in its own phases (as equal work does on a busy machine, where
    now one thread and now another is slowed): it leads them, yet making it 2x faster gains ~1.03x
    (true), under `GAIN_FLOOR`. The balanced finding, not a phase one, says so."""
    from scalestack.analysis.advice import GAIN_FLOOR
    from scalestack.analysis.phase_criticality import phase_criticality
    from scalestack.sim.workloads import shifting_critical

    wl = shifting_critical(4, ratio=1.1)
    res = advise(simulate(wl, cores=4).trace)
    assert [f.kind for f in res.findings][:1] == ["balanced"], res.text()
    pc = phase_criticality(simulate(wl, cores=4).trace, factor=2.0, active="running+runnable")
    assert int(np.count_nonzero(pc.lead_phases)) >= 2 and 1.0 < float(pc.predicted_speedup.max()) < GAIN_FLOOR
    base = simulate(wl, cores=4).truth["runtime_ns"]
    true = base / simulate(wl, cores=4, freq_ghz={0: 2.0, 1: 4.0, 2: 2.0, 3: 2.0}).truth["runtime_ns"]
    assert true < GAIN_FLOOR


def _handoff(consumer_work: int, items: int = 200) -> dict:
    """A producer hands items to a consumer through a bounded queue; the consumer's work per item is
    `consumer_work` cycles against the producer's 100 000, so it waits for the producer a little."""
    return {"name": "handoff", "threads": [
        {"name": "main", "role": "main", "start": True, "ops": [["spawn", 1], ["spawn", 2], ["join", 1], ["join", 2]]},
        {"name": "producer", "start": False, "ops": [op for _ in range(items) for op in (["compute", 100_000],
                                                                                            ["put", 0, 4])]},
        {"name": "consumer", "start": False, "ops": [op for _ in range(items) for op in (["get", 0],
                                                                                            ["compute", consumer_work])]}]}


def test_a_thread_the_others_wait_for_is_critical_though_shares_look_even():
    """A producer 12% slower than its consumer: its share (56%) is near an even one (50%), which
    alone read as "no single critical thread", yet the consumer waits for it and making it 2x faster
    gains ~1.14x (true, as the replay says). Found on 7-Zip (`7z a -mmt=2`: 52% against 50%, 1.20x)."""
    from scalestack.analysis.advice import GAIN_FLOOR

    wl = _handoff(88_000)
    sim = simulate(wl, cores=4)
    res = advise(sim.trace)
    first = res.findings[0]
    assert first.kind == "critical-thread" and first.tid == 1001, res.text()
    assert "56% of the run time (an even share is 50%)" in first.detail, first.detail
    true = sim.truth["runtime_ns"] / simulate(wl, cores=4, freq_ghz={1: 4.0}).truth["runtime_ns"]
    assert first.predicted_speedup == pytest.approx(true, rel=0.02) and true >= GAIN_FLOOR
    assert not any(f.kind == "balanced" for f in res.findings)
    # equal work: the consumer keeps up, neither gains and the balanced finding is the true one
    even = advise(simulate(_handoff(100_000), cores=4).trace)
    assert [f.kind for f in even.findings][:1] == ["balanced"], even.text()


def test_a_run_with_one_working_thread_says_so_first():
    """One thread does the work (a helper runs 2.5% as long): the first finding says the run was
    serial, with Amdahl's bound of its time alone over the cores; "no single critical thread ...
    speeding up one thread would not help much" (what advise said) is the opposite of the truth."""
    wl = {"name": "solo", "threads": [
        {"name": "main", "role": "main", "start": True,
         "ops": [["compute", 2_000_000], ["spawn", 1], ["compute", 6_000_000], ["join", 1]]},
        {"name": "helper", "start": False, "ops": [["compute", 200_000]]}]}
    trace = simulate(wl, cores=4).trace
    res = advise(trace)
    first = res.findings[0]
    assert first.kind == "one-thread" and first.tid == 1000, res.text()
    assert not any(f.kind in ("balanced", "serial") for f in res.findings), res.text()
    st_ = trace.states
    run = st_.state == State.RUNNING
    span = trace.end_ns - trace.start_ns
    helper = int(st_.duration_ns[run & (st_.tid == 1001)].sum())
    solo = (int(st_.duration_ns[run & (st_.tid == 1000)].sum()) - helper) / span  # main runs throughout
    assert first.predicted_speedup == pytest.approx(1 / (1 - solo + solo / 4), rel=1e-6)
    assert "the 1 other thread ran 100 µs in all" in first.detail and "4 cores" in first.detail


@requires_recording
def test_real_program_with_one_worker_is_one_thread(c_programs):
    trace = scalestack.record([str(c_programs["balanced"]), "1", "4", "20000000"], None)
    res = advise(trace)
    worker = int(trace.threads.tid[1])
    assert res.findings[0].kind == "one-thread" and res.findings[0].tid == worker, res.text()


def test_two_equal_threads_above_an_even_share_are_close_not_even():
    """main runs alone for a sixth of the run, then two equal workers: 17%, 42% and 42% of three
    working threads. No one stands out, but "share the run time evenly" (an even share is 33%) would
    misread it (node's crypto pool: 42%, 41%, 17%)."""
    wl = {"name": "two", "threads": [
        {"name": "main", "role": "main", "start": True,
         "ops": [["compute", 2_000_000], ["spawn", 1], ["spawn", 2], ["join", 1], ["join", 2]]},
        {"name": "a", "start": False, "ops": [["compute", 10_000_000]]},
        {"name": "b", "start": False, "ops": [["compute", 10_000_000]]}]}
    res = advise(simulate(wl, cores=4).trace)
    # (after the serial finding: main's sixth alone promises 1.12x, more than "no single critical thread")
    assert [f.kind for f in res.findings] == ["serial", "balanced"], res.text()
    balanced = res.findings[1]
    assert "none stands out: the largest shares are close (42% and 42%; an even share is 33%)" in balanced.detail
    assert "evenly" not in balanced.detail
