"""Energy manager against the simulator, the `scalestack dvfs` command and the benchmark's quick mode."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import scalestack
from scalestack.analysis import dvfs
from scalestack.analysis.dvfs_manager import cut_epochs, manage, simulate_schedule
from scalestack.analysis.power import dvfs_states
from scalestack.cli import cli
from scalestack.sim.dvfs_workloads import java_like
from scalestack.sim.engine import simulate

from ..conftest import ROOT


@pytest.fixture(scope="module")
def mem_run():
    wl = java_like("mem", 11, gcs=20)
    return wl, dvfs.from_sim(simulate(wl, cores=4, freq_ghz=4.0))


def test_cut_epochs_keeps_totals_and_identity(mem_run):
    _, ep = mem_run
    cut = cut_epochs(ep, ep.t0_ns[0] + 1e6 * np.arange(1, 40))
    assert len(cut.t0_ns) > len(ep.t0_ns)
    for a, b in ((ep.a_ns, cut.a_ns), (ep.n_ns["crit"], cut.n_ns["crit"]), (ep.b_ns, cut.b_ns)):
        assert b.sum() == pytest.approx(a.sum(), rel=1e-9)
    assert cut.stall.sum() == ep.stall.sum()
    assert dvfs.dep(cut, 4.0)[0].sum() == pytest.approx(ep.measured_ns, rel=1e-9)


@pytest.mark.parametrize("s", [0.05, 0.10])
@pytest.mark.parametrize("reactive", [True, False])
def test_manager_within_bound_on_ground_truth_and_saves(mem_run, s, reactive):
    wl, ep = mem_run
    res = simulate_schedule(wl, manage(ep, s, reactive=reactive))
    assert res.true_slowdown <= s + 0.01
    assert res.true_saving > 0.05  # memory-intensive: lower frequencies cost little time
    assert set(f for _, f, *_ in res.schedule) <= set(dvfs_states().tolist())
    assert abs(res.true_saving - res.predicted_saving) < 0.03


def test_zero_bound_keeps_fmax(mem_run):
    _, ep = mem_run
    res = manage(ep, 0.0, reactive=False)
    assert {f for _, f, *_ in res.schedule} == {4.0}
    assert res.predicted_saving == pytest.approx(0.0) and res.transitions == 0


def test_compute_bound_saves_less_than_memory_bound(mem_run):
    wl_c = java_like("compute", 11, gcs=20)
    ep_c = dvfs.from_sim(simulate(wl_c, cores=4, freq_ghz=4.0))
    assert manage(ep_c, 0.1).predicted_saving < manage(mem_run[1], 0.1).predicted_saving


def run(*args):
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.output


def test_cli_predict_json_matches_api():
    code, out = run("dvfs", "sim:gc_heavy", "--from", "1GHz", "--to", "4000MHz", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["f_base_ghz"] == 1.0 and d["f_target_ghz"] == 4.0
    assert abs(d["predicted_ns"]["DEP+BURST"] - d["true_ns"]) / d["true_ns"] < 1e-3
    assert d["critical_path"]


def test_cli_text_and_manager(tmp_path):
    code, out = run("dvfs", "sim:java_store", "--to", "1GHz", "--export-jsonl", str(tmp_path / "e.jsonl"))
    assert code == 0 and "critical-thread path" in out and "true (simulator)" in out
    code, out2 = run("dvfs", str(tmp_path / "e.jsonl"), "--to", "1GHz")
    mcrit = [next(ln for ln in o.splitlines() if ln.startswith("M+CRIT")) for o in (out, out2)]
    assert code == 0 and mcrit[0].startswith(mcrit[1])  # the same prediction from the exported file
    code, out = run("dvfs", "sim:java_mem", "--max-slowdown", "10%", "-o", str(tmp_path / "ed.png"))
    assert code == 0 and "energy saved" in out and (tmp_path / "ed.png").stat().st_size > 1000


def test_cli_trace_without_counters_says_which_predictions_are_impossible(tmp_path):
    path = str(tmp_path / "r.trace")
    scalestack.save(simulate(java_like("lock", 2), cores=4, freq_ghz=2.0).trace, path)
    p = subprocess.run([sys.executable, "-m", "scalestack.cli", "dvfs", path, "--from", "2GHz", "--to", "4GHz"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "impossible" in ln]
    assert len(lines) == 1 and "DEP+BURST" in lines[0] and "counter" in lines[0]
    assert "nothing scales" in p.stdout
    p = subprocess.run([sys.executable, "-m", "scalestack.cli", "dvfs", path, "--from", "2GHz", "--max-slowdown",
                        "5%"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "scalestack: error: the energy manager needs" in p.stderr


@pytest.mark.parametrize("args", [["--to", "fast"], [], ["--to", "4GHz", "--max-slowdown", "five"]])
def test_cli_user_errors(args):
    p = subprocess.run([sys.executable, "-m", "scalestack.cli", "dvfs", "sim:gc_heavy", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("scalestack: error: ")


def test_benchmark_quick():
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "validate_dvfs.py"), "--quick"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("DEP+BURST  "))
    assert float(row.split()[1].rstrip("%")) < 6.0
    assert "energy manager" in p.stdout
    over = {ln.split("rule ")[1].split(":")[0]: ln for ln in p.stdout.splitlines() if ln.startswith("runs over bound")}
    assert set(over) == {"paper", "run"} and over["run"].endswith(": 0 of 24")  # the default keeps the bound


@pytest.mark.parametrize("s", [0.05, 0.10])
def test_online_manager_in_the_simulator(mem_run, s):
    from scalestack.analysis.dvfs_manager import run_online

    wl, _ = mem_run
    res = run_online(wl, s)
    assert res.true_slowdown <= s + 0.01
    assert res.true_saving > 0.05 and res.transitions > 0
    assert abs(res.predicted_slowdown - res.true_slowdown) < 0.02  # its own estimate


def test_online_manager_zero_bound_never_changes_frequency(mem_run):
    from scalestack.analysis.dvfs_manager import run_online

    res = run_online(mem_run[0], 0.0)
    assert res.transitions == 0 and res.true_slowdown == pytest.approx(0.0)
    assert {f for _, f, *_ in res.schedule} == {4.0}
