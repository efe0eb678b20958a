"""benchmarks/validation/eklov_nosync_gap.py --quick: the diagnosis builds of ub-tiny compile and run, every
variant is printed for N = 1 and 2, and where nothing contends (N = 1) the shim's CPU-time no-sync
estimate matches the sync-free build (a lock that never waits must cost the estimate nothing)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT


@pytest.mark.skipif(shutil.which("gcc") is None or len(os.sched_getaffinity(0)) < 2, reason="needs gcc and two CPUs")
def test_nosync_gap_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "eklov_nosync_gap.py"), "--quick"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    blocks = re.split(r"^ub-tiny, N = (\d):.*$", out, flags=re.M)
    assert blocks[1::2] == ["1", "2"], out
    for body in blocks[2::2]:
        names = [ln.split()[0] for ln in body.splitlines() if ln.startswith("  ") and not ln.startswith("  speedup")]
        assert names == ["sync", "nosync", "bounce", "fence", "pin", "pin-ns"], out
    sync1 = re.search(r"^  sync .* CPU\s+([+-]\d+\.\d)% ", blocks[2], flags=re.M)
    assert sync1 and abs(float(sync1.group(1))) < 5.0, out
    assert "speedup at N = 2: wall S_nosync" in out
    print(out)
