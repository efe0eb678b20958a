"""Record real programs with call stacks (`record --stacks`) and check that the locks and functions
come back by name: two global mutexes and a heap lock in a C program compiled here, the CPython
GIL, and a serializing lock as the first finding of `advise`."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import scalestack
from scalestack.analysis.advice import GIL_TODO, advise, facts_of, findings
from scalestack.analysis.where import collapsed, where
from scalestack.report import build_report

from ..conftest import ROOT, requires_recording

pytestmark = [requires_recording, pytest.mark.root]


@pytest.fixture(scope="module")
def where_locks(tmp_path_factory):
    out = tmp_path_factory.mktemp("where")
    exe = out / "where_locks"
    # frame pointers in the program: the futex calls' stacks then walk through the C library to the
    # call site (docs/where.md, Limits)
    subprocess.run(["gcc", "-O1", "-fno-omit-frame-pointer", "-Wall", "-pthread",
                    str(ROOT / "workloads/c/where_locks.c"), "-o", str(exe)], check=True)
    return exe


def test_global_and_heap_locks_named_with_the_code_holding_them(where_locks, tmp_path):
    # The holder column counts the releasing thread's 1 kHz samples inside the waits, and how much the
    # holder runs there is the machine's: the two push_job threads wait on each other only now and
    # then (8-70 waits in 150 rounds), and on a loaded machine the holder is preempted while it holds
    # the lock (waits of 4-20 ms, whole ticks, in which it runs ~0.1 ms). With 150 rounds and two busy
    # loops beside, 2 of 8 recordings failed: the heap lock had no holder sample at all, or a single
    # waiter; and alone the heap lock's holders were 1-7 samples ({local_work: 2, push_job: 1} once).
    # So 300 rounds (twice the samples), and the load-dependent part (some contention on each lock,
    # holder samples naming the holding code, each thread's weighted samples within 15% + 5 samples
    # of its criticality) measured again up to 3 times: a tool that names or attributes the locks
    # wrongly fails all three. The samples: 6 local recordings here within 9.8%, but once in a CI run
    # the main thread's 203 samples weighed 169 ms against a criticality of 134 ms (and once before in
    # a local serial run, 171.5 against 134).
    def sampled_off(trace, res) -> list:
        crit = scalestack.criticality(trace)
        out = []
        for row in res.threads:
            c = float(crit.criticality_ns[list(crit.tids).index(row["tid"])])
            if c > 50e6 and not abs(row["criticality_ns"] - c) < 0.15 * c + 5 * res.period_ns:
                out.append((row, c))
        return out

    for _ in range(3):
        trace = scalestack.record([str(where_locks), "4", "300"], str(tmp_path / "w.trace"), stacks=True)
        trace.validate()
        assert len(trace.stacks) and len(trace.futex_calls) and (trace.samples.stack >= 0).mean() > 0.9
        res = where(trace)
        locks = {lk["name"]: lk for lk in res.locks}
        big = locks["big_lock"]
        assert big["how"] == "symbol" and big["waiters"] == 2
        # the heap lock: named by the first program frame on its wait calls' stacks, push_job (put back from
        # worker's call instruction where the frame-pointer walk skips it, docs/where.md), held in push_job
        heap = [lk for lk in res.locks if lk["how"] == "call-site" and lk["waiters"] >= 2]
        if (next(iter(big["holders"]), None) == "update_table" and heap
                and next(iter(heap[0]["holders"]), None) == "push_job" and not sampled_off(trace, res)):
            break
    assert next(iter(big["holders"]), None) == "update_table", res.locks
    assert heap and heap[0]["name"] == "lock waited at push_job", res.locks
    assert next(iter(heap[0]["holders"]), None) == "push_job", res.locks
    names = [f["function"] for f in res.functions[:3]]
    assert "update_table" in names and "push_job" in names
    # per thread, the weighted samples add up to the thread's criticality within sampling error
    assert not sampled_off(trace, res)
    sections = {s.key: s for s in build_report(trace).sections}
    assert "big_lock" in [r["lock"] for r in sections["locks"].table]
    assert sections["functions"].title == "Critical functions"
    # collapsed stacks through the command line
    subprocess.run([sys.executable, "-m", "scalestack.cli", "export", "collapsed", str(tmp_path / "w.trace"),
                    "-o", str(tmp_path / "w.collapsed")], check=True)
    lines = (tmp_path / "w.collapsed").read_text().splitlines()
    assert any(line.rsplit(" ", 1)[0].endswith(";update_table") for line in lines)
    assert (tmp_path / "w.collapsed").read_text() == collapsed(where(scalestack.load(tmp_path / "w.trace"),
                                                                     top=10**6))


def test_a_perf_data_recorded_with_callchains_imports_its_stacks(where_locks, tmp_path, monkeypatch):
    """`perf record -a -g` with the tracepoints and CPU samples, made by hand as on another machine:
    the import names the serializing lock and the function that holds it, as `record --stacks`
    does, read whole, in windows and for a part alike (a part keeps the futex calls in it); where
    perf cannot read the stacks, the states come without them and a warning says why."""
    from scalestack.ingest import perf_data
    from scalestack.ingest.perf_data import load, read_perf_data
    from scalestack.trace.events import RECORD_TRACEPOINTS

    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-g", "-k", "CLOCK_MONOTONIC", "-o", str(data),
                    "-e", ",".join(RECORD_TRACEPOINTS), "-e", "cpu-clock/period=1000000/", "--",
                    str(where_locks), "3", "150", "big"], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", str(data), "--comm", "where_locks",
                           "-o", str(tmp_path / "w.trace")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    trace = scalestack.load(tmp_path / "w.trace")
    assert trace.meta["stacks_read_by"] == "perf script" and trace.meta["stacks"] == "fp"
    assert len(trace.futex_calls) and (trace.samples.stack >= 0).mean() > 0.9
    res = where(trace)
    locks = {lk["name"]: lk for lk in res.locks}
    assert locks["big_lock"]["how"] == "symbol" and locks["big_lock"]["waiters"] >= 2, res.locks
    assert "update_table" in [f["function"] for f in res.functions[:2]]
    windows = load(str(data), comm="where_locks", chunk_rows=250)
    assert len(read_perf_data(data)) > 4 * 250  # (so it was read in windows; 1703 events in all once, on a busy machine)
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", str(data), "--comm", "where_locks",
                           "--chunk-rows", "250", "-o", str(tmp_path / "ww.trace")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr  # written as it is built
    for got in (windows, scalestack.load(tmp_path / "ww.trace")):
        for name in ("states", "samples", "frames", "stacks", "futex_calls"):
            assert getattr(got, name) == getattr(trace, name), name
    t0, t1 = trace.start_ns + trace.wall_ns // 4, trace.start_ns + trace.wall_ns // 2
    part = load(str(data), comm="where_locks", between=(t0, t1))
    calls = part.futex_calls.time_ns
    assert len(calls) and calls.min() >= t0 and calls.max() <= t1 and len(calls) < len(trace.futex_calls)
    failing = tmp_path / "perf"  # perf, but its stacks pass fails
    failing.write_text(f'#!/bin/sh\ncase "$*" in *--show-mmap-events*) echo "perf: cannot unwind here" >&2; exit 1;; '
                       f'esac\nexec {shutil.which("perf")} "$@"\n')
    failing.chmod(0o755)
    monkeypatch.setattr(perf_data, "which", lambda _name: str(failing))
    bare = load(str(data), comm="where_locks")
    assert bare.states == trace.states and len(bare.futex_calls) == 0 and len(bare.stacks) == 0
    assert any("call stacks were not read" in w and "cannot unwind here" in w for w in bare.warnings), bare.warnings


def test_futex_stacks_of_a_program_without_frame_pointers_reach_its_code(tmp_path):
    """Built as distributions build (-O2, no frame pointer), the wait calls' stacks get through glibc
    to the program's functions in every recording. perf's DWARF unwinding of glibc failed for whole
    recordings when the maps a process had before its exec (perf's own, the shell's) were kept: 2 of
    5 plain `perf record -a` of this program, 6 of 12 `record --stacks` of pigz, each a stack of one
    glibc frame for every call (`ingest.perf_data_copy`)."""
    exe = tmp_path / "where_locks_o2"
    subprocess.run(["gcc", "-O2", "-Wall", "-pthread", str(ROOT / "workloads/c/where_locks.c"), "-o", str(exe)],
                   check=True)
    for k in range(3):
        trace = scalestack.record([str(exe), "3", "60", "big"], str(tmp_path / f"o2-{k}.trace"), stacks=True)
        fc = trace.futex_calls
        waits = fc.stack[(fc.op == 0) | (fc.op == 9)]
        assert len(waits) >= 20
        frames = trace.frames
        reach = [any(frames.binary[f].endswith("where_locks_o2") for f in trace.stacks.frames_of(int(sid)))
                 for sid in waits if sid >= 0]
        assert np.mean(reach) > 0.9, (k, np.mean(reach), trace.meta.get("stack_notes"))
        assert not [w for w in trace.warnings if "no further than the C library" in w]


def test_serializing_lock_is_the_first_finding(where_locks):
    trace = scalestack.record([str(where_locks), "3", "150", "big"], None, stacks=True)
    first = advise(trace).findings[0]
    assert first.kind == "lock" and "big_lock" in first.title, advise(trace).text()
    assert "update_table" in first.detail
    # on a busy machine one of the three symmetric threads can look critical (40% where 33% is even), and
    # its finding names big_lock too: the lock that serializes the run still gets its own, first
    facts = facts_of(trace, 2.0)
    crit = facts.cr.criticality_ns.copy()
    crit[int(facts.cr.order[0])] *= 1.6
    skewed = findings(dataclasses.replace(facts, cr=dataclasses.replace(facts.cr, criticality_ns=crit)))
    kinds = [f.kind for f in skewed.findings]
    assert kinds[0] == "lock" and "big_lock" in skewed.findings[0].title and "critical-thread" in kinds, skewed.text()


GIL_PROGRAM = """
import sys, threading
def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
ts = [threading.Thread(target=spin, args=(int(sys.argv[1]),)) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the GIL's offsets are known for CPython 3.11")
def test_cpython_threads_wait_on_the_gil_by_name(tmp_path):
    prog = tmp_path / "gil.py"
    prog.write_text(GIL_PROGRAM)
    # run as `python3`: every thread is then named python3, which is no numbered pool ('python*')
    python3 = Path(sys.executable).with_name("python3")
    trace = scalestack.record([str(python3 if python3.exists() else sys.executable), str(prog), "1500000"], None,
                              stacks=True)
    gil = [lk for lk in where(trace).locks if lk["name"] == "the CPython GIL"]
    assert gil and gil[0]["waiters"] >= 3 and len(gil[0]["addrs"]) >= 2, where(trace).locks
    findings = advise(trace)
    lock = next((f for f in findings.findings if f.kind == "lock" and "the CPython GIL" in f.title), None)
    assert lock is not None and GIL_TODO in lock.detail, findings.text()
    assert not any(f.kind == "pool" for f in findings.findings), findings.text()


@pytest.mark.skipif(shutil.which("rustc") is None, reason="rustc is not installed")
def test_a_rust_mutex_is_named_by_the_programs_code_not_std(tmp_path):
    """Rust links its std into the program: the lock's wait site is the program's function that
    takes it (`rust_mutex::insert_counted`), not std's futex mutex, and the joins are main's."""
    exe = tmp_path / "rust_mutex"
    subprocess.run(["rustc", "-O", "-g", str(ROOT / "workloads/rust/rust_mutex.rs"), "-o", str(exe)], check=True)
    trace = scalestack.record([str(exe), "2", "30000", "1"], None, stacks=True)
    locks = where(trace).locks
    lock = max(locks, key=lambda lk: lk["wait_ns"])
    assert lock["name"] == "lock waited at rust_mutex::insert_counted" and lock["waiters"] == 2, locks
    assert "rust_mutex::insert_counted" in lock["holders"], lock
    joins = [lk for lk in locks if lk["how"] == "join"]
    assert joins and all(lk["name"] == "thread exit (pthread_join in rust_mutex::main)" for lk in joins), locks
    # thousands of futex calls a second, each with its stack copied: the recording's own cost shows
    # (15.6% of the criticality for `rust_mutex 2 100000 1`, 2026-12-02)
    assert 0.02 < where(trace).recording_share < 0.6


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_consumers_waiting_on_a_condition_variable_are_told_to_speed_up_the_producer(tmp_path):
    """C++: consumers wait on a std::condition_variable for a producer that is slower than them;
    the wait is a condition variable's by its stacks, and the advice is the producer's work, not
    shorter critical sections."""
    exe = tmp_path / "queue_cv"
    subprocess.run(["g++", "-O2", "-g", "-pthread", str(ROOT / "workloads/cpp/queue_cv.cpp"), "-o", str(exe)],
                   check=True)
    trace = scalestack.record([str(exe), "10000", "60000", "20000", "2"], None, stacks=True)
    top = max(where(trace).locks, key=lambda lk: lk["wait_ns"])
    assert top["primitive"] == "condition variable" and top["releasers"], top
    assert next(iter(top["releasers"])) == "producer", top
    res = advise(trace)
    f = next((f for f in res.findings if f.kind == "lock"), None)
    assert f is not None and "(a condition variable)" in f.title, res.text()
    assert "before it signals" in f.detail and "Shorter critical sections" not in f.detail, res.text()


def test_openblas_threads_polling_are_spinning_not_work(tmp_path):
    """NumPy's matrix products on OpenBLAS's threads: the threads' polling loops are spinning, the
    gemm kernels work (19% of the criticality spun on an idle 2-core VM, 2026-12-02)."""
    prog = ROOT / "workloads/python/blas_products.py"
    trace = scalestack.record(["env", "OPENBLAS_NUM_THREADS=2", sys.executable, str(prog), "300", "400"], None,
                              stacks=True)
    res = where(trace)
    blas = [f for f in res.functions if "openblas" in f["binary"]]
    if not blas:
        pytest.skip("NumPy here does not use OpenBLAS (no frame of it was sampled)")
    spun = {f["function"] for f in res.spin_functions}
    assert spun and spun <= {"blas_thread_server", "exec_blas", "exec_blas_async_wait", "inner_thread",
                             "exec_threads"}, res.spin_functions
    assert not any("kernel" in f for f in spun)
    assert 0.0 < res.spin_share < 0.9, res.spin_share


OMP_PROGRAM = r"""
#include <omp.h>
#include <stdio.h>
static volatile double sink;
__attribute__((noinline)) void step(int id, long n) {
    double x = 0;
    for (long i = 0; i < n * (id + 1); i++) x += i * 0.5;
    sink = x;
}
int main(void) {
    #pragma omp parallel num_threads(2)
    {
        int id = omp_get_thread_num();
        for (int r = 0; r < 200; r++) {
            step(id, 200000);
            #pragma omp barrier
        }
    }
    printf("done\n");
    return 0;
}
"""


def test_openmp_barrier_spinning_is_reported_as_spinning(tmp_path):
    src = tmp_path / "omp.c"
    src.write_text(OMP_PROGRAM)
    exe = tmp_path / "omp"
    subprocess.run(["gcc", "-O1", "-fopenmp", str(src), "-o", str(exe)], check=True)
    trace = scalestack.record([str(exe)], None, stacks=True)
    res = where(trace)
    assert res.spin_share > 0.1, res.threads
    assert "step" in [f["function"] for f in res.functions[:3]]
    summary = " ".join(next(s for s in build_report(trace).sections if s.key == "functions").summary)
    assert "spinning" in summary


JAVA_PROGRAM = """
public class HotLoop {
    static volatile double sink;
    static double crunch(int n) {
        double x = 0;
        for (int i = 0; i < n; i++) { x += Math.sqrt(i) * 0.5; }
        return x;
    }
    public static void main(String[] args) throws Exception {
        Thread[] ts = new Thread[2];
        for (int k = 0; k < 2; k++) {
            ts[k] = new Thread(() -> { for (int r = 0; r < 250; r++) sink = crunch(200000); });
            ts[k].start();
        }
        for (Thread t : ts) t.join();
    }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None, reason="java/javac are not installed")
def test_java_hot_method_among_the_critical_functions(tmp_path):
    (tmp_path / "HotLoop.java").write_text(JAVA_PROGRAM)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "HotLoop.java")], check=True)
    trace = scalestack.record(["java", "-Xmx64m", "-cp", str(tmp_path), "HotLoop"], None, stacks=True)
    top = where(trace).functions[:3]
    assert any("HotLoop.crunch" in f["function"] and f["binary"].startswith("/tmp/perf-") for f in top), top
    assert not any(os.path.exists(f"/tmp/perf-{p}.map") for p in set(trace.threads.pid.tolist()))


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
def test_side_by_side_benchmark_quick():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/where_side_by_side.py"), "--quick"],
                         capture_output=True, text=True, check=True).stdout
    assert "perf report" in out and "update_table" in out and "bpftrace" in out
    waits = re.findall(r"^\s+0x[0-9a-f]+\s+([\d.]+)\s+(\d+)$", out, re.M)
    assert any(int(n) > 10 for _, n in waits), out
