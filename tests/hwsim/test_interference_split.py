"""The LLC / memory interference split benchmark runs in its --quick mode and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from scalestack.hwsim import HwConfig

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))


def test_fixed_latency_memory_has_no_memory_part():
    from hwsim_interference_split import pool, split

    # fixed-latency memory has no shared state: the true memory part and its estimate are both zero,
    # and the whole slowdown is the LLC's
    a = split(2, 4, pool(6000), HwConfig(full_atd=True, prefetch=False, fixed_latency=True, l1_bytes=4096,
                                         llc_bytes=64 << 10))
    assert np.all(a[:, 3] == 0) and np.all(a[:, 2] == 0)
    assert np.allclose(a[:, 5], a[:, 1] - a[:, 0]) and (a[:, 5] > 0).any()


def test_quick():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/hwsim_interference_split.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = res.stdout.strip().splitlines()
    assert "memory est/true" in res.stdout and len(out) == 11  # header + 2 variants x (blank, name, header, 2 rows)
    assert "thesis" in out and "inter-wait-to-memory" in out
