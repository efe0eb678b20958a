"""The Python API the README shows runs as written (on a saved simulated trace)."""

from __future__ import annotations

import re
from pathlib import Path

import scalestack
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import lock_critical

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_block_runs(tmp_path, monkeypatch):
    block = re.search(r"## From Python.*?```python\n(.*?)```", README.read_text(), re.S)
    assert block, "the README has no Python example"
    code = block.group(1)
    assert "scalestack.load(" in code and "scalestack.criticality(" in code
    monkeypatch.chdir(tmp_path)
    scalestack.save(simulate(lock_critical(3), cores=2).trace, "run.sst")
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    trace = namespace["trace"]
    assert len(trace.threads) >= 2
    assert (tmp_path / "copy.sst").exists()
    again = scalestack.load("copy.sst")
    assert again.equals(trace)
    crit = scalestack.criticality(again)
    assert 0.99 < crit.share.sum() <= 1 + 1e-9  # shares of the run time (idle time aside)
