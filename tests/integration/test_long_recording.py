"""A 4-thread CPU-bound CPython program (many GIL hand-offs) recorded by the default collector keeps
every thread within the kernel's own figures at its exit: benchmarks/validation/long_recording.py --quick."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT, requires_recording


@requires_recording
@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed (the exit check needs it)")
def test_cpython_threads_stay_within_the_kernels_figures(tmp_path):
    out = tmp_path / "long.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "long_recording.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=600)
    figs = json.loads(out.read_text())
    [rec] = figs["recordings"]
    assert rec["asked"] == "auto" and rec["checked"], proc.stdout
    assert len(rec["threads"]) == 4, proc.stdout
    for t in rec["threads"]:
        assert abs(t["running_ns"] - t["on_cpu_ns"]) <= max(0.02 * t["on_cpu_ns"], 1e6), proc.stdout
        assert abs(t["runnable_ns"] - t["run_delay_ns"]) <= max(0.05 * t["run_delay_ns"], 1e6), proc.stdout
        assert t["on_cpu_ns"] > 0.2e9 and t["run_delay_ns"] > 0, proc.stdout  # the threads did spin and queue
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stdout + proc.stderr
