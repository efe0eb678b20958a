"""The ingest benchmark's quick mode runs and prints the rates it compares."""

from __future__ import annotations

import json
import subprocess
import sys

from ..conftest import ROOT, requires_recording


@requires_recording
def test_ingest_quick(tmp_path):
    out = tmp_path / "ingest.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speed" / "ingest.py"), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(out.read_text()).values()
    assert row["events"] > 1000 and row["read_ev_s"] > 0 and row["to_trace_ev_s"] > 0 and row["perf_script_ev_s"] > 0
    assert row["text_to_trace_ev_s"] > 0 and row["peak_bytes"] >= row["baseline_bytes"] > 0
    assert row["part_import_s"] > 0 and row["part_import_peak_bytes"] > 0
    assert row["crit_s"] > 0 and row["crit_peak_bytes"] > 0 and row["advise_s"] > 0 and row["advise_peak_bytes"] > 0
    passes = row["passes_s"]  # every pass timed, the reconciliation both ways
    assert set(passes) == {"read", "walk", "thread order", "reconcile", "reconcile_one_worker", "steals",
                           "futex wakers", "join", "finish", "save"} and all(v > 0 for v in passes.values()), passes
    assert "where perf.data -> saved Trace goes" in proc.stdout
