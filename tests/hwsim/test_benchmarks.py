"""The hwsim benchmarks run in their --quick modes and print their tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_validate_quick():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/validate_cycle_accounting.py"), "--quick",
                          "--mixes", "2", "--accesses", "5000"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "share of interference captured at 8 cores" in res.stdout
    assert "+ prefetching" in res.stdout
    assert "avg |S^ - S| / N" in res.stdout
    assert "classification tree" in res.stdout


def test_speed_quick():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/speed/hwsim_speed.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "M acc/s" in res.stdout


def test_sampling_quick():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/hwsim_sampling.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "atd_sets=spread" in res.stdout and "atd_sets=aligned" in res.stdout
    assert "scaled inter / full" in res.stdout
