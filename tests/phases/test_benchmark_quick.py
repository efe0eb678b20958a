"""benchmarks/validation/validate_phases.py --quick runs and prints its figures."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import ROOT


def test_validate_phases_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "validate_phases.py"), "--quick"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ("right k:", "adjusted Rand index:", "std-dev reduction within phases:", "mean error",
                   "thread-count sweep", "clustering 200000 intervals"):
        assert needle in out, out
