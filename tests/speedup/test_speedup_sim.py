import math

from scalestack.analysis.speedup import speedup_stack
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import barrier_imbalance


def test_simulated_barrier_waits_show_and_stack_adds_to_n():
    one = simulate(barrier_imbalance(2), cores=4).trace
    four = simulate(barrier_imbalance(5), cores=4).trace
    s = speedup_stack(one, four, 4)
    assert math.isclose(s.total(), 4.0, rel_tol=1e-9)
    assert s.sync > 0.5          # three workers wait at each barrier for the slow one
    assert s.cont == 0.0         # 5 threads, 4 cores, main blocked in join: no run queue


def test_validation_benchmark_quick(tmp_path):
    """In the simulator (no interference) the components explain all the lost speedup."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    out = tmp_path / "v.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validation" / "validate_speedup.py"), "--quick", "--json",
                           str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(out.read_text())["summary"]
    # acceptance: the estimated speedup within 3% of N, every component within 5% of N of the truth
    assert all(s["err_max"] < 3.0 and s["component_err_max"] < 5.0 for s in summary.values()), summary
    assert summary["gc-8"]["gc"] > 0.5 and summary["serial-8"]["seq"] > 0.5 and summary["locks-8"]["sync"] > 0.5
    assert summary["oversubscribed-8"]["cont"] > 0.4  # 8 workers + 2 GC threads on 4 cores
    # native programs (issue 27): the main thread participates, a coordinator feeds workers, barriers spin
    assert summary["participates-8"]["seq"] > 2.0 and summary["coordinator-8"]["seq"] > 0.5
    # the spin hid serial parts from the serial windows; booked from the passive twin, SEQ is that of the same
    # program without spinning
    assert abs(summary["spin-8"]["seq"] - summary["participates-8"]["seq"]) < 0.05
    assert all(summary[f"{k}-{n}"]["form"] == "native" for k in ("participates", "coordinator", "spin")
               for n in (2, 4, 8))


def test_phase_stacks_separate_the_serial_start_from_the_parallel_phase():
    from scalestack.analysis.speedup import phase_stacks
    from scalestack.sim.engine import simulate

    def wl(n):  # a serial start-up, then 4 M cycles split over n workers
        ths = [{"name": "main", "role": "main", "start": True,
                "ops": [["compute", 2_000_000]] + [["spawn", i] for i in range(1, n + 1)]
                + [["join", i] for i in range(1, n + 1)]}]
        ths += [{"name": f"w{i}", "role": "app", "start": False, "ops": [["compute", 4_000_000 // n]]}
                for i in range(n)]
        return {"threads": ths}

    one, four = simulate(wl(1), cores=4).trace, simulate(wl(4), cores=4).trace
    ph = phase_stacks(one, four, 4)
    assert set(ph) == {"before", "parallel"}
    assert abs(ph["parallel"].speedup - 4.0) < 0.01  # the parallel phase scales perfectly
    assert abs(ph["before"].speedup - 1.0) < 0.01 and ph["before"].seq > 2.9  # the start-up does not scale at all
    for st in ph.values():
        assert abs(st.total() - 4) < 1e-9
