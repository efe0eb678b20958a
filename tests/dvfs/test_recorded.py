"""A real recording: epochs from scheduler events, and the one-line 'counters unavailable' notice."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import scalestack
from scalestack.analysis import dvfs

from ..conftest import requires_recording


@requires_recording
def test_recorded_program_gives_epochs_and_says_what_is_impossible(c_programs, tmp_path):
    out = tmp_path / "bi.trace"
    trace = scalestack.record([str(c_programs["barrier_imbalance"]), "8", "3000000", "3"], str(out))
    ep = dvfs.from_trace(trace, 2.0)
    assert len(ep.t0_ns) > 3 and np.all(ep.length_ns > 0) and not ep.has_counters
    res = dvfs.predict(ep, 4.0)
    assert res.predicted_ns["all on-CPU time scales"] < res.predicted_ns["nothing scales"] == ep.measured_ns
    p = subprocess.run([sys.executable, "-m", "scalestack.cli", "dvfs", str(out), "--from", "2GHz", "--to", "4GHz"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    notice = [ln for ln in p.stderr.splitlines() if "impossible" in ln]
    assert len(notice) == 1
    if dvfs.counter_support() is not None:  # this VM: no PMU
        assert "hardware counters are unavailable on this machine" in notice[0]
    assert "nothing scales" in p.stdout
