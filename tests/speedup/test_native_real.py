"""Issue 27 on real programs: an OpenMP program (gcc -fopenmp) swept with --omp-passive, and a
Java program whose main() runs on a thread the launcher starts."""

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from scalestack.commands.scale import command
from tests.conftest import ROOT, WORKLOADS, requires_recording

COMPONENTS = ("gc", "seq", "sync", "imb", "cont", "other")


def _low(stack: dict) -> dict:
    """Components below -0.1; OTHER, the residue, also carries the baseline's run-to-run noise, which the
    1-thread run and its passive twin measure (`baseline_spread`: 6.7% apart once here, for ±0.13)."""
    spread = stack.get("baseline_spread") or 0.0
    return {c: stack[c] for c in COMPONENTS if stack[c] <= -0.1 - (stack["speedup"] * spread if c == "other" else 0.0)}


def _no_component_below(stack: dict, baseline) -> None:
    """No component below -0.1, unless other processes kept a CPU from the 1-thread run: CONT
    subtracts that run's waits for a CPU, so it goes negative by design when the baseline waited
    more than the N-thread run (measured here under a load average of 6 on 2 cores: -0.33)."""
    from scalestack.trace import State

    st_ = baseline.states
    waited = int(st_.duration_ns[st_.state == State.RUNNABLE].sum())
    low = _low(stack)
    if low and waited > 0.05 * baseline.wall_ns:
        pytest.skip(f"other processes kept a CPU busy: the 1-thread run waited {waited / 1e6:.0f} ms for one ({low})")
    assert not low, stack


@pytest.fixture(scope="module")
def omp_serial(tmp_path_factory):
    exe = tmp_path_factory.mktemp("omp") / "omp_serial"
    proc = subprocess.run(["gcc", "-O1", "-Wall", "-fopenmp", str(WORKLOADS / "openmp" / "omp_serial.c"), "-o",
                           str(exe)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"gcc -fopenmp does not build here: {proc.stderr[-300:]}")
    return exe


@pytest.mark.root
@requires_recording
def test_openmp_sweep_seq_is_the_serial_fraction(omp_serial, tmp_path):
    """The master thread works in every loop: SEQ comes from the serial windows (thesis eq. 3.12),
    spinning from the passive twins, and it agrees with the program's own clock of its serial parts.
    Before issue 27 this stack read SEQ -0.73 and OTHER +0.88."""
    from scalestack.analysis.serial import classify_threads
    from scalestack.collect.sweep import load_sweep

    # the default and passive runs are separate runs: once in a CI run on the 2-core VM their serial
    # shares differed by 0.101; such a sweep is made once more. The program's clock starts in main, the
    # trace's at exec: 40 rounds (~0.35 s at 2 threads) keep the ~12 ms of start-up a recorded exec took
    # once (SEQ 0.233 against the clock's 0.117 in 10 rounds, both attempts) within the margin. A sweep
    # with a component below -0.1 is made once more too: in a CI run the 2-thread run took 0.298 s, less
    # than the 1-thread run's 0.576 s and the program's own 0.040 s of serial time allow (0.308 s; the
    # 1-thread run slowed by something the guest cannot see), and OTHER, the residue, read -0.17
    for attempt in range(2):
        own = tmp_path / f"serial-{attempt}.txt"
        out = tmp_path / f"sweep-{attempt}"
        r = CliRunner().invoke(command, ["--threads", "1,2", "--omp-passive", "--env", "OMP_NUM_THREADS={threads}",
                                         "--env", f"SERIAL_OUT={own}", "-o", str(out), "--json", "--",
                                         str(omp_serial), "40", "200", "15"])
        assert r.exit_code == 0, r.output
        stacks = json.loads(r.output[r.output.index("["):])
        manifest = json.loads((out / "sweep.json").read_text())
        assert [(x["threads"], x.get("policy", "")) for x in manifest["runs"]] == [(1, ""), (1, "passive"), (2, ""),
                                                                                  (2, "passive")]
        s2 = stacks[1]
        assert s2["n"] == 2 and s2["form"] == "native" and s2["workers"] == 2
        assert abs(s2["speedup"] + sum(s2[c] for c in COMPONENTS) - 2) < 1e-9
        # the serial fraction of the run's own serial windows (the passive twin's, where spinning hides none)
        t2, p2 = load_sweep(str(out))[2], load_sweep(str(out), "passive")[2]
        windows = classify_threads(p2, 2).sweep.serial_ns / t2.wall_ns
        lines = [ln.split() for ln in own.read_text().splitlines()]
        assert [int(ln[5]) for ln in lines] == [1, 1, 2, 2]
        clock = float(lines[2][1]) / float(lines[2][3])  # the 2-thread default run's own serial share
        if abs(s2["seq"] - windows) < 0.1 and abs(s2["seq"] - clock) < 0.1 and not _low(s2):
            break
    assert abs(s2["seq"] - windows) < 0.1, (s2, windows)
    assert abs(s2["seq"] - clock) < 0.1, (s2, clock)
    assert 0.01 < clock < 0.3  # the program did run serial parts, so the comparison means something
    _no_component_below(s2, load_sweep(str(out))[1])


def test_omp_passive_needs_new_runs():
    from scalestack.errors import UserError

    r = CliRunner().invoke(command, ["--omp-passive", "--from", "somewhere"])
    assert r.exit_code != 0 and isinstance(r.exception, UserError) and "--omp-passive" in str(r.exception)


# numpy's matrix product on OpenBLAS's threads, with serial Python between the products
BLAS_PROGRAM = """
import numpy as np
a = np.random.default_rng(0).random((1200, 1200))
for _ in range(6):
    a = a @ a
    a /= np.abs(a).max()
    b = sorted(np.random.default_rng(1).random(200_000).tolist())
"""


@pytest.mark.root
@requires_recording
def test_openblas_spinning_is_booked_as_sync_with_its_passive_env(tmp_path):
    """numpy's OpenBLAS workers spin (2^28 cycles by default) before they sleep, so through the main
    thread's serial Python they read as work, OTHER. Twins with OPENBLAS_THREAD_TIMEOUT=4 (16 cycles)
    block at once: the default runs' extra running time is booked as SEQ (the serial parts it hid)
    and SYNC, no longer OTHER."""
    import sys

    from scalestack.analysis.sweep import stacks
    from scalestack.collect.sweep import load_sweep

    pytest.importorskip("numpy")
    prog = tmp_path / "blas.py"
    prog.write_text(BLAS_PROGRAM)
    out = tmp_path / "sweep"
    r = CliRunner().invoke(command, ["--threads", "1,2", "--env", "OPENBLAS_NUM_THREADS={threads}", "--passive-env",
                                     "OPENBLAS_THREAD_TIMEOUT=4", "-o", str(out), "--json", "--", sys.executable,
                                     str(prog)])
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["passive_env"] == {"OPENBLAS_THREAD_TIMEOUT": "4"}
    t2, p2 = load_sweep(str(out))[2], load_sweep(str(out), "passive")[2]
    from scalestack.trace import State

    # row 1: the BLAS thread (the main thread starts it); it blocks in the twin, it spins by default
    assert t2.time_in_states()[1, State.SYNC_WAIT] < p2.time_in_states()[1, State.SYNC_WAIT]
    plain = stacks(load_sweep(str(out)))[1]
    twins = json.loads(r.output[r.output.index("["):])[1]
    # the spin moves out of OTHER: the serial Python it hid shows as SEQ (the twin's serial windows),
    # the rest (spin beside work) as SYNC
    assert twins["other"] < plain.other - 0.15 and twins["seq"] > plain.seq + 0.15, (twins, plain)
    assert abs(twins["speedup"] + sum(twins[c] for c in COMPONENTS) - 2) < 1e-9


def test_passive_env_is_var_equals_value():
    from scalestack.errors import UserError

    for args, option in ((["--passive-env", "OPENBLAS_THREAD_TIMEOUT", "--", "true"], "--passive-env"),
                         (["--passive-env", "X=1", "--from", "d"], "--passive-env"),
                         (["--env", "OMP_NUM_THREADS", "--", "true"], "--env"),  # was dropped without a word
                         (["--env", "={threads}", "--", "true"], "--env")):
        r = CliRunner().invoke(command, args)
        assert r.exit_code != 0 and isinstance(r.exception, UserError) and option in str(r.exception), args


@pytest.mark.root
@requires_recording
def test_java_seq_uses_the_thread_that_runs_main(tmp_path):
    """HotSpot's launcher thread holds the main role and only waits; main() and the JVM's start-up
    run on a thread it starts. That thread is found by what it does (works alone, waits while the
    pool works), and it is the one that created the pool's threads."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("java/javac are not installed")
    cls = tmp_path / "cls"
    subprocess.run(["javac", "-d", str(cls), str(ROOT / "workloads" / "java" / "PoolWork.java")], check=True)
    from scalestack.analysis.serial import classify_threads
    from scalestack.analysis.sweep import stacks
    from scalestack.collect.sweep import load_sweep, run_sweep

    run_sweep(["java", "-cp", str(cls), "PoolWork", "{threads}", "300", "30"], [1, 2], str(tmp_path / "s"))
    traces = load_sweep(str(tmp_path / "s"))
    t2 = traces[2]
    k = classify_threads(t2, 2)
    drv = k.driver
    assert drv is not None
    th = t2.threads
    assert int(th.tid[drv]) != int(t2.meta["root_tid"])  # not the launcher's first thread
    pool = [i for i, name in enumerate(th.name) if str(name).startswith("pool-")]
    assert len(pool) == 2 and all(int(th.ppid[i]) == int(th.tid[drv]) for i in pool)
    assert all(k.kind[i] == "worker" for i in pool)
    s2 = stacks(traces)[1]
    assert s2.form == "managed" and s2.workers == 2
    assert s2.t_seq_mt_ns > 0.05 * t2.wall_ns  # the JVM's serial start-up and shutdown are in SEQ
    # the serial windows of the run before the pool's first thread starts and after its last one ends
    # (the JVM's start-up and shutdown, whichever thread ran them); inside the pool's life a pool thread
    # finishing its task alone is SYNC in the managed reading, as in the paper
    sw = classify_threads(t2, 2).sweep
    a, b = min(int(th.start_ns[i]) for i in pool), max(int(th.end_ns[i]) for i in pool)
    outside = float(sw.serial_in(t2.start_ns, a) + sw.serial_in(b, t2.end_ns)) / t2.wall_ns
    assert abs(s2.seq - outside) < 0.1, (s2, outside)
    _no_component_below(s2.to_dict(), traces[1])


@requires_recording
def test_native_stacks_benchmark_quick_mode():
    """benchmarks/validation/native_stacks.py --quick: the C pool whose main thread works, swept at 1
    and 2 threads, gives a native-form row whose SEQ is not negative."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "validation" / "native_stacks.py"
    proc = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| pool | 2 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[9] == "native" and float(cells[4]) >= 0.0, row
