"""`scalestack pirate-curve` on a kernel: the table, the JSON, the figure files, the bad inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ..conftest import WORKLOADS

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or len(os.sched_getaffinity(0)) < 2
                                or not os.path.isdir("/sys/devices/system/cpu/cpu0/cache"),
                                reason="needs gcc, two CPUs and a sysfs cache description")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def fit_l1(tmp_path_factory):
    exe = tmp_path_factory.mktemp("curve") / "eklov_fit_l1"
    subprocess.run(["gcc", "-O2", "-pthread", str(WORKLOADS / "c" / "eklov_fit_l1.c"), "-o", str(exe)], check=True)
    return str(exe)


def test_curve_command_on_kernel(fit_l1, tmp_path):
    from scalestack.eklov.pirate import llc_info

    c = llc_info(0).size_bytes
    out = tmp_path / "out"
    proc = _cli("pirate-curve", "--sizes", f"0,{c // 2},{c}", "--repeat", "3", "-o", str(out), "--json",
                "--", fit_l1, "1", "16384", "20000000")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["kind"] == "pirate_curve" and res["llc_bytes"] == c
    rows = res["rows"]
    assert [r["pirate_bytes"] for r in rows] == [0, c // 2, c]
    assert [r["cache_bytes"] for r in rows] == [c, c - c // 2, 0]
    assert rows[0]["slowdown"] == 1.0 and all(r["runs"] + r["discarded"] == 3 for r in rows)
    assert all(r["slowdown"] == r["time_ns"] / rows[0]["time_ns"] for r in rows)
    # 16 KiB lives in L1: the pirate does not slow it much, whatever it holds. Judged on the fastest
    # of three runs: one run of ~30 ms can take half as long again on a busy machine
    assert all(0.6 < r["time_min_ns"] / rows[0]["time_min_ns"] < 1.5 for r in rows), rows
    for name in ("pirate_curve.json", "pirate_curve.png", "pirate_curve.svg"):
        assert (out / name).stat().st_size > 100
    if "not supported" in proc.stderr:  # this VM: one clear notice, no CPI columns
        assert proc.stderr.count("hardware counters not supported") == 1 and "cpi" not in rows[0]
    table = _cli("pirate-curve", "--sizes", "0,1M", "--repeat", "1", "--", fit_l1, "1", "16384", "1000000")
    assert table.returncode == 0 and "cache left" in table.stdout and "1.0Mi" in table.stdout


@pytest.mark.parametrize("args, message", [
    (("--sizes", "0,64G", "--", "true"), "larger than the last-level cache"),
    (("--sizes", "0,1M"), "no command"),
    (("--sizes", "12Q", "--", "true"), "cannot read the size"),
    (("--repeat", "0", "--", "true"), "--repeat must be at least 1"),
    (("--sizes", "0", "--", "/nonexistent/prog"), "cannot run"),
])
def test_curve_bad_input_is_one_line(args, message):
    proc = _cli("pirate-curve", *args)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "hardware counters" not in ln]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def lookup(tmp_path_factory):
    d = tmp_path_factory.mktemp("lookup")
    exe = d / "eklov_lookup"
    subprocess.run(["gcc", "-O2", str(WORKLOADS / "c" / "eklov_lookup.c"), "-o", str(exe)], check=True)
    data = d / "input"
    data.write_bytes(os.urandom(16 << 20))
    return str(exe), str(data)


def test_one_run_curve_sees_the_cache_a_lookup_table_loses(lookup):
    """One run of a streaming kernel, the pirate changing size under it: a table of half the cache a
    pirate holds here slows down beside a pirate of 3/4 of that cache, a 16 KiB table (L1) does not. Work is
    the bytes the kernel reads. The sizes come from the pirate's measured knee (on the host whose sysfs
    LLC is 32 MiB a program gets 4-12 MiB of it, varying by the hour): measured, a 4 MiB table beside
    9 MiB, 1.86x in one run and 1.85x in separate runs (docs/pirate.md). Where table and pirate fit
    in half the LLC (a 480 MiB one), the pirate takes nothing and the test skips."""
    from scalestack.eklov.pirate import effective_llc_bytes, llc_info

    exe, data = lookup

    def run(size, passes, pirate):
        proc = _cli("pirate-curve", "--one-run", "--sizes", f"0,{pirate}", "--hold", "0.2", "--json",
                    "--", exe, str(size), str(passes), data)
        assert proc.returncode == 0, proc.stderr
        res = json.loads(proc.stdout)
        assert res["mode"] == "one-run" and res["progress"] == "io"
        rows = res["rows"]
        assert [r["pirate_bytes"] for r in rows] == [0, pirate]
        assert all(r["runs"] + r["discarded"] >= 3 for r in rows), rows  # several windows per size
        assert all(r["time_min_ns"] <= r["time_max_ns"] and r["time_ns"] > 0 for r in rows)
        return rows[1]["slowdown"]

    def knee_now():
        for _ in range(3):  # the cache a program gets here moves; once, in a CI run, it read 3 MiB
            knee, _ = effective_llc_bytes(llc_info(0).cpus[-1])
            if knee >= 6 << 20:
                return knee
        return knee

    # the table beside the pirate, up to three times while its slowdown is within the margin (1.05x); the
    # cache the host leaves this VM moves while the test runs, so after a run with no slowdown the knee
    # is measured again: a run whose knee moved (by more than a quarter) did not test the premise
    moved, slow = [], {}
    knee = knee_now()
    for _ in range(3):
        if knee < 6 << 20:
            pytest.skip(f"the pirate keeps only {knee >> 20} MiB resident here now: a table of half of it is mostly "
                        "in the core's private L2 (1 MiB here), where no pirate reaches")
        table = max(1 << 20, knee // 2 >> 20 << 20)
        # the knee is the edge of what the pirate keeps (to the MiB); 3/4 of it holds with a margin and
        # still leaves the table less than its size (a pirate of the whole knee lost its lines once: 1.04x)
        pirate = max(1 << 20, knee * 3 // 4 >> 20 << 20)
        slow, used = {table: run(table, 60, pirate)}, knee
        if slow[table] > 1.05:
            break
        after = knee_now()
        if abs(after - knee) > knee // 4:
            moved.append(f"{knee >> 20} MiB before, {after >> 20} MiB after a run slowed {slow[table]:.3f}x")
        knee = after
    else:
        if len(moved) == 3:
            pytest.skip("the cache the pirate keeps moved during every run, so none tested the premise: "
                        + "; ".join(moved))
        llc = llc_info(0).size_bytes
        if 2 * (table + pirate) <= llc:
            # measured on a host with a 480 MiB LLC (knees of 43-63 MiB): 27-40 MiB tables beside 40-80 MiB
            # pirates 1.03-1.06x; both fit in the cache many times over, so the table loses lines only to
            # what the other tenants take, and the premise (a pirate taking the table's cache) does not hold
            pytest.skip(f"the table ({table >> 20} MiB) and the pirate ({pirate >> 20} MiB) fit together in half of "
                        f"this {llc >> 20} MiB LLC: the pirate takes no cache from the table here (slowdown "
                        f"{slow[table]:.3f}x)")
    slow[16 << 10] = run(16 << 10, 120, pirate)
    print(f"\none-run slowdowns beside a {pirate >> 20} MiB pirate (knee {used >> 20} MiB): {slow}", file=sys.stderr)
    # clearly above the L1 table's 0.99-1.01; measured 1.15-2.50 beside 3/4 of the knee, and
    # 1.09-1.10 on days the host leaves this VM more cache than usual (knees of 14-18 MiB)
    assert slow[table] > 1.05, slow
    assert 0.75 < slow[16 << 10] < 1.25, slow


@pytest.mark.parametrize("args, message", [
    (("--one-run", "--repeat", "2", "--", "true"), "--repeat does not apply to --one-run"),
    (("--hold", "0.5", "--", "true"), "only with --one-run"),
    (("--one-run", "--sizes", "0," + ",".join(f"{k}M" for k in range(1, 10)), "--", "true"), "at most 8 pirate sizes"),
    (("--one-run", "--sizes", "1M", "--", "true"), "at least two sizes"),
    (("--one-run", "--sizes", "0,1M", "--", "true"), "ended before every pirate size had 3 windows"),
    (("--one-run", "--sizes", "0,1M", "--hold", "0.1", "--", "sleep", "2"), "made no progress"),
])
def test_one_run_bad_input_is_one_line(args, message):
    proc = _cli("pirate-curve", *args)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_a_run_too_short_for_the_windows_is_its_own_error():
    """Callers that retry with a longer run (benchmarks/validation/pirate_one_run.py) catch the
    class, not the message's wording."""
    from scalestack.eklov.curve import RunTooShort, one_run_curve
    from scalestack.errors import UserError

    with pytest.raises(RunTooShort, match="ended before every pirate size had 3 windows") as info:
        one_run_curve(["true"], [0, 1 << 20], hold=0.1)
    assert isinstance(info.value, UserError)
