"""Per-phase criticality and its capped gain: a hand-computed two-phase case, formulas, invariants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.criticality import criticality
from scalestack.analysis.phase_criticality import capped_gain, phase_criticality, sync_phase_bounds
from scalestack.errors import UserError
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import fig32, random_workload

ROOT = Path(__file__).resolve().parents[2]


def two_phase() -> dict:
    """Worker 0 is critical in phase 1 (100 vs 60, 50 ns), worker 1 in phase 2 (80 vs 10, 50 ns)."""
    work = [(100, 10), (60, 80), (50, 50)]
    return {"name": "two_phase", "threads": [
        {"name": f"w{i}", "start": True, "ops": [["compute", a], ["barrier", 0, 3], ["compute", b]]}
        for i, (a, b) in enumerate(work)]}


def run(wl, fast=None):
    n = len(wl["threads"])
    return simulate(wl, cores=n, freq_ghz={j: 2.0 if j == fast else 1.0 for j in range(n)})


def test_two_phase_hand_computed():
    base = run(two_phase())
    assert base.runtime_ns == 180
    tr = base.trace
    assert sync_phase_bounds(tr).tolist() == [0, 100, 180]  # the barrier release; starts/exits do not cut here
    res = phase_criticality(tr, factor=2.0)
    # phase 1: r = 3 on [0,50), 2 on [50,60), 1 on [60,100); phase 2: 3 on [100,110), 2 to 150, 1 to 180
    exp = np.array([[50 / 3 + 5 + 40, 50 / 3 + 5, 50 / 3], [10 / 3, 10 / 3 + 20 + 30, 10 / 3 + 20]])
    assert np.allclose(res.criticality_ns, exp)
    # gains: worker 0 min(C/2, lead) in phase 1, worker 1 in phase 2, worker 2 never leads
    assert np.allclose(res.gain_ns, [min(exp[0, 0] / 2, exp[0, 0] - exp[0, 1]),
                                     min(exp[1, 1] / 2, exp[1, 1] - exp[1, 2]), 0.0])
    # ground truth: worker 0 at 2x saves 40 ns, worker 1 saves 30 ns
    real = [180 / run(two_phase(), i).runtime_ns for i in range(3)]
    assert real[0] == pytest.approx(180 / 140) and real[1] == pytest.approx(180 / 150)
    # whole-run criticality picks worker 1 (74.7 vs 65 ns), the per-phase gain picks worker 0
    assert criticality(tr).most_critical_tid == int(tr.threads.tid[1])
    assert res.best_tid == int(tr.threads.tid[int(np.argmax(real))])


def test_capped_gain_formula():
    assert capped_gain(np.array([[6.0, 2.0, 1.0]]), 2.0).tolist() == [[3.0, 0.0, 0.0]]
    assert capped_gain(np.array([[6.0, 5.0, 1.0]]), 2.0).tolist() == [[1.0, 0.0, 0.0]]
    assert capped_gain(np.array([[5.0, 5.0, 1.0]]), 2.0).tolist() == [[0.0, 0.0, 0.0]]  # a tie gains nothing
    assert capped_gain(np.array([[8.0]]), 4.0).tolist() == [[6.0]]  # one thread alone: C (1 - 1/F)


def test_fig32_single_phase_sums():
    tr = simulate(fig32(), cores=4, freq_ghz=1.0).trace
    res = phase_criticality(tr, bounds=np.array([tr.start_ns, tr.end_ns]))
    assert np.allclose(res.criticality_ns[0], [6500, 5000, 5000, 5500])
    assert np.allclose(res.gain_ns, [1000, 0, 0, 0])  # thread 0 leads thread 3 by 1 us < 3.25 us


def test_cuts_at_serial_releases_only():
    wl = {"threads": [
        {"name": "main", "start": True, "ops": [["compute", 50], ["spawn", 1], ["spawn", 2], ["join", 1],
                                                 ["join", 2], ["compute", 30]]},
        {"start": False, "ops": [["lock", 0], ["compute", 40], ["unlock", 0]]},
        {"start": False, "ops": [["lock", 0], ["compute", 40], ["unlock", 0]]}]}
    tr = simulate(wl, cores=3, freq_ghz=1.0).trace
    # spawn after main ran alone (50), lock hand-off in a serial chain (90), main resumes alone (130)
    assert sync_phase_bounds(tr).tolist() == [0, 50, 90, 130, 160]
    res = phase_criticality(tr)
    assert np.allclose(res.gain_ns, [40, 20, 20])  # every stretch is serial: C (1 - 1/F)
    # a lock hand-off while another thread runs does not cut: the program was not waiting for one thread
    par = {"threads": [{"start": True, "ops": [["lock", 0], ["compute", 40], ["unlock", 0], ["compute", 10]]},
                       {"start": True, "ops": [["compute", 20], ["lock", 0], ["compute", 40], ["unlock", 0]]},
                       {"start": True, "ops": [["compute", 100]]}]}
    assert sync_phase_bounds(simulate(par, cores=3, freq_ghz=1.0).trace).tolist() == [0, 100]


def test_rejects_factor_at_most_one():
    with pytest.raises(UserError):
        phase_criticality(run(two_phase()).trace, factor=1.0)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), threads=st.integers(4, 10), cores=st.integers(2, 10))
def test_phases_add_up_and_gain_is_bounded(seed, threads, cores):
    tr = simulate(random_workload(threads, seed), cores=cores).trace
    res = phase_criticality(tr, factor=2.0)
    assert np.allclose(res.criticality_ns.sum(axis=0), criticality(tr).criticality_ns, rtol=1e-9, atol=1e-3)
    assert np.all(res.gain_ns >= 0) and np.all(res.gain_ns <= res.criticality_ns.sum(axis=0) / 2 + 1e-6)
    # at most one thread gains in each phase (the one that leads it)
    assert np.all((capped_gain(res.criticality_ns, 2.0) > 0).sum(axis=1) <= 1)
    # each phase's stack equals criticality() restricted to it
    k = len(res.bounds_ns) // 2
    a, b = int(res.bounds_ns[k - 1]), int(res.bounds_ns[k])
    assert np.allclose(res.criticality_ns[k - 1], criticality(tr, between=(a, b)).criticality_ns, atol=1e-3)
    assert res.to_json()


def test_validate_criticality_quick_reports_classes_and_misses():
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/validate_criticality.py"), "--quick", "--misses"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for s in ("core/thread", "oversub.", "c/t stable", "capped gain per phase", "misses of largest criticality"):
        assert s in out
    line = next(x for x in out.splitlines() if x.startswith("(workloads)"))
    counts = [int(x) for x in line.split()[1:]]
    assert counts[0] == counts[1] + counts[2] == counts[3] + counts[4] + counts[5] + counts[6]


def test_serial_lock_convoy_is_cut_at_each_hand_off():
    # three threads queue on one lock and run one after another: whole-run criticality ties them
    # (40 ns each), but accelerating any of them 2x saves 20 ns; each serial stretch is its own phase
    wl = {"threads": [{"start": True, "ops": [["lock", 0], ["compute", 40], ["unlock", 0]]} for _ in range(3)]}
    tr = simulate(wl, cores=3, freq_ghz=1.0).trace
    assert np.allclose(criticality(tr).criticality_ns, [40, 40, 40])
    res = phase_criticality(tr)
    assert res.bounds_ns.tolist() == [0, 40, 80, 120]
    assert np.allclose(res.gain_ns, [20, 20, 20])
    real = [120 / simulate(wl, cores=3, freq_ghz={j: 2.0 if j == i else 1.0 for j in range(3)}).runtime_ns
            for i in range(3)]
    assert np.allclose(res.predicted_speedup, real)


def test_whatif_cli_prints_the_per_phase_estimate(tmp_path):
    import json

    from click.testing import CliRunner

    from scalestack.commands.whatif import command as whatif_cmd

    res = run(two_phase())
    path = tmp_path / "t.sstrace"
    scalestack.save(res.trace, str(path))
    r = CliRunner().invoke(whatif_cmd, [str(path), "--accelerate", str(int(res.trace.threads.tid[0])), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["phase_speedup"] == pytest.approx(phase_criticality(scalestack.load(str(path))).predicted_speedup[0])
    r = CliRunner().invoke(whatif_cmd, [str(path), "--accelerate", str(int(res.trace.threads.tid[0]))])
    assert r.exit_code == 0 and "per-phase estimate" in r.output
