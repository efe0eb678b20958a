"""The analysis throughput benchmark's quick mode runs and prints its rates."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import ROOT


def test_analysis_throughput_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speed" / "analysis_throughput.py"), "--quick"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sum(line.endswith("M intervals/s") for line in proc.stdout.splitlines()) == 3
    assert "peak memory" in proc.stdout
