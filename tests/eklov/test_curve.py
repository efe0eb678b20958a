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
    proc = _cli("pirate-curve", "--sizes", f"0,{c // 2},{c}", "--repeat", "2", "-o", str(out), "--json",
                "--", fit_l1, "1", "16384", "20000000")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["kind"] == "pirate_curve" and res["llc_bytes"] == c
    rows = res["rows"]
    assert [r["pirate_bytes"] for r in rows] == [0, c // 2, c]
    assert [r["cache_bytes"] for r in rows] == [c, c - c // 2, 0]
    assert rows[0]["slowdown"] == 1.0 and all(r["runs"] + r["discarded"] == 2 for r in rows)
    # 16 KiB lives in L1: the pirate does not slow it much, whatever it holds
    assert all(0.6 < r["slowdown"] < 1.5 for r in rows), rows
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
