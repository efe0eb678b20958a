"""The overhead benchmark's quick mode runs and prints a figure for every program."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..conftest import ROOT, requires_recording

pytestmark = requires_recording


def test_overhead_quick(tmp_path: Path):
    out = tmp_path / "overhead.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speed" / "overhead.py"), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert any(k.startswith("futex-heavy") for k in figures)
    for name, r in figures.items():
        assert r["recorded_s"] > 0 and r["plain_s"] > 0, name
        assert r["lost"] == 0, name
    assert "slowdown" in proc.stdout
