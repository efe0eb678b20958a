"""A perf.data recorded with plain `perf record -a` imports as the chosen program's Trace."""

from __future__ import annotations

import subprocess
import sys

import scalestack
from scalestack.trace.events import RECORD_TRACEPOINTS

from ..conftest import requires_recording

pytestmark = requires_recording


def test_import_perf_data_by_name(c_programs, tmp_path):
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(c_programs["barrier_imbalance"]), "4", "2000000", "3"],
                   check=True, capture_output=True)
    def run(*args):
        return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True)

    listing = run("import", str(data), "--list")
    assert listing.returncode == 0 and "barrier_imbalan" in listing.stdout
    proc = run("import", str(data), "--comm", "barrier_imbalan", "-o", str(tmp_path / "b.trace"))
    assert proc.returncode == 0, proc.stderr
    trace = scalestack.load(tmp_path / "b.trace")
    trace.validate()
    assert trace.meta["source"] == "perf-data" and len(trace.threads) == 3
    assert scalestack.criticality(trace).share.max() > 0.5
