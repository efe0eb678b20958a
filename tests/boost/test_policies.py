"""Critical-thread boosting (thesis §7, spec §5b-5c): the slice rules step by step, the reactive
rules, the policies in the simulator, and the validation benchmark."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from scalestack.sim.engine import simulate
from scalestack.sim.policies import BIS, BoostCritical, run_policy
from scalestack.sim.workloads import barrier_imbalance, bfs, random_workload, streamcluster
from scalestack.trace import State

from ..conftest import ROOT


def test_slice_rules_step_by_step():
    p = BoostCritical(base=2.0, boost=2.5, alpha=1.2, beta=0.8)
    # no boost yet; thread 0 is 2.5x as critical as the least: boost it
    assert p.slice_rule(10, np.array([5.0, 2.0, 2.0])) == {0: 2.5} and p.f == 0
    # thread 1 became the most critical, 2.5x the least of the others: the boost moves
    assert p.slice_rule(20, np.array([2.0, 5.0, 2.0])) == {0: 2.0, 1: 2.5} and p.f == 1
    # nearly even (3.2 / 3 < alpha) and the boosted one is still the max: keep it
    assert p.slice_rule(30, np.array([3.0, 3.2, 3.0])) == {} and p.f == 1
    # no other thread stands out (5 / 5), but the boosted one fell below beta of the max: unboost
    assert p.slice_rule(40, np.array([5.0, 3.0, 5.0])) == {1: 2.0} and p.f is None
    assert p.boosted_ns == 30  # one thread or another boosted from 10 to 40
    # nothing ran in the slice: nothing changes
    assert p.slice_rule(50, np.zeros(3)) == {}


def test_counters_reset_every_slice():
    p = BoostCritical()
    assert p.decide(10, np.array([5.0, 1.0, 1.0]), [2.0] * 3) == {0: 2.5}
    # cumulative counters: this slice added 1, 9, 1 -> thread 1 is the critical one now
    assert p.decide(20, np.array([6.0, 10.0, 2.0]), [2.0] * 3) == {0: 2.0, 1: 2.5}


def test_reactive_rules():
    p = BoostCritical()
    # (ii) a thread left running alone is boosted at once
    assert p.react(5, [False, True, False], [2.0] * 3) == {1: 2.5} and p.f == 1
    # (i) the boosted thread is descheduled: its core drops to base
    assert p.react(7, [True, False, True], [2.0] * 3) == {1: 2.0} and p.f is None
    p.react(8, [False, True, False], [2.0] * 3)
    # descheduled while another is left alone: drop and boost the lone one in the same instant
    assert p.react(9, [False, False, True], [2.0] * 3) == {1: 2.0, 2: 2.5} and p.f == 2
    assert BoostCritical(reactive=False).react(1, [True, False, False], [2.0] * 3) is None


def test_busy_time_per_frequency_is_the_running_time():
    res = run_policy(bfs(5), "boost-critical", cores=5, slice_ns=20_000).result
    st = res.trace.states
    running = int(st.duration_ns[st.state == State.RUNNING].sum())
    busy = res.truth["busy_ns_by_freq"]
    assert set(busy) == {2.0, 2.5} and abs(sum(busy.values()) - running) <= len(res.trace.threads)


def test_dynamic_boosting_wins_with_barriers_and_bis_with_critical_sections():
    # thesis ch. 7: criticality boosting wins on barrier-heavy programs, BIS on critical-section-dominated ones
    wl = barrier_imbalance(9)
    ref = simulate(wl, cores=9)
    dyn = run_policy(wl, "boost-critical", cores=9, reference=ref, slice_ns=ref.runtime_ns // 50)
    bis = run_policy(wl, "bis", cores=9, reference=ref)
    assert dyn.speedup > bis.speedup > 1.0
    wl = streamcluster(9)
    ref = simulate(wl, cores=9)
    dyn = run_policy(wl, "boost-critical", cores=9, reference=ref, slice_ns=ref.runtime_ns // 50)
    bis = run_policy(wl, "bis", cores=9, reference=ref)
    assert bis.speedup > dyn.speedup and bis.speedup > 1.1


@pytest.mark.parametrize("policy", ["none", "all-up", "boost-critical", "offline", "bis"])
def test_every_policy_is_bounded_by_all_up(policy):
    wl = random_workload(8, 3)
    ref = simulate(wl, cores=8)
    up = run_policy(wl, "all-up", cores=8, reference=ref)
    res = run_policy(wl, policy, cores=8, reference=ref, slice_ns=ref.runtime_ns // 50)
    assert 0.99 <= res.speedup <= up.speedup * 1.001
    assert 0 <= res.boosted_share <= 1
    if policy == "none":
        assert res.speedup == 1.0 and res.energy == 1.0


def test_cli_policy_and_benchmark(tmp_path):
    out = subprocess.run([sys.executable, "-m", "scalestack.cli", "sim", "run", "bfs", "--policy", "boost-critical",
                          "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["policy_speedup"] > 1.0 and 0 < d["time_boosted_share"] <= 1
    bad = subprocess.run([sys.executable, "-m", "scalestack.cli", "sim", "run", "bfs", "--policy", "fastest"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "fastest" in bad.stderr
    js = tmp_path / "b.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "validate_boosting.py"), "--quick", "--json",
                           str(js)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads(js.read_text())["summary"]
    assert s["barrier-heavy"]["dynamic_wins"] > s["barrier-heavy"]["bis_wins"]
    assert s["critical-section"]["bis_wins"] > s["critical-section"]["dynamic_wins"]
    assert s["critical-section"]["bis_pct"] > s["critical-section"]["boost_critical_pct"]
    assert "thesis" in proc.stdout


def test_bis_boosts_the_lock_holder():
    p = BIS()
    p.attach(owner={0: 2}, waiters={0: [0, 1]}, arrived={}, workload={"threads": [{"ops": []}] * 3})
    assert p.react(1, [False, False, True], [2.0] * 3) == {2: 2.5}
    p.attach(owner={}, waiters={}, arrived={7: [0, 1]}, workload={"threads": [{"ops": [["barrier", 7, 3]]}] * 3})
    assert p.react(2, [False, False, True], [2.0] * 3) == {}  # still thread 2: the last one at the barrier


def test_cli_alpha_is_passed_to_the_policy():
    def boosted(alpha):
        out = subprocess.run([sys.executable, "-m", "scalestack.cli", "sim", "run", "lock_critical", "--threads", "9",
                              "--cores", "9", "--policy", "boost-critical", "--alpha", str(alpha), "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["time_boosted_share"]

    # with an unreachable alpha only the reactive rules boost (a lone thread): less time boosted
    assert boosted(100.0) < boosted(1.2)
