"""DVFS energy manager: lowest frequencies within a slowdown bound (spec dep-burst.md §3.1).

The run is cut into quanta of Q (5 ms in the paper). For each quantum, DEP+BURST (across-epoch,
deltas reset at the quantum's start) predicts its time T'(f) at every DVFS state; the manager
picks the lowest f within the bound and holds it for H quanta. `reactive=True` (the paper's online
loop) applies the choice made from quantum q to quantum q + 1; `False` applies it to q itself (an
oracle bound).

The bound (`excess`): the paper's rule is T'(f) <= T'(f_max)(1 + s) + sigma, carrying the unused
slack sigma = (T'(f_max)(1 + s) - T'(f)) H to the next decision (Eq. 1; `"replace"`, `"bank"` keeps
a running sum, `"off"` none). It trusts every prediction, and overshoots by up to 2.4 points on
the simulator's ground truth. The default `"run"` (`RunBudget`) keeps the promise over the whole
run so far: the quanta's time (measured online, predicted when planned) against the sum of their
predicted T'(f_max) (1 + s), so a quantum that turned out slower than predicted is paid back by
returning towards f_max, each quantum still stays within s on its own (`spend` = 0), and a
hold-off ends early once the run so far is over the bound. `guard`
(kappa) inflates every predicted change of time with frequency by (1 + kappa) in quanta where a
thread waited for a CPU, where DEP+BURST under-estimates it.

Energy comes from `scalestack.analysis.power` (chip-wide DVFS: every core's leakage at the chosen V):
busy core time per quantum is the sum of the predicted per-thread times.

Ground truth (simulator only): `simulate_schedule` replays the workload with the chosen
frequencies placed at the predicted quantum ends in time, and measures time and energy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from scalestack.analysis import dvfs
from scalestack.analysis.power import F_MAX_GHZ, TRANSITION_NS, PowerModel, dvfs_states
from scalestack.results import Result
from scalestack.trace import State

CLAMP = False  # manager predictions follow Algorithm 1 literally (negative epochs allowed)
# kappa: DEP+BURST under-estimates the change of time with frequency where threads wait for a CPU (the
# schedule's order moves with f). 0.2 is the 95th percentile of the inflation that would have made its
# prediction exact, over 28 such runs of the accuracy suite (seeds 0-39, 500 MHz states, both
# directions; docs/dvfs.md); the whole-run accounting pays back the rest.
GUARD = 0.2


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


@dataclass
class RunBudget:
    """Slowdown accounting over the whole run so far (`excess="run"`).

    elapsed_ns: the run's time so far; ref_ns: the sum of the quanta's predicted T'(f_max), i.e. the
    time the same work would have taken at f_max. A choice must keep elapsed <= (1 + s) ref with the
    next stretch included, so an error made earlier (a quantum slower than predicted) is paid back
    later. `spend` limits each stretch on its own to a slowdown of s (1 + spend): 0 never spends
    banked slack (slowing one quantum a lot costs more energy than slowing many a little),
    inf spends all of it.
    """

    s: float
    guard: float = 0.0
    spend: float = 0.0
    elapsed_ns: float = 0.0
    ref_ns: float = 0.0

    def adjust(self, t: np.ndarray, k_base: int, on: bool = True) -> np.ndarray:
        """Predicted times with each change from the measured state k_base inflated by (1 + guard)
        (unchanged when `on` is False)."""
        t = np.asarray(t, dtype=np.float64)
        return t[k_base] + (t - t[k_base]) * (1 + self.guard * on)

    def record(self, took_ns: float, fmax_ns: float) -> None:
        """A quantum is done: it took took_ns, and would have taken fmax_ns at f_max."""
        self.elapsed_ns += took_ns
        self.ref_ns += fmax_ns

    def slowdown(self) -> float:
        return self.elapsed_ns / self.ref_ns - 1 if self.ref_ns > 0 else 0.0

    def over(self) -> bool:
        """The run so far is over the bound: a hold-off ends early (the manager decides again)."""
        return self.elapsed_ns > (1 + self.s) * self.ref_ns + 1e-9

    def choose(self, t_next: np.ndarray, w_next: np.ndarray, cost: np.ndarray) -> int:
        """Lowest state whose next stretch (t_next ns at each state, w_next ns of work at f_max, the
        change's cost) keeps elapsed <= (1 + s) ref; f_max (the last state) when none does."""
        ok = np.flatnonzero((self.elapsed_ns + t_next + cost <= (1 + self.s) * (self.ref_ns + w_next) + 1e-9)
                            & (t_next + cost <= (1 + self.s * (1 + self.spend)) * w_next + 1e-9))
        return int(ok.min()) if len(ok) else len(t_next) - 1


@dataclass(frozen=True)
class ManagerResult(Result):
    """Per-quantum frequencies and the predicted (and, from the simulator, true) time and energy.

    schedule: (quantum, f GHz, base ns, predicted ns at f, predicted ns at f_max) per quantum
    (from `run_online`: the frequency the quantum ran at, its measured length twice, and its
    predicted time at f_max). Slowdowns and savings are fractions relative to running at f_max
    throughout; predicted_* are the manager's own estimates.
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
    guard: float = 0.0  # with excess="run": the guard band (kappa) and how much banked slack a quantum may spend
    spend: float = 0.0

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
            T[i, j] = max(float(dvfs.dep(w, f, clamp=CLAMP)[0].sum()), 0.0)
            busy = float(dvfs.alpha(w, w.f_base_ghz / f, True).sum())
            E[i, j] = power.energy_j({float(f): busy}, T[i, j], cores, idle_ghz=float(f))
    return T, E, base


def manage(ep: dvfs.Epochs, max_slowdown: float, *, quantum_ns: float = 5e6, hold_off: int = 1,
           step_ghz: float = 0.125, excess: str = "run", reactive: bool = True, cores: int = 4,
           power: PowerModel | None = None, guard: float = GUARD, spend: float = 0.0,
           trace=None) -> ManagerResult:
    """Choose per-quantum frequencies from a run's epochs (any base frequency).

    With `trace` (the run the epochs come from), the guard band applies only to quanta in which a
    thread waited for a CPU (`contended_quanta`); without it, to every quantum.
    """
    power = power or PowerModel()
    states = dvfs_states(step_ghz)
    fmax = len(states) - 1
    T, E, base = quantum_table(ep, quantum_ns, states, cores, power)
    n = len(base)
    choice = np.full(n, fmax)
    sigma, hold, cur = 0.0, 0, fmax
    kb = int(np.argmin(np.abs(states - ep.f_base_ghz)))
    budget = RunBudget(max_slowdown, guard, spend)
    cont = np.ones(n, bool) if trace is None else contended_quanta(trace, ep.t0_ns[0], quantum_ns, n)
    for q in range(n):
        if q > 0:  # quantum q - 1 is done: its predicted time at the state it ran at
            ta = budget.adjust(T[q - 1], kb, cont[q - 1])
            budget.record(ta[choice[q - 1]] + (TRANSITION_NS if choice[q - 1] != (choice[q - 2] if q > 1 else fmax)
                                                else 0.0), ta[fmax])
        if hold > 0 and not (excess == "run" and budget.over()):  # a hold ends early once over the bound
            hold -= 1
            choice[q] = cur
            continue
        prof = q - 1 if reactive else q
        if prof >= 0 and excess == "run":
            ta = budget.adjust(T[prof], kb, cont[prof])
            cost = np.where(np.arange(len(states)) != cur, TRANSITION_NS, 0.0)
            cur = budget.choose(ta * hold_off, np.full(len(states), ta[fmax] * hold_off), cost)
        elif prof >= 0:
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
                         1 - float(E[rows, choice].sum()) / float(E[:, fmax].sum()) if n else 0.0,
                         guard=guard if excess == "run" else 0.0, spend=spend)


def _busy_between(trace, edges: np.ndarray, state: State = State.RUNNING) -> np.ndarray:
    """Total thread-time in `state` (RUNNING by default) inside each [edges[i], edges[i+1])."""
    if state == State.RUNNING:
        j, s, e = dvfs._running(trace)
    else:
        m = trace.states.state == state
        s, e = trace.states.start_ns[m].astype(np.int64), trace.states.end_ns[m].astype(np.int64)
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


def contended_quanta(trace, t0_ns: float, quantum_ns: float, n: int) -> np.ndarray:
    """Per quantum: did some thread wait for a CPU (RUNNABLE)? There the schedule's order can change
    with frequency, which DEP+BURST does not model, so the guard band applies there."""
    edges = t0_ns + quantum_ns * np.arange(n + 1, dtype=np.float64)
    edges[-1] = max(edges[-1], float(trace.end_ns))
    return _busy_between(trace, edges, State.RUNNABLE) > 0


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
    e = _true_energy(run, changes, cores, power)
    e_ref = _true_energy(ref, [(0, F_MAX_GHZ)], cores, power)
    return dataclasses.replace(res, true_ns=float(t_true), true_fmax_ns=float(ref.runtime_ns),
                               true_slowdown=t_true / ref.runtime_ns - 1, true_saving=1 - e / e_ref)


def _true_energy(run, changes: list, cores: int, power: PowerModel, after: float = 0.0) -> float:
    """Energy of a simulated run whose chip-wide frequency changed at `changes` [(ns, GHz)],
    counting only the time after `after` ns."""
    t = np.array([c[0] for c in changes] + [run.runtime_ns], dtype=np.float64)
    f = [c[1] for c in changes]
    if after > 0:
        k = int(np.searchsorted(t, after, side="right")) - 1
        if k >= len(f):
            return 0.0
        t = np.r_[after, t[k + 1:]]
        f = f[k:]
    busy = _busy_between(run.trace, t)
    return sum(power.energy_j({fi: b}, float(hi - lo), cores, idle_ghz=fi)
               for fi, b, lo, hi in zip(f, busy, t[:-1], t[1:], strict=True) if hi > lo)


class OnlineManager:
    """The manager inside the simulator (spec §3.1 as run online): at the end of every quantum it
    builds that quantum's epochs from the run so far, measured at the current frequency, predicts
    the quantum's time at every state (T'(f_max) included) and sets the next frequency chip-wide.

    Use as `simulate(..., freq_ghz=4.0, policy=OnlineManager(...))`; `attach` is called by the
    simulator with its live state.
    """

    def __init__(self, n_threads: int, max_slowdown: float, *, quantum_ns: float = 5e6, hold_off: int = 1,
                 step_ghz: float = 0.125, excess: str = "run", roles: tuple = (), cores: int = 4,
                 power: PowerModel | None = None, carry: bool = True, guard: float = GUARD,
                 spend: float = 0.0):
        self.period_ns = int(quantum_ns)
        self.budget = RunBudget(max_slowdown, guard, spend)
        self.n, self.s, self.h, self.excess = n_threads, max_slowdown, hold_off, excess
        self.states = dvfs_states(step_ghz)
        self.roles = tuple(roles) or ("app",) * n_threads
        self.cores, self.power = cores, power or PowerModel()
        self.sigma, self.hold, self.last = 0.0, 0, 0
        self.log: list[tuple] = []  # (quantum start, end, f ran at, T'(f_max), E'(f_max), next f)
        self.changes: list[tuple] = [(0, F_MAX_GHZ)]
        self.carry = carry  # keep each target's thread leads across quanta (else reset to 0)
        self.leads = np.zeros((len(self.states), n_threads))

    def attach(self, **live) -> None:
        self.live = live
        self.rp = self.pp = 0

    def _epochs(self, q0: int, now: int) -> dvfs.Epochs | None:
        from scalestack.sim.engine import TID_BASE

        L = self.live
        rows, cur, pieces = L["rows"], L["cur"], L["pieces"]
        run = [(r[0] - TID_BASE, max(r[1], q0), r[2]) for r in rows[self.rp:] if r[3] == State.RUNNING and r[2] > q0]
        self.contended = any(r[3] == State.RUNNABLE and r[2] > q0 for r in rows[self.rp:]) or any(
            c is not None and c[1] == State.RUNNABLE for c in cur)  # some thread waited for a CPU
        self.rp = len(rows)
        run += [(i, max(c[0], q0), now) for i, c in enumerate(cur) if c is not None and c[1] == State.RUNNING]
        run = [x for x in run if x[2] > x[1]]
        if not run:
            return None
        segs = [(p[0] - TID_BASE, *p[1:]) for p in pieces[self.pp:]]
        self.pp = len(pieces)
        for i, g in enumerate(L["seg"]):  # compute ops running now: scaling part first
            if g is not None and cur[i] is not None and cur[i][1] == State.RUNNING:
                el = now - g[2]
                sc = int(round(g[0] / L["freq"][i]))
                fm = min(max(el - sc, 0), L["fixed"][i][0])
                segs.append((i, g[2], now, min(el, sc), fm, max(el - sc, 0) - fm))
        r = np.array(run, dtype=np.int64)
        t0, t1, act = dvfs._grid(r[:, 0], r[:, 1], r[:, 2], self.n, q0, now)
        bounds = np.append(t0, t1[-1:]).astype(np.float64)
        n_ns = np.zeros(act.shape)
        b_ns = np.zeros(act.shape)
        p = np.array(segs, dtype=np.int64).reshape(-1, 6)
        for j in np.unique(p[:, 0]):
            pj = p[p[:, 0] == j]
            pj = pj[np.argsort(pj[:, 1], kind="stable")]
            m0 = pj[:, 1] + pj[:, 3]
            s0 = m0 + pj[:, 4]
            n_ns[:, j] = np.diff(dvfs._cumulative(bounds, m0, s0))
            b_ns[:, j] = np.diff(dvfs._cumulative(bounds, s0, s0 + pj[:, 5]))
        a = np.where(act, (t1 - t0)[:, None], 0).astype(np.float64)
        life = np.tile([float(q0), float(now)], (self.n, 1))
        stall = dvfs._stall(act)
        stall[-1] = False  # the quantum ends mid-epoch: no one stalls there
        return dvfs.Epochs(t0.astype(np.float64), t1.astype(np.float64), np.arange(self.n) + TID_BASE, self.roles,
                           act, a, {"crit": n_ns * act}, b_ns * act, stall,
                           dvfs._gc_flags(act, self.roles), life, float(L["freq"][0]), "online")

    def decide(self, now_ns: int, criticality_ns, freq_ghz: list) -> dict | None:
        q0, self.last = self.last, now_ns
        f_cur = float(freq_ghz[0])
        ep = self._epochs(q0, now_ns)
        if ep is None:
            return None
        T = np.zeros(len(self.states))
        for k, f in enumerate(self.states):
            T[k] = max(float(dvfs.dep(ep, float(f), clamp=CLAMP, leads0=self.leads[k])[0].sum()), 0.0)
            if self.carry:
                self.leads[k] = dvfs.leads(ep, float(f), clamp=CLAMP, leads0=self.leads[k])[-1]
        busy = float(dvfs.alpha(ep, f_cur / F_MAX_GHZ, True).sum())
        e_max = self.power.energy_j({F_MAX_GHZ: busy}, T[-1], self.cores, idle_ghz=F_MAX_GHZ)
        f_next = f_cur
        kc = int(np.argmin(np.abs(self.states - f_cur)))
        if self.excess == "run":  # measured time of the quantum (and its change) against its T'(f_max)
            ta = self.budget.adjust(np.r_[T[:kc], now_ns - q0, T[kc + 1:]], kc, self.contended)
            self.budget.record(now_ns - q0 + (TRANSITION_NS if len(self.changes) > 1 and self.changes[-1][0] == q0
                                              else 0.0), ta[-1])
        if self.hold > 0 and not (self.excess == "run" and self.budget.over()):
            self.hold -= 1
        elif self.excess == "run":  # the next H quanta last H Q each; their work at f_max from this profile
            t_next = np.full(len(self.states), float(self.h * self.period_ns))
            cost = np.where(np.arange(len(self.states)) != kc, TRANSITION_NS, 0.0)
            k = self.budget.choose(t_next, t_next * ta[-1] / np.maximum(ta, 1e-9), cost)
            f_next = float(self.states[k])
            self.hold = self.h - 1
        else:
            want = T[-1] * (1 + self.s)
            cost = np.where(np.abs(self.states - f_cur) > 1e-9, TRANSITION_NS, 0.0)
            ok = np.flatnonzero(T + cost <= want + self.sigma + 1e-9)
            k = int(ok.min()) if len(ok) else len(self.states) - 1
            f_next = float(self.states[k])
            slack = (want - T[k] - cost[k]) * self.h
            self.sigma = slack if self.excess == "replace" else max(self.sigma + slack, 0.0) \
                if self.excess == "bank" else 0.0
            self.hold = self.h - 1
        self.log.append((q0, now_ns, f_cur, T[-1], e_max, f_next))
        if abs(f_next - f_cur) > 1e-9:
            self.changes.append((now_ns, f_next))
            return dict.fromkeys(range(self.n), f_next)
        return None


def run_online(workload: dict, max_slowdown: float, *, cores: int = 4, quantum_ns: float = 5e6, hold_off: int = 1,
               step_ghz: float = 0.125, excess: str = "run", power: PowerModel | None = None,
               carry: bool = True, guard: float = GUARD, spend: float = 0.0) -> ManagerResult:
    """The online manager in the simulator, started at f_max; its own estimates and the truth.

    predicted_* are what the manager itself estimates while running (its measured time against
    the sum of its per-quantum T'(f_max) predictions); true_* compare with a run at f_max.
    """
    from scalestack.sim.engine import simulate

    power = power or PowerModel()
    n = len(workload["threads"])
    roles = tuple(t.get("role", "main" if i == 0 else "app") for i, t in enumerate(workload["threads"]))
    mgr = OnlineManager(n, max_slowdown, quantum_ns=quantum_ns, hold_off=hold_off, step_ghz=step_ghz, excess=excess,
                        roles=roles, cores=cores, power=power, carry=carry, guard=guard, spend=spend)
    run = simulate(workload, cores=cores, freq_ghz=F_MAX_GHZ, policy=mgr)
    ref = simulate(workload, cores=cores, freq_ghz=F_MAX_GHZ)
    trans = len(mgr.changes) - 1
    t_true = run.runtime_ns + TRANSITION_NS * trans
    e = _true_energy(run, mgr.changes, cores, power)
    e_ref = _true_energy(ref, [(0, F_MAX_GHZ)], cores, power)
    logged_end = mgr.log[-1][1] if mgr.log else 0
    # the manager's own estimate: its per-quantum T'(f_max) and E'(f_max), the unprofiled tail as run
    tail_t = max(run.runtime_ns - logged_end, 0)
    est_max = sum(x[3] for x in mgr.log) + tail_t
    e_est_max = sum(x[4] for x in mgr.log) + _true_energy(run, mgr.changes, cores, power, after=logged_end)
    sched = [(q, float(x[2]), float(x[1] - x[0]), float(x[1] - x[0]), float(x[3])) for q, x in enumerate(mgr.log)]
    return ManagerResult(max_slowdown, quantum_ns, hold_off, step_ghz, excess, True, sched, trans,
                         float(t_true), float(est_max), t_true / est_max - 1 if est_max else 0.0,
                         1 - e / e_est_max if e_est_max else 0.0,
                         float(t_true), float(ref.runtime_ns), t_true / ref.runtime_ns - 1, 1 - e / e_ref,
                         guard=guard if excess == "run" else 0.0, spend=spend)
