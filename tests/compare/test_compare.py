"""`compare`: matched threads and wait objects, ranked by their share of the wall-time change."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.compare import compare, compare_sweep, name_pattern
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import barrier_imbalance, random_workload

from ..conftest import requires_recording


def flusher_workload(flush_cycles: int, workers: int = 2, rounds: int = 20) -> dict:
    """A flusher holds lock 0 for `flush_cycles` each round; workers take it briefly."""
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": [["spawn", i] for i in range(1, workers + 2)] + [["join", i] for i in range(1, workers + 2)]},
           {"name": "flusher", "start": False,
            "ops": [op for _ in range(rounds) for op in (["lock", 0], ["compute", flush_cycles], ["unlock", 0],
                                                          ["compute", 20_000])]}]
    for w in range(workers):
        ths.append({"name": f"worker-{w}", "start": False,
                    "ops": [op for _ in range(rounds) for op in (["compute", 150_000], ["lock", 0],
                                                                  ["compute", 5_000], ["unlock", 0])]})
    return {"name": "flusher", "threads": ths}


def test_name_pattern_strips_digits():
    assert name_pattern("worker-12") == "worker-*"
    assert name_pattern("GC Thread#3") == "GC Thread#*"
    assert name_pattern("flusher") == "flusher"


def test_simulated_fix_names_the_lock_and_the_critical_thread_first():
    before = simulate(flusher_workload(400_000), cores=4).trace
    after = simulate(flusher_workload(100_000), cores=4).trace
    res = compare(before, after)
    assert res.speedup > 1.5
    first_two = {c.kind for c in res.changes[:2]}
    assert first_two == {"thread", "wait"}, res.to_frame()
    crit = next(c for c in res.changes if c.kind == "thread")
    assert crit.label == "flusher" and crit.delta("criticality_ns") < 0
    lock = next(c for c in res.changes if c.kind == "wait")
    assert lock.detail["object"] == "lock or barrier" and lock.delta("wait_ns") < 0
    assert "worker-*" in lock.detail["waiters"]
    s = res.summary()
    assert "faster" in s and "flusher" in s and "futex" in s, s
    # thread and pool rows plus the idle row add up to the wall-time change exactly
    crit_rows = sum(c.contribution_ns for c in res.changes if c.kind in ("thread", "pool", "idle"))
    assert crit_rows == pytest.approx(res.wall_change_ns, abs=1.0)
    # a worker pool matched thread by thread
    pool = next(c for c in res.changes if c.kind == "pool")
    assert pool.label == "worker-*" and pool.detail["threads_a"] == pool.detail["threads_b"] == 2
    json.loads(res.to_json())
    assert len(res.to_frame()) == len(res.changes)


def test_a_run_against_itself_changes_nothing():
    t = simulate(flusher_workload(200_000), cores=2).trace
    res = compare(t, t)
    assert res.speedup == 1.0 and res.wall_change_ns == 0
    assert all(c.contribution_ns == 0 for c in res.changes)
    assert "as long" in res.summary()


def test_sweep_matches_a_pool_of_one_to_a_pool_of_many():
    traces = {n: simulate(barrier_imbalance(n), cores=4).trace for n in (2, 3, 5)}
    results = compare_sweep(traces)
    assert [r.labels for r in results] == [("2 threads", "3 threads"), ("2 threads", "5 threads")]
    pool = next(c for c in results[-1].changes if c.label == "worker-*")
    assert (pool.detail["threads_a"], pool.detail["threads_b"]) == (1, 4)
    assert np.isfinite(results[-1].parallelism_b) and results[-1].parallelism_b > results[-1].parallelism_a


def test_compare_command_prints_the_summary_and_json(tmp_path):
    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    scalestack.save(simulate(flusher_workload(400_000), cores=4).trace, str(a))
    scalestack.save(simulate(flusher_workload(100_000), cores=4).trace, str(b))
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "compare", str(a), str(b)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("the run got") and "flusher" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "compare", str(a), str(b), "--json"],
                          capture_output=True, text=True)
    data = json.loads(proc.stdout)
    assert data["kind"] == "compare" and data["changes"][0]["contribution_ns"] < 0
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "compare", str(a)], capture_output=True, text=True)
    assert proc.returncode != 0 and "two traces" in proc.stderr


LOCKFIX_C = r"""
/* A flusher thread holds one lock for a long critical section each round; two workers take the
 * same lock briefly between short sleeps (so three threads do not fight for two cores).
 * FLUSH_UNITS (compile time) is the flusher's critical section. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile double sink;
static volatile int done;
static void spin(long n) { double x = 0; for (long i = 0; i < n; i++) x += i * 0.5; sink = x; }
static void *flusher(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "flusher");
    for (long r = 0; r < 40; r++) {
        pthread_mutex_lock(&lock);
        spin(FLUSH_UNITS);
        pthread_mutex_unlock(&lock);
        spin(20000);
    }
    done = 1;
    return NULL;
}
static void *worker(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "worker-%ld", (long)arg);
    pthread_setname_np(pthread_self(), name);
    struct timespec nap = {0, 200000};
    while (!done) {
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&lock);
        spin(500);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}
int main(void) {
    pthread_t f, w[2];
    pthread_create(&f, NULL, flusher, NULL);
    for (long i = 0; i < 2; i++) pthread_create(&w[i], NULL, worker, (void *)i);
    pthread_join(f, NULL);
    for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
    return 0;
}
"""


@requires_recording
def test_real_lock_fix_names_the_lock_wait_drop_and_the_critical_thread_first(tmp_path):
    """One C program recorded before and after its flusher's critical section is shortened
    (a compile-time flag): the lock's wait drop and the flusher's criticality lead the ranking."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "lockfix.c"
    src.write_text(LOCKFIX_C)
    traces = {}
    for which, units in (("before", 6_000_000), ("after", 1_500_000)):
        (tmp_path / which).mkdir()
        exe = tmp_path / which / "lockfix"  # one binary name: the main threads' names match
        subprocess.run(["gcc", "-O1", "-pthread", f"-DFLUSH_UNITS={units}", str(src), "-o", str(exe)], check=True)
        traces[which] = scalestack.record([str(exe)], str(tmp_path / f"{which}.trace"))
    res = compare(traces["before"], traces["after"])
    assert res.speedup > 1.5, res.summary()
    top = res.changes[:2]
    assert {c.kind for c in top} == {"thread", "wait"}, res.to_frame().to_string()
    crit = next(c for c in top if c.kind == "thread")
    lock = next(c for c in top if c.kind == "wait")
    assert crit.label == "flusher" and crit.delta("criticality_ns") < 0
    assert lock.detail["object"] == "lock or barrier" and "worker-*" in lock.detail["waiters"]
    assert lock.delta("wait_ns") < 0 and lock.contribution_ns < 0
    # the lock's address differs between the runs (ASLR) but its offset in the page does not
    assert lock.detail["addr_a"] & 0xFFF == lock.detail["addr_b"] & 0xFFF
    summary = res.summary()
    assert summary.startswith("the run got") and "flusher" in summary and "futex" in summary
    # the command says the same from the saved files
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "compare", str(tmp_path / "before.trace"),
                           str(tmp_path / "after.trace")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == summary, proc.stderr


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000), st.sampled_from([2, 4]))
def test_contributions_add_up_and_swap_sign(seed_a, seed_b, cores):
    """Invariants on random workloads: thread, pool and idle rows add up to the wall-time change;
    wait objects' shares lie within the wall time; B against A is A against B negated."""
    a = simulate(random_workload(5, seed=seed_a), cores=cores).trace
    b = simulate(random_workload(5, seed=seed_b), cores=cores).trace
    ab, ba = compare(a, b), compare(b, a)
    crit = sum(c.contribution_ns for c in ab.changes if c.kind in ("thread", "pool", "idle"))
    assert crit == pytest.approx(ab.wall_change_ns, abs=1e-6 * max(ab.wall_a_ns, ab.wall_b_ns) + 1)
    waits = [c for c in ab.changes if c.kind == "wait"]
    assert sum(c.a["share_ns"] for c in waits) <= ab.wall_a_ns * (1 + 1e-9)
    assert sum(c.b["share_ns"] for c in waits) <= ab.wall_b_ns * (1 + 1e-9)
    assert all(c.a["share_ns"] <= c.a["wait_ns"] + 1 for c in waits)  # a share of the waiting, never more
    assert sorted(c.contribution_ns for c in ab.changes) == pytest.approx(
        sorted(-c.contribution_ns for c in ba.changes), abs=1.0)


def test_wall_share_worked_example():
    """Two threads alive for 10 units; thread 2 waits on futex 0x1000 for 4 of them while both are
    alive: the wait's wall-time share is 4 / 2 = 2. A third thread alive only in [0, 4) makes three
    alive there: the share is then 4 / 3."""
    from scalestack.analysis.compare import run_facts
    from scalestack.trace import State, make_trace

    def trace(third: bool):
        th = {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [10, 10]}
        stt = {"tid": [1, 2, 2], "start_ns": [0, 0, 4], "end_ns": [10, 4, 10],
               "state": [State.RUNNING, State.SYNC_WAIT, State.RUNNING], "addr": [0, 0x1000, 0]}
        if third:
            th = {k: v + w for (k, v), w in zip(th.items(), ([3], ["c"], [0], [4]), strict=True)}
            stt = {k: v + w for (k, v), w in zip(stt.items(), ([3], [0], [4], [State.SLEEP], [0]), strict=True)}
        return make_trace(th, stt)

    obj = run_facts(trace(False)).objects[0]
    assert (obj["addr"], obj["wait_ns"], obj["share_ns"]) == (0x1000, 4.0, pytest.approx(2.0))
    assert run_facts(trace(True)).objects[0]["share_ns"] == pytest.approx(4 / 3)


@pytest.mark.parametrize("cores, runs_until, share", [(2, 10, 2.0), (1, 10, 0.0), (1, 2, 1.0), (None, 2, 2.0)])
def test_a_wait_while_the_other_threads_fill_the_cores_has_no_share(cores, runs_until, share):
    """Thread 2 waits on 0x1000 over [0, 4) while thread 1 runs over [0, runs_until), then sleeps.
    On 2 cores a core is free throughout: 4 / 2. On 1 core thread 1 fills it while it runs: the wait
    leaves no core idle then and costs no wall time (nothing, or only [2, 4) -> 1). A trace that does
    not say its cores keeps the plain share."""
    from scalestack.analysis.compare import run_facts
    from scalestack.trace import State, make_trace

    th = {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [10, 10]}
    stt = {"tid": [1, 1, 2, 2], "start_ns": [0, runs_until, 0, 4], "end_ns": [runs_until, 10, 4, 10],
           "state": [State.RUNNING, State.SLEEP, State.SYNC_WAIT, State.RUNNING], "addr": [0, 0, 0x1000, 0]}
    keep = [i for i in range(4) if stt["start_ns"][i] < stt["end_ns"][i]]
    stt = {k: [v[i] for i in keep] for k, v in stt.items()}
    tr = make_trace(th, stt, meta={"start_ns": 0, "end_ns": 10, **({"cores": cores} if cores else {})})
    assert run_facts(tr).objects[0]["share_ns"] == pytest.approx(share)


def test_idle_threads_waits_are_no_wait_object():
    """A thread parked on a condition variable for the whole run waits as long as the run lasts: in B,
    twice as long, it waits twice as long, and explains none of the change; nor does a JIT thread's
    wait on its queue, though that thread works a little."""
    from scalestack.analysis.compare import run_facts
    from scalestack.trace import State, make_trace

    def trace(n: int):  # thread 1 works n ns; 2 waits on 0x2000 all along; 3 (JIT) compiles a tenth of the run
        th = {"tid": [1, 2, 3], "name": ["a", "b", "C2 CompilerThre"], "start_ns": [0, 0, 0], "end_ns": [n, n, n]}
        stt = {"tid": [1, 2, 3, 3], "start_ns": [0, 0, 0, n // 10], "end_ns": [n, n, n // 10, n],
               "state": [State.RUNNING, State.SYNC_WAIT, State.RUNNING, State.SYNC_WAIT], "addr": [0, 0x2000, 0, 0x3000]}
        return make_trace(th, stt)

    assert run_facts(trace(1000)).objects == []
    ab = compare(trace(1000), trace(2000))
    assert not any(c.kind == "wait" for c in ab.changes), ab.summary()
    assert "futex" not in ab.summary() and ab.changes[0].label == "a", ab.summary()


def test_a_pools_parked_member_is_not_its_waiting():
    """A pool of two working threads and one parked on a condition variable all run long: in B,
    twice as long, the parked one waits twice as long. The pool's row says it is critical longer
    and runs longer, not that it waits longer: that member waits for work, not on the others."""
    from scalestack.trace import State, make_trace

    def trace(n: int):
        th = {"tid": [1, 2, 3], "name": ["w-1", "w-2", "w-3"], "start_ns": [0, 0, 0], "end_ns": [n, n, n]}
        stt = {"tid": [1, 2, 3], "start_ns": [0, 0, 0], "end_ns": [n, n, n],
               "state": [State.RUNNING, State.RUNNING, State.SYNC_WAIT], "addr": [0, 0, 0x2000]}
        return make_trace(th, stt)

    ab = compare(trace(1_000_000), trace(2_000_000))
    pool = next(c for c in ab.changes if c.kind == "pool")
    assert pool.delta("sync_wait_ns") == 1_000_000 and pool.detail["idle_sync_wait_ns_b"] == 2_000_000
    assert "running 2 ms more" in ab.summary() and "waiting" not in ab.summary(), ab.summary()


def test_report_with_a_baseline_has_the_comparison_first(tmp_path):
    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    scalestack.save(simulate(flusher_workload(400_000), cores=4).trace, str(a))
    scalestack.save(simulate(flusher_workload(100_000), cores=4).trace, str(b))
    out = tmp_path / "rep"
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "report", str(b), "--baseline", str(a), "-q",
                           "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "report.json").read_text())
    first = next(iter(data["sections"]))
    assert first == "baseline"
    sec = data["sections"]["baseline"]
    assert sec["summary"][0].startswith("The run got") and sec["summary_line"].startswith("the run got")
    assert {c["kind"] for c in sec["changes"][:2]} == {"thread", "wait"}
    assert "Against the baseline" in (out / "report.html").read_text()


def test_function_criticality_worked_example():
    """Thread 1 runs [0, 10); thread 2 waits [0, 5) and runs [5, 10): C1 = 5 + 2.5, C2 = 2.5.
    Thread 1's samples: f at t=2 (alone: weight 1), g at t=7 (two running: 1/2), so f gets
    7.5 * 1/1.5 = 5 and g 2.5; thread 2's one sample, in g, gets its 2.5. Functions add up to the
    threads' criticality; the same run at half speed doubles each, and the function rows add up
    to the wall-time change."""
    from scalestack.analysis.compare import run_facts
    from scalestack.trace import State, make_trace

    def trace(scale: int):
        e = 10 * scale
        th = {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [e, e]}
        stt = {"tid": [1, 2, 2], "start_ns": [0, 0, 5 * scale], "end_ns": [e, 5 * scale, e],
               "state": [State.RUNNING, State.SYNC_WAIT, State.RUNNING]}
        samples = {"tid": [1, 1, 2], "time_ns": [2, 7 * scale, 8 * scale], "cpu": [0, 0, 1], "ip": [1, 2, 2],
                   "offset": [0, 0, 0], "symbol": ["f", "g", "g"], "binary": ["/bin/x", "/bin/x", "/bin/x"]}
        return make_trace(th, stt, samples=samples)

    fns = run_facts(trace(1), active="running").functions
    assert fns == {"f (x)": {"criticality_ns": pytest.approx(5.0), "samples": 1.0},
                   "g (x)": {"criticality_ns": pytest.approx(5.0), "samples": 2.0}}
    res = compare(trace(1), trace(2), active="running")
    fn = [c for c in res.changes if c.kind == "function"]
    assert {c.label: c.contribution_ns for c in fn} == {"f (x)": pytest.approx(5.0), "g (x)": pytest.approx(5.0)}
    assert sum(c.contribution_ns for c in fn) == pytest.approx(res.wall_change_ns)


def test_aggregate_recordings_compare_thread_by_thread(tmp_path):
    """Two `record --aggregate`-style recordings (from the simulator): threads and pools matched,
    their rows and the idle row adding up to the wall-time change; no wait objects."""
    from scalestack.fleet.synthetic import simulated_recording

    a = simulated_recording("barrier_imbalance", 3, 0, 2)
    b = simulated_recording("barrier_imbalance", 5, 0, 4)
    a.save(str(tmp_path / "a.parquet"))
    b.save(str(tmp_path / "b.parquet"))
    res = compare(a, b)
    assert not any(c.kind == "wait" for c in res.changes)
    pool = next(c for c in res.changes if c.label == "worker-*")
    assert (pool.detail["threads_a"], pool.detail["threads_b"]) == (2, 4)
    total = sum(c.contribution_ns for c in res.changes if c.kind in ("thread", "pool", "idle"))
    assert total == pytest.approx(res.wall_change_ns, abs=2.0)
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "compare", str(tmp_path / "a.parquet"),
                           str(tmp_path / "b.parquet"), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["wall_b_ns"] == res.wall_b_ns


def test_many_wait_objects_are_matched_in_bounded_time():
    """A run with thousands of futexes (each waited on once): the 200 largest of each run are
    matched one by one, the rest summed into one row; the shares still add up."""
    import time

    from scalestack.analysis import compare as cmp
    from scalestack.trace import State, make_trace

    def trace(n: int, shift: int):
        th = {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [2 * n, 2 * n]}
        stt = {"tid": [1] + [2] * (2 * n), "start_ns": [0] + [k for k in range(2 * n)],
               "end_ns": [2 * n] + [k + 1 for k in range(2 * n)],
               "state": [State.RUNNING] + [State.SYNC_WAIT if k % 2 == 0 else State.RUNNING for k in range(2 * n)],
               "addr": [0] + [(0x10000 + shift + 16 * k) if k % 2 == 0 else 0 for k in range(2 * n)]}
        return make_trace(th, stt)

    a, b = trace(3000, 0), trace(2500, 8)
    t0 = time.perf_counter()
    res = compare(a, b)
    assert time.perf_counter() - t0 < 20
    waits = [c for c in res.changes if c.kind == "wait"]
    others = [c for c in waits if c.detail["object"] == "others"]
    assert len(others) == 1 and others[0].a["waits"] == 3000 - cmp.MATCHED
    assert sum(c.a["share_ns"] for c in waits) == pytest.approx(sum(o["share_ns"] for o in cmp.run_facts(a).objects))


def _split(first: int, second: int) -> dict:
    """main computes, starts two workers with `first` and `second` units of work and joins them."""
    return {"name": "split", "threads": [
        {"name": "main", "start": True, "ops": [["compute", 1_000_000], ["spawn", 1], ["spawn", 2], ["join", 1],
                                                 ["join", 2]]},
        {"name": "worker-1", "start": False, "ops": [["compute", first]]},
        {"name": "worker-2", "start": False, "ops": [["compute", second]]}]}


def test_a_join_is_listed_with_no_share_of_the_change():
    """Balancing the work (8+2 -> 5+5) shortens main's join by as much as the run: the join's wait
    follows the workers' change, which their pool's row carries; the join is no cause of it."""
    res = compare(simulate(_split(8_000_000, 2_000_000), cores=4).trace,
                  simulate(_split(5_000_000, 5_000_000), cores=4).trace)
    join = next(c for c in res.changes if c.kind == "wait" and c.detail["object"] == "join")
    assert join.contribution_ns == 0.0 and join.delta("wait_ns") < 0 and "main" in join.detail["waiters"]
    assert res.changes[0].label == "worker-*" and res.changes[0].contribution_ns == pytest.approx(res.wall_change_ns)
    assert "join" not in res.summary(), res.summary()
