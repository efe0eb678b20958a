"""The pirate benchmarks' quick modes: eklov_kernels.py prints the stack of each kernel for N = 1 and 2,
pirate_one_run.py the one-run and separate-runs curves of the lookup kernel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or len(os.sched_getaffinity(0)) < 2
                                or not os.path.isdir("/sys/devices/system/cpu/cpu0/cache"),
                                reason="needs gcc, two CPUs and a sysfs cache description")


def _quick(script: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / script), "--quick"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_eklov_kernels_quick():
    out = _quick("eklov_kernels.py")
    assert "measured cache C =" in out and "LLC from sysfs" in out
    for kernel, variants in (("fit_l1", 1), ("fit_llc", 2), ("stream", 1)):
        rows = [ln for ln in out.splitlines() if ln.strip().startswith(kernel) and " N=" in ln]
        assert [re.search(r"N=(\d)", ln).group(1) for ln in rows] == ["1", "2"] * variants, out
        assert all("cache" in ln and "memory" in ln and "[" in ln for ln in rows)
    one = [ln for ln in out.splitlines() if " N=1 " in ln]
    assert all("cache  +0.00" in ln and "memory  +0.00" in ln for ln in one)  # N = 1 is alone by definition
    print(out)


def test_pirate_one_run_quick():
    """benchmarks/validation/pirate_one_run.py --quick: both curves of the lookup kernel, side by side."""
    out = _quick("pirate_one_run.py")
    row = re.compile(r"^(?:lookup .* table)?\s+(\d+)" + r"\s+([\d.]+)" * 3 + r"\s+([+-][\d.]+)" * 2)
    rows = [m.groups() for m in map(row.match, out.splitlines()) if m]
    assert len(rows) == 3, out  # W = 0, half the knee, the knee
    assert rows[0][1:] == ("1.000",) * 3 + ("+0.000",) * 2, out  # slowdowns are against W = 0
    for _w, a, b, one, b_a, one_ab in rows:
        a, b, one = float(a), float(b), float(one)
        assert min(a, b, one) > 0 and float(b_a) == pytest.approx(b - a, abs=2e-3)
        assert float(one_ab) == pytest.approx(one - (a + b) / 2, abs=2e-3)
    assert "mean |one run - mean of A, B|" in out and "mean |B - A|" in out
    print(out)
