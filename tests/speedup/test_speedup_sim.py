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
