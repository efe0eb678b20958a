"""The §5b rules acting inside the simulator on a hand-made 3-thread program, step by step.

Three threads on three cores, base 2 GHz (2 cycles/ns), boost 2.5 GHz, slices of 1 ms. Every
expected instant below is worked out by hand in the comments, so a change to the rules or to
how the engine feeds them shows up as a wrong time or a wrong thread.
"""

from __future__ import annotations

from scalestack.sim.engine import simulate
from scalestack.sim.policies import BoostCritical

MS = 1_000_000


def _program(phases: list[list[int]]) -> dict:
    """Thread k computes phases[p][k] cycles, then meets the others at barrier p."""
    return {"name": "handmade", "threads": [
        {"name": f"t{k}", "start": True,
         "ops": [op for p, ph in enumerate(phases) for op in (["compute", ph[k]], ["barrier", p, 3])]}
        for k in range(3)]}


class _Log(BoostCritical):
    """BoostCritical that writes down every frequency change it asks for."""

    def __init__(self, **kw):
        super().__init__(base=2.0, boost=2.5, slice_ns=MS, **kw)
        self.log: list[tuple[int, dict[int, float]]] = []

    def _move(self, now, to):
        change = super()._move(now, to)
        if change:
            self.log.append((now, change))
        return change


def test_slice_rules_in_the_simulator_boost_then_unboost_then_boost_another():
    # phase 0: t0, t1 4e6 / 4.4e6 cycles (2 / 2.2 ms), t2 1e6 (0.5 ms); phase 1: t2 has the long part
    p = _Log(reactive=False)
    res = simulate(_program([[4_000_000, 4_400_000, 1_000_000], [1_000_000, 1_000_000, 4_000_000]]),
                   cores=3, freq_ghz=2.0, policy=p)
    # slice [0, 1 ms]: three run for 0.5 ms, then t0 and t1: c = 5/12, 5/12, 1/6 ms; 2.5 > alpha:
    #   boost the most critical (t0, the first of the tie)
    # t0 has 2e6 cycles left: 0.8 ms at 2.5 GHz, so it waits at the barrier from 1.8 ms (no reactive
    #   rule here: it keeps the boost); t1 runs alone until 2.2 ms
    # slice [1, 2 ms]: c = t0 0.4, t1 0.6, t2 0 (did not run, left out); the other (t1) does not
    #   stand out over itself, but t0 < beta * 0.6: unboost at 2 ms
    # slice [2, 3 ms]: t1 alone 0.2, three for 0.5, t2 alone 0.3 (t0, t1 are done at 2.7 ms):
    #   c = 1/6, 11/30, 7/15; 7/15 / (1/6) = 2.8 > alpha: boost t2 at 3 ms
    assert p.log == [(1 * MS, {0: 2.5}), (2 * MS, {0: 2.0}), (3 * MS, {2: 2.5})]
    # t2: 1e6 cycles done by 2.7 ms, 0.6 ms more at 2 GHz: 2.4e6 left at 2.5 GHz = 0.96 ms -> 3.96 ms
    assert res.runtime_ns == 3_960_000
    p.finish(res.runtime_ns)
    assert p.boosted_ns == 1 * MS + 960_000


def test_reactive_rules_in_the_simulator_lone_thread_and_deschedule():
    # phase 0: t0 6e6 cycles, t1, t2 3e6; phase 1: t1 5e6, t0, t2 1e6
    p = _Log(reactive=True)
    res = simulate(_program([[6_000_000, 3_000_000, 3_000_000], [1_000_000, 5_000_000, 1_000_000]]),
                   cores=3, freq_ghz=2.0, policy=p)
    # slice [0, 1 ms]: even, no boost. At 1.5 ms t1 and t2 wait at the barrier: t0 runs alone and is
    #   boosted at once (reactive rule ii); 3e6 cycles left at 2.5 GHz: it reaches the barrier at 2.7 ms
    # slices at 2 and 3 ms: t0 is the boosted and the most critical thread: nothing changes
    # phase 1 from 2.7 ms: t0 (boosted) finishes 1e6 cycles in 0.4 ms and waits at 3.1 ms: its boost
    #   is dropped (rule i); t2 waits at 3.2 ms, leaving t1 alone: boosted (rule ii)
    # slice at 4 ms: t1 (boosted) is the most critical (0.88 of 1 ms): kept; it exits at 4.8 ms: dropped
    assert p.log == [(1_500_000, {0: 2.5}), (3_100_000, {0: 2.0}), (3_200_000, {1: 2.5}),
                     (4_800_000, {1: 2.0})]
    # t1: 0.5 ms at 2 GHz (1e6 cycles), 4e6 left at 2.5 GHz = 1.6 ms -> 4.8 ms
    assert res.runtime_ns == 4_800_000
    busy = res.truth["busy_ns_by_freq"]
    # boosted running: t0 1.5-2.7 and 2.7-3.1 ms, t1 3.2-4.8 ms
    assert busy[2.5] == 1_200_000 + 400_000 + 1_600_000
