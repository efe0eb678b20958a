"""Frequency policies that act on criticality (thesis ch. 7, spec thesis-methods.md §5b-5c).

Each policy runs inside the workload simulator and sets per-thread frequencies: a boosted thread
runs at `boost` GHz, every other one at `base`. The chip may boost one core at a time (the
thesis's TDP limit), so the dynamic policies boost at most one thread.

* `none`: everything at base; the reference run.
* `all-up`: every thread at the boost frequency (more energy, the upper bound on speed).
* `boost-critical` (`BoostCritical`): the thesis's online algorithm. Every 10 ms slice the
  criticality counters of the slice are compared (α = 1.2, β = 0.8): boost the most critical
  thread when max/min > α, move the boost when another thread has become more critical, unboost
  when the boosted thread's criticality falls below β of the maximum. Two reactive rules act at
  once between slices: a boosted thread that is descheduled loses the boost, and a thread left
  running alone gets it.
* `offline`: profile one run at base, then boost its most critical thread for the whole run.
* `bis` (`BIS`): bottleneck identification (Joao et al., as the thesis compared it, boosting
  instead of migrating): at every change of which threads run, boost the holder of the lock
  with the most waiters, or the last thread a barrier still waits for.

`run_policy` returns the run's time, energy (from `scalestack.analysis.power`) and time spent boosted,
each normalised to the `none` run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scalestack.analysis.power import PowerModel
from scalestack.sim.engine import TID_BASE, Policy, SimResult, simulate

POLICIES = ("none", "all-up", "boost-critical", "offline", "bis")


class _OneBoost(Policy):
    """Shared bookkeeping: which thread holds the boost, and for how long it was held."""

    def __init__(self, base: float, boost: float):
        self.base, self.boost = base, boost
        self.f: int | None = None  # the boosted thread
        self.since = 0
        self.boosted_ns = 0

    def _move(self, now: int, to: int | None) -> dict[int, float]:
        if to == self.f:
            return {}
        change: dict[int, float] = {}
        if self.f is not None:
            change[self.f] = self.base
            self.boosted_ns += now - self.since
        if to is not None:
            change[to] = self.boost
            self.since = now
        self.f = to
        return change

    def finish(self, end: int) -> None:
        if self.f is not None:
            self.boosted_ns += end - self.since
            self.f = None


class BoostCritical(_OneBoost):
    """The thesis's dynamic criticality boosting (§5b), one boosted thread at a time."""

    def __init__(self, base: float = 2.0, boost: float = 2.5, slice_ns: int = 10_000_000, alpha: float = 1.2,
                 beta: float = 0.8, reactive: bool = True):
        super().__init__(base, boost)
        self.period_ns = slice_ns
        self.alpha, self.beta, self.reactive = alpha, beta, reactive
        self.last: np.ndarray | None = None

    def slice_rule(self, now: int, c: np.ndarray) -> dict[int, float]:
        """The end-of-slice rule on this slice's criticality counters `c` (one per thread)."""
        live = c > 0  # threads that ran in the slice
        if not np.any(live):
            return {}
        top = int(np.argmax(c))
        if self.f is None:
            return self._move(now, top) if c[top] / c[live].min() > self.alpha else {}
        others = live.copy()
        others[self.f] = False
        if np.any(others) and c[top] / c[others].min() > self.alpha:
            return self._move(now, top)
        if c[self.f] / c[top] < self.beta:
            return self._move(now, None)
        return {}

    def decide(self, now_ns, criticality_ns, freq_ghz):
        c = criticality_ns - (self.last if self.last is not None else 0)  # counters reset each slice
        self.last = criticality_ns
        return self.slice_rule(now_ns, c)

    def react(self, now_ns, active, freq_ghz):
        if not self.reactive:
            return None
        if self.f is not None and not active[self.f]:  # (i) the boosted thread was descheduled
            return self._move(now_ns, None) | self._lone(now_ns, active)
        return self._lone(now_ns, active)

    def _lone(self, now: int, active: list[bool]) -> dict[int, float]:
        running = [j for j, a in enumerate(active) if a]
        if len(running) == 1 and running[0] != self.f:  # (ii) one thread left running: boost it
            return self._move(now, running[0])
        return {}


class BIS(_OneBoost):
    """Boost the holder of the most contended lock, or the last thread a barrier waits for."""

    period_ns = 10**18  # reacts to events only

    def __init__(self, base: float = 2.0, boost: float = 2.5):
        super().__init__(base, boost)
        self.state: dict[str, Any] = {}
        self.members: dict[int, set[int]] = {}

    def attach(self, **state):
        self.state = state
        for i, th in enumerate(state["workload"]["threads"]):
            for op in th["ops"]:
                if op[0] == "barrier":
                    self.members.setdefault(int(op[1]), set()).add(i)

    def react(self, now_ns, active, freq_ghz):
        best, score = None, 0
        for m, q in self.state["waiters"].items():
            holder = self.state["owner"].get(m)
            if q and holder is not None and len(q) > score:
                best, score = holder, len(q)
        for b, arrived in self.state["arrived"].items():
            missing = self.members.get(b, set()) - set(arrived)
            if len(missing) == 1 and len(arrived) > score:
                best, score = next(iter(missing)), len(arrived)
        if best is not None and not active[best]:
            best = None if self.f is None or not active[self.f] else self.f
        return self._move(now_ns, best)


@dataclasses.dataclass(frozen=True)
class PolicyRun:
    policy: str
    runtime_ns: int
    speedup: float  # over the `none` run
    energy: float  # normalised to the `none` run
    boosted_share: float  # of the run time with a thread boosted (all-up: 1)
    result: SimResult


def _energy(res: SimResult, cores: int, base: float, model: PowerModel) -> float:
    return model.energy_j(res.truth["busy_ns_by_freq"], res.runtime_ns, cores, idle_ghz=base)


def run_policy(workload: dict, policy: str, *, cores: int = 4, base: float = 2.0, boost: float = 2.5,
               slice_ns: int = 10_000_000, alpha: float = 1.2, beta: float = 0.8, timeslice_ns: int = 0,
               reference: SimResult | None = None, model: PowerModel | None = None) -> PolicyRun:
    """Simulate `workload` under a named policy; time and energy relative to all-base."""
    from scalestack.analysis.criticality import criticality
    from scalestack.errors import UserError

    if policy not in POLICIES:
        raise UserError(f"unknown policy {policy!r}; choose one of: {', '.join(POLICIES)}")
    model = model or PowerModel()
    n = len(workload["threads"])
    ref = reference or simulate(workload, cores=cores, freq_ghz=base, timeslice_ns=timeslice_ns)
    boosted = 0.0
    if policy == "none":
        res = ref
    elif policy == "all-up":
        res = simulate(workload, cores=cores, freq_ghz=boost, timeslice_ns=timeslice_ns)
        boosted = 1.0
    elif policy == "offline":
        cr = criticality(ref.trace)
        top = int(cr.tids[cr.order[0]]) - TID_BASE
        res = simulate(workload, cores=cores, freq_ghz={j: boost if j == top else base for j in range(n)},
                       timeslice_ns=timeslice_ns)
        boosted = 1.0
    else:
        pol = (BoostCritical(base, boost, slice_ns, alpha, beta) if policy == "boost-critical" else BIS(base, boost))
        res = simulate(workload, cores=cores, freq_ghz=base, timeslice_ns=timeslice_ns, policy=pol)
        pol.finish(res.runtime_ns)
        boosted = pol.boosted_ns / max(res.runtime_ns, 1)
    e_ref = _energy(ref, cores, base, model)
    return PolicyRun(policy, res.runtime_ns, ref.runtime_ns / res.runtime_ns,
                     _energy(res, cores, base, model) / e_ref, min(boosted, 1.0), res)
