"""benchmarks/validation/eklov_validate.py --quick runs and prints the ub table and three real-program stacks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_eklov_validate_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "eklov_validate.py"), "--quick"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for ub in ("tiny", "rnd", "seq"):
        row = re.search(rf"^\s+{ub}\s+2\s+([\d.]+)\s+([\d.]+)\s+([+-][\d.]+)%\s+([\d.]+)\s+([\d.]+)\s+([+-][\d.]+)%",
                        out, re.M)
        assert row, out
        assert float(row[4]) > 0 and float(row[5]) > 0
    stacks = re.findall(r"^speedup stack of (\S+)", out, re.M)
    installed = [p for p in ("zstd", "xz", "sort") if shutil.which(p)]
    assert stacks == installed
    assert out.count("condition variable") >= len(installed)
