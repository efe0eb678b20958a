"""`scalestack pirate-stack` end to end: the no-sync estimate against the same microbenchmark with its
synchronization compiled out, stacks of real programs nobody wrote for this project, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from statistics import median

import pytest

from scalestack.eklov import shim

from ..conftest import WORKLOADS

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

UBS = ("tiny", "rnd", "seq")


def _compile(src, out, *flags):
    subprocess.run(["gcc", "-O2", "-Wall", "-pthread", *flags, str(src), "-o", str(out)], check=True)
    return str(out)


@pytest.fixture(scope="module")
def ubs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ubs")
    return {u: (_compile(WORKLOADS / "c" / f"ub_{u}.c", out / f"ub_{u}"),
                _compile(WORKLOADS / "c" / f"ub_{u}.c", out / f"ub_{u}_nosync", "-DNOSYNC")) for u in UBS}


QUIET = 0.15  # at most this share of the CPUs used by other processes during a measured pair


def machine_load(seconds: float = 1.0) -> float:
    """Share of the CPUs busy right now (nothing of ours runs meanwhile)."""
    import time

    from scalestack.eklov.shim import _busy_ns

    a, t0 = _busy_ns(), time.monotonic_ns()
    time.sleep(seconds)
    return shim.foreign_load(a, _busy_ns(), 0, time.monotonic_ns() - t0)


def nosync_error(sync_exe: str, nosync_exe: str, n: int, repeat: int = 5, patience_s: float = 45
                 ) -> tuple[float, float, float, float] | None:
    """Median no-sync estimate of the program with its locks and barriers, median phase time of the
    same program with them compiled out (runs interleaved), the relative error, and the share of the
    phase the threads spent waiting (so the test has teeth). Only pairs run while the machine was
    quiet count: on a machine other jobs keep busy, wall-clock accuracy cannot be judged (None)."""
    import time

    est, ref, waited = [], [], []
    deadline = time.monotonic() + patience_s
    while len(est) < repeat and time.monotonic() < deadline:
        a = shim.run([sync_exe, str(n)], "timing")
        b = shim.run([nosync_exe, str(n)], "phase")
        if not (a.foreign_load <= QUIET and b.foreign_load <= QUIET):
            time.sleep(1)
            continue
        est.append(a.log.nosync_ns())
        w = a.log.waits_ns()
        waited.append((w["lock_wait_ns"] + w["barrier_wait_ns"]) / n / a.log.phase_ns)
        ref.append(b.log.phase_ns)
    if len(est) < repeat:
        return None
    e, r = median(est), median(ref)
    return e, r, (e - r) / r, median(waited)


@pytest.mark.parametrize("ub", [
    "tiny",
    # measured on a quiet machine (load < 0.15, medians of 5 or 9 interleaved pairs): ub-rnd +1.7, +1.9, +3.0,
    # +3.1, +3.3, +3.5, +4.7, +5.7, +5.9% (7 of 9 within 5%); ub-seq -4.2 ... +2.7% (all 8 within); a session
    # before, +12.9% / +8.5%, and rnd +4.7 ... +9.4% as other jobs started. benchmarks/validation/eklov_nosync_gap.py
    # splits rnd's bias (docs/eklov.md): ~5 points are there with one thread, where nothing waits (the lock's
    # own line and page, evicted by the random reads between two lock calls), ~2 are line transfers, the rest
    # compute made slower after each sleep on the lock: costs of synchronization the method counts as work
    pytest.param("rnd", marks=pytest.mark.xfail(reason="ub-rnd's estimate is +2..+11% on a quiet machine, ~5 points "
                                                       "of it present at N = 1", strict=False)),
    pytest.param("seq", marks=pytest.mark.xfail(reason="ub-seq's estimate was -4.2..+2.7% quietly, +8.5% once",
                                                strict=False)),
])
@pytest.mark.skipif(os.environ.get("SCALESTACK_WALLCLOCK_CHECKS") != "1",
                    reason="wall-clock accuracy needs a machine with nothing else running (the suite's own recording "
                           "tests measured ub-tiny at -9.4% once): set SCALESTACK_WALLCLOCK_CHECKS=1 to run it; "
                           "benchmarks/validation/eklov_validate.py prints the same figures")
def test_nosync_estimate_within_5_percent_of_sync_compiled_out(ubs, ub):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores")
    sync_exe, nosync_exe = ubs[ub]
    load = machine_load()
    if load > QUIET:
        pytest.skip(f"other processes keep {load:.0%} of the CPUs busy: wall-clock accuracy cannot be judged now "
                    "(the CPU-time variant below still runs)")
    got = nosync_error(sync_exe, nosync_exe, 2)
    if got is None:
        pytest.skip(f"other processes kept more than {QUIET:.0%} of the CPUs busy: accuracy cannot be judged now")
    e, r, err, waited = got
    assert waited > 0.2, f"ub-{ub} hardly synchronizes ({waited:.0%} of its time waiting): the check would be empty"
    assert abs(err) <= 0.05, f"ub-{ub}: no-sync estimate {e / 1e6:.1f} ms, sync compiled out {r / 1e6:.1f} ms"
    # and the plain run is far from it: the estimate really removed the waits
    plain = median(shim.run([sync_exe, "2"], "phase").log.phase_ns for _ in range(3))
    assert plain > 1.2 * r


# CPU time is immune to other jobs taking the CPUs, not to them thrashing the caches, and it charges
# the lock's cache-line transfers (uncontended trylocks, unlocks) to work. Measured (medians, N = 2):
# ub-tiny +1.0..+7.8%, ub-seq -1.9..+9.3%, ub-rnd -6.3..+15.8%, quiet or loaded, and ub-rnd +26% once in a
# fresh-clone CI run (118.7 against 93.9 ms: random reads beside a neighbour's); on an AMD EPYC host
# (2026-12-01, 512 KiB L2) ub-tiny +13.3 and +13.9% in two of three runs, the third within 12% (its
# cache-line transfers cost more there). So this check only catches gross errors (leaving out the waking unlocks made ub-tiny
# +35%); the paper's 5% is the wall-clock test above, which needs a quiet machine.
CPU_TOLERANCE = {"tiny": 0.20, "rnd": 0.30, "seq": 0.25}


@pytest.mark.parametrize("ub", UBS)
def test_nosync_estimate_cpu_time(ubs, ub):
    """The same check in CPU time (each thread's CPU time less what it spent inside waits, against the
    sync-free program's busiest thread): other jobs taking the CPUs do not disturb it, so it always runs."""
    sync_exe, nosync_exe = ubs[ub]
    est, ref, waited = [], [], []
    for _ in range(9):
        a = shim.run([sync_exe, "2"], "timing").log
        b = shim.run([nosync_exe, "2"], "phase").log
        est.append(a.nosync_cpu_ns())
        ref.append(b.max_thread_cpu_ns(created_only=True))
        w = a.waits_ns()
        waited.append((w["lock_wait_ns"] + w["barrier_wait_ns"]) / 2 / a.phase_ns)
    e, r = median(est), median(ref)
    # on a busy machine the two threads are seldom on a CPU together, so they contend less
    assert median(waited) > 0.02, f"ub-{ub} hardly synchronizes ({median(waited):.1%}): the check would be empty"
    assert abs(e - r) / r <= CPU_TOLERANCE[ub], \
        f"ub-{ub}: CPU no-sync estimate {e / 1e6:.1f} ms, sync compiled out {r / 1e6:.1f} ms"


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def _check_rows(rows, counts):
    assert [r["n"] for r in rows] == counts
    for r in rows:
        assert r["cache"] + r["memory"] + r["sync"] + r["s_meas"] == pytest.approx(r["n"])
        for c in ("cache", "memory", "sync"):
            assert r[f"{c}_min"] <= r[c] + 1e-9 and r[c] <= r[f"{c}_max"] + 1e-9
        assert r["discarded"] >= 0


def test_cli_table_json_and_figures(ubs, tmp_path):
    sync_exe, _ = ubs["tiny"]
    out = tmp_path / "fig"
    proc = _cli("pirate-stack", "--threads", "1,2", "--repeat", "1", "--json", "-o", str(out), "--", sync_exe,
                "{threads}", "10")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["kind"] == "eklov_pirate_stack" and d["scope"] == "phase"
    _check_rows(d["rows"], [1, 2])
    kinds = [r["kind"] for r in d["runs"]]
    assert kinds.count("real") == 2 and kinds.count("timing") == 2 and kinds.count("isolated") == 3
    assert all(r["isolated"] for r in d["runs"] if r["kind"] == "isolated")
    timing2 = [r for r in d["runs"] if r["kind"] == "timing" and r["n"] == 2][0]
    assert timing2["lock_wait_ns"] + timing2["barrier_wait_ns"] > 0 and timing2["nosync_ns"] < timing2["phase_ns"]
    for name in ("eklov-curves", "eklov-stacks"):
        for ext in ("png", "svg"):
            assert (out / f"{name}.{ext}").stat().st_size > 1000
    rep = json.loads((out / "report.json").read_text())
    assert "eklov" in rep["sections"] and "no hardware counters" in (out / "report.html").read_text()
    table = _cli("pirate-stack", "--threads", "2", "--repeat", "1", "--profile", "first", "--", sync_exe,
                 "{threads}", "10")
    assert table.returncode == 0, table.stderr
    assert "S_pirate" in table.stdout and "discarded" in table.stdout and "warning:" in table.stdout


def test_cache_size_measured_shares_out_what_the_pirate_keeps(ubs):
    """--cache-size measured: C is the pirate's knee (9-19 MiB here, of the 32 MiB sysfs reports), said once."""
    from scalestack.eklov.driver import last_level_cache

    proc = _cli("pirate-stack", "--threads", "2", "--repeat", "1", "--profile", "first", "--cache-size", "measured",
                "--json", "--", ubs["tiny"][0], "{threads}", "10")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("measured cache C = ") == 1
    c = json.loads(proc.stdout)["cache_bytes"]
    assert 1 << 20 <= c <= last_level_cache().size_bytes
    assert f"C = {c / 2**20:.0f} MiB" in proc.stderr


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """About 11 MB of compressible, unsorted text (sort --parallel uses threads only above ~200 k lines)."""
    import random

    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    path = tmp_path_factory.mktemp("txt") / "words.txt"
    with open(path, "w") as fh:
        for _ in range(210_000):
            fh.write(" ".join(rng.choice(words) for _ in range(8)) + "\n")
    return str(path)


REAL = {
    "zstd": ["zstd", "-q", "-f", "-3", "-T{threads}", "{file}", "-o", "/dev/null"],
    "xz": ["xz", "-q", "-k", "-c", "-0", "-T{threads}", "{file}"],
    "sort": ["sort", "--parallel={threads}", "-S", "64M", "{file}", "-o", "/dev/null"],
}


@pytest.mark.parametrize("prog", sorted(REAL))
def test_real_program_stack(prog, text_file):
    if shutil.which(prog) is None:
        pytest.skip(f"{prog} is not installed")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores")
    argv = [a.replace("{file}", text_file) for a in REAL[prog]]
    proc = _cli("pirate-stack", "--threads", "1,2", "--repeat", "1", "--json", "--", *argv)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    _check_rows(d["rows"], [1, 2])
    assert all(v > 0 for r in d["runs"] for k, v in r.items() if k.endswith("phase_ns"))
    # all three use condition variables (thread pools, a merge queue): the shim counted them, the warning names them
    assert any(r.get("unsupported", {}).get("condition variable") for r in d["runs"] if r["kind"] == "timing")
    assert any("condition variable" in w for w in d["warnings"])
    assert any(r["kind"] == "isolated" and not r["isolated"] for r in d["runs"])


def _bad(*args):
    proc = _cli("pirate-stack", *args, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0
    assert len(lines) == 1 and lines[0].startswith("scalestack: error: "), proc.stderr
    return lines[0]


def test_bad_input_static_program(tmp_path):
    c = tmp_path / "s.c"
    c.write_text("#include <stdio.h>\nint main(int c, char **v) { printf(\"%s\\n\", v[1]); return 0; }\n")
    exe = tmp_path / "static_prog"
    if subprocess.run(["gcc", "-static", str(c), "-o", str(exe)], capture_output=True).returncode != 0:
        pytest.skip("no static libc to link with")
    assert "not dynamically linked" in _bad("--threads", "1", "--", str(exe), "{threads}")


def test_bad_input_too_many_threads(ubs):
    n = len(os.sched_getaffinity(0)) + 1
    msg = _bad("--threads", f"1,{n}", "--", ubs["tiny"][0], "{threads}")
    assert f"thread count {n} is above the {n - 1} cores available for isolation" in msg


def test_bad_input_pirate_larger_than_llc(ubs):
    from scalestack.eklov.driver import last_level_cache

    llc = last_level_cache().size_bytes
    msg = _bad("--threads", "1,2", "--cache-size", str(4 * llc), "--", ubs["tiny"][0], "{threads}")
    assert "larger than the last-level cache" in msg and "pirate size" in msg


def test_bad_input_other_mistakes(ubs):
    assert "placeholder" in _bad("--threads", "1,2", "--", ubs["tiny"][0], "2")
    assert "not a comma-separated list" in _bad("--threads", "a,b", "--", ubs["tiny"][0], "{threads}")
    assert "command not found" in _bad("--threads", "1", "--", "no-such-prog-xyz", "{threads}")
    assert "--repeat" in _bad("--repeat", "0", "--", ubs["tiny"][0], "{threads}")


def test_instances_mode_needs_its_module(ubs):
    try:
        import scalestack.eklov.instances  # noqa: F401
    except ImportError:
        assert "multi-instance mode" in _bad("--instances", "1,2", "--", ubs["tiny"][0], "1")
    else:  # present (the pirate branch): the command drives it and prints/saves the same way
        proc = _cli("pirate-stack", "--instances", "1,2", "--repeat", "1", "--json", "--", ubs["tiny"][0], "1", "5")
        assert proc.returncode == 0, proc.stderr
        d = json.loads(proc.stdout)
        assert d["mode"] == "instances"
        _check_rows(d["rows"], [1, 2])
        assert all(r["sync"] == 0 for r in d["rows"])
