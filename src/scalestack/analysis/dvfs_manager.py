"""DVFS energy manager: lowest frequencies within a slowdown bound (spec dep-burst.md §3.1).

The run is cut into quanta of Q (5 ms in the paper). For each quantum, DEP+BURST (across-epoch,
deltas reset at the quantum's start) predicts its time T'(f) at every DVFS state; the manager
picks the lowest f with T'(f) <= T'(f_max)(1 + s) + sigma, holds it for H quanta, and carries the
unused slack sigma = (T'(f_max)(1 + s) - T'(f)) H to the next decision (Eq. 1; `excess="bank"`
keeps a running sum, `"off"` none). `reactive=True` (the paper's online loop) applies the choice
made from quantum q to quantum q + 1; `False` applies it to q itself (an oracle bound).

Energy comes from `scalestack.power` (chip-wide DVFS: every core's leakage at the chosen V):
busy core time per quantum is the sum of the predicted per-thread times.

Ground truth (simulator only): `simulate_schedule` replays the workload with the chosen
frequencies placed at the predicted quantum ends in time, and measures time and energy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from scalestack.analysis import dvfs
from scalestack.power import F_MAX_GHZ, TRANSITION_NS, PowerModel, dvfs_states
from scalestack.results import Result


def cut_epochs(ep: dvfs.Epochs, cuts: np.ndarray) -> dvfs.Epochs:
    """Split epochs at `cuts` (ns); times are shared in proportion to length, no stall at a cut."""
    cuts = np.asarray(cuts, dtype=np.float64)
    if len(ep.t0_ns) == 0:
        return ep
    b = np.unique(np.concatenate([ep.t0_ns, ep.t1_ns[-1:], cuts[(cuts > ep.t0_ns[0]) & (cuts < ep.t1_ns[-1])]]))
    t0, t1 = b[:-1], b[1:]
    k = np.searchsorted(ep.t0_ns, t0, side="right") - 1
    frac = ((t1 - t0) / np.maximum(ep.length_ns[k], 1e-300))[:, None]
    last = np.r_[k[1:] != k[:-1], True]
    return dataclasses.replace(
        ep, t0_ns=t0, t1_ns=t1, active=ep.active[k], a_ns=ep.a_ns[k] * frac,
        n_ns={key: v[k] * frac for key, v in ep.n_ns.items()}, b_ns=ep.b_ns[k] * frac,
        stall=ep.stall[k] & last[:, None], gc=ep.gc[k])


@dataclass(frozen=True)
class ManagerResult(Result):
    """Per-quantum frequencies and the predicted (and, from the simulator, true) time and energy.

    schedule: (quantum, f GHz, base ns, predicted ns at f, predicted ns at f_max) per quantum.
    Slowdowns and savings are fractions relative to running at f_max throughout.
    """

    max_slowdown: float
    quantum_ns: float
    hold_off: int
    step_ghz: float
    excess: str
    reactive: bool
    schedule: list
    transitions: int
    predicted_ns: float
    predicted_fmax_ns: float
    predicted_slowdown: float
    predicted_saving: float
    true_ns: float | None = None
    true_fmax_ns: float | None = None
    true_slowdown: float | None = None
    true_saving: float | None = None

    kind = "dvfs-manager"

    def rows(self) -> list[dict]:
        return [{"quantum": q, "f_ghz": f, "base_ns": b, "predicted_ns": p, "predicted_fmax_ns": pm}
                for q, f, b, p, pm in self.schedule]


def quantum_table(ep: dvfs.Epochs, quantum_ns: float, states: np.ndarray, cores: int,
                  power: PowerModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per quantum: predicted time and energy at every state, and its base length."""
    ep = cut_epochs(ep, ep.t0_ns[0] + quantum_ns * np.arange(1, int(ep.measured_ns // quantum_ns) + 1))
    q = ((ep.t0_ns - ep.t0_ns[0]) // quantum_ns).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    ends = np.r_[starts[1:], len(q)]
    T = np.zeros((len(starts), len(states)))
    E = np.zeros_like(T)
    base = np.zeros(len(starts))
    for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
        w = ep.window(a, b)
        base[i] = w.measured_ns
        for j, f in enumerate(states):
            T[i, j] = max(float(dvfs.dep(w, f, clamp=True)[0].sum()), 0.0)
            busy = float(dvfs.alpha(w, w.f_base_ghz / f, True).sum())
            E[i, j] = power.energy_j({float(f): busy}, T[i, j], cores, idle_ghz=float(f))
    return T, E, base


def manage(ep: dvfs.Epochs, max_slowdown: float, *, quantum_ns: float = 5e6, hold_off: int = 1,
           step_ghz: float = 0.125, excess: str = "replace", reactive: bool = True, cores: int = 4,
           power: PowerModel | None = None) -> ManagerResult:
    """Choose per-quantum frequencies from a run's epochs (any base frequency)."""
    power = power or PowerModel()
    states = dvfs_states(step_ghz)
    fmax = len(states) - 1
    T, E, base = quantum_table(ep, quantum_ns, states, cores, power)
    n = len(base)
    choice = np.full(n, fmax)
    sigma, hold, cur = 0.0, 0, fmax
    for q in range(n):
        if hold > 0:
            hold -= 1
            choice[q] = cur
            continue
        prof = q - 1 if reactive else q
        if prof >= 0:
            want = T[prof, fmax] * (1 + max_slowdown)
            cost = np.where(np.arange(len(states)) != cur, TRANSITION_NS, 0.0)  # a change costs 2 us
            ok = np.flatnonzero(T[prof] + cost <= want + sigma + 1e-9)
            cur = int(ok.min()) if len(ok) else fmax
            slack = (want - T[prof, cur] - cost[cur]) * hold_off
            sigma = slack if excess == "replace" else max(sigma + slack, 0.0) if excess == "bank" else 0.0
        choice[q] = cur
        hold = hold_off - 1
    rows = np.arange(n)
    trans = int(np.count_nonzero(choice[1:] != choice[:-1])) + int(n > 0 and choice[0] != fmax)
    pred = float(T[rows, choice].sum()) + trans * TRANSITION_NS
    pmax = float(T[:, fmax].sum())
    sched = [(int(q), float(states[choice[q]]), float(base[q]), float(T[q, choice[q]]), float(T[q, fmax]))
             for q in rows]
    return ManagerResult(max_slowdown, quantum_ns, hold_off, step_ghz, excess, reactive, sched, trans, pred, pmax,
                         pred / pmax - 1 if pmax else 0.0,
                         1 - float(E[rows, choice].sum()) / float(E[:, fmax].sum()) if n else 0.0)


def _busy_between(trace, edges: np.ndarray) -> np.ndarray:
    """Total RUNNING thread-time inside each [edges[i], edges[i+1])."""
    j, s, e = dvfs._running(trace)
    t = np.concatenate([s, e]).astype(np.float64)
    d = np.concatenate([np.ones(len(s)), -np.ones(len(e))])
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    level = np.cumsum(d)
    area = np.r_[0.0, np.cumsum(level[:-1] * np.diff(t))] if len(t) else np.zeros(0)
    if len(t) == 0:
        return np.zeros(len(edges) - 1)
    idx = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, len(t) - 1)
    cum = area[idx] + np.where(edges >= t[0], level[idx] * (edges - t[idx]), 0.0)
    return np.diff(cum)


def simulate_schedule(workload: dict, res: ManagerResult, *, cores: int = 4, power: PowerModel | None = None,
                      tick_ns: int | None = None) -> ManagerResult:
    """True time and energy of the manager's schedule in the simulator (chip-wide DVFS).

    Frequencies change at the predicted quantum ends, checked every `tick_ns` (Q/50 by default).
    The 2 us transition cost is added to the simulated time per change.
    """
    from scalestack.sim.engine import Policy, simulate

    power = power or PowerModel()
    n = len(workload["threads"])
    freqs = np.array([s[1] for s in res.schedule])
    ends = np.cumsum([s[3] for s in res.schedule])
    tick = int(tick_ns or max(res.quantum_ns // 50, 1000))
    changes = [(0, float(freqs[0]))]

    class _Schedule(Policy):
        period_ns = tick

        def decide(self, now_ns, criticality_ns, freq_ghz):
            f = float(freqs[min(int(np.searchsorted(ends, now_ns, side="right")), len(freqs) - 1)])
            if f != changes[-1][1]:
                changes.append((now_ns, f))
                return dict.fromkeys(range(n), f)
            return None

    run = simulate(workload, cores=cores, freq_ghz=float(freqs[0]), policy=_Schedule())
    ref = simulate(workload, cores=cores, freq_ghz=F_MAX_GHZ)
    t_true = run.runtime_ns + TRANSITION_NS * (len(changes) - 1)
    edges = np.array([c[0] for c in changes] + [run.runtime_ns], dtype=np.float64)
    busy = _busy_between(run.trace, edges)
    e = sum(power.energy_j({f: b}, float(hi - lo), cores, idle_ghz=f)
            for (_, f), b, lo, hi in zip(changes, busy, edges[:-1], edges[1:], strict=True))
    e_ref = power.energy_j({F_MAX_GHZ: float(_busy_between(ref.trace, np.array([0.0, ref.runtime_ns])).sum())},
                           ref.runtime_ns, cores, idle_ghz=F_MAX_GHZ)
    return dataclasses.replace(res, true_ns=float(t_true), true_fmax_ns=float(ref.runtime_ns),
                               true_slowdown=t_true / ref.runtime_ns - 1, true_saving=1 - e / e_ref)
