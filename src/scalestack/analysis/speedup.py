"""Speedup stacks: why the speedup at N threads falls short of N.

Managed-runtime formula (spec managed-speedup-stacks.md §1; paper Fig. 2):
``N = S + GC + SEQ + SYNC + IMB + CONT + OTHER``, each term in speedup units. CONT (RUNNABLE
time of app threads: more runnable threads than cores, or other processes on them) is our
addition, ``(Σ Runnable_MT − Runnable_ST) / T_p``: like GC and SEQ it leaves out what the
1-thread baseline pays too, so the N = 1 stack is exactly {S = 1} and OTHER does not absorb the
baseline's waiting for a CPU. OTHER is the residual and may be negative.

Whole runs, and per phase (`phase_stacks`: before the fork, the parallel phase, after the join). GC and SEQ use the heights of the GC threads' and the
main thread's bottle-graph boxes (Σ C_j; spec §1.2 and §2.5); SYNC is app threads' futex-wait time outside the STW-GC and SEQ windows, plus
their running time spinning in synchronization code where the trace has samples (`analysis.where`); IMB
is, per app thread, the time from its end to the last app thread's end.

GIL note: CPython with a GIL serializes bytecode; threads waiting for the GIL block on a
futex/condvar and so land in SYNC, not in a separate term. Free-threading builds (3.13t)
remove it; their stacks read like native ones.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from scalestack.analysis.where import spin_running_ns
from scalestack.results import Result
from scalestack.trace import State, Trace

COMPONENTS = ("gc", "seq", "sync", "imb", "cont", "other")


@dataclasses.dataclass(frozen=True)
class SpeedupStack(Result):
    """One stack: N = speedup + Σ components (speedup units)."""

    n: int
    speedup: float
    gc: float
    seq: float
    sync: float
    imb: float
    cont: float
    other: float
    kind: str = "speedup_stack"

    def total(self) -> float:
        return self.speedup + sum(getattr(self, c) for c in COMPONENTS)

    def rows(self) -> list[dict]:
        return [{"n": self.n, "speedup": self.speedup, **{c: getattr(self, c) for c in COMPONENTS}}]


def _role_height(trace: Trace, role: str, active: str = "running") -> float:
    """Σ C_j over the threads of a role: the height of their bottle-graph boxes (spec §2.5).

    Two GC threads collecting side by side for a pause of P ns add up to P, not 2P: the pause
    costs the program P of wall time, which is what the GC and SEQ terms charge. For SEQ the main
    thread's waits for a CPU count as active too (`active="running+runnable"`): a serial part
    stretched by other processes on the cores still costs the app threads that wall time (with
    "running" only it fell into OTHER). Not for GC: runnable GC threads (woken together, more of
    them than cores) overlap running app threads, and the pause log agrees with "running".
    """
    from scalestack.analysis.criticality import criticality

    cr = criticality(trace, active=active)
    return float(cr.criticality_ns[np.asarray(cr.roles == role, dtype=bool)].sum())


def stack_from_times(n: int, t_s: float, t_p: float, *, gc_st: float = 0.0, gc_mt: float = 0.0,
                     seq_st: float = 0.0, seq_mt: float = 0.0, sync: float = 0.0,
                     imb: float = 0.0, cont: float = 0.0, cont_st: float = 0.0) -> SpeedupStack:
    """The stack from raw times (ns or s, all the same unit).

    Parameters
    ----------
    n : thread count. t_s, t_p : single- and N-thread run times.
    gc_st, gc_mt, seq_st, seq_mt : GC / sequential time in the single- and N-thread runs.
    sync, imb, cont : summed app-thread times in the N-thread run.
    cont_st : the app threads' RUNNABLE time in the single-thread run, which the baseline pays too
        (other processes or runtime threads on the cores), subtracted like GC's and SEQ's.

    Returns
    -------
    SpeedupStack whose components plus speedup equal n exactly (OTHER is the residual).

    References
    ----------
    Spec managed-speedup-stacks.md §1.
    """
    if t_p <= 0 or t_s <= 0:
        raise ValueError("run times must be positive")
    parts = {
        "gc": (n * gc_mt - gc_st) / t_p,
        "seq": (n * seq_mt - seq_st) / t_p,
        "sync": sync / t_p,
        "imb": imb / t_p,
        "cont": (cont - cont_st) / t_p,
    }
    s = t_s / t_p
    other = n - s - sum(parts.values())
    return SpeedupStack(n=n, speedup=s, other=other, **parts)


def gc_seq_window_time(trace: Trace) -> np.ndarray:
    """Per thread: ns of its SYNC_WAIT that fall in a stop-the-world GC or SEQ window.

    A window (spec §2.5, inference (b)) is a span in which no app thread runs and a GC or main
    thread does: the app threads are stopped for the collector or cannot start yet. Their futex
    waits there are GC or SEQ time, already counted in those terms, so SYNC leaves them out.
    G(t), the window time up to t, is a cumulative sum over the running intervals' endpoints;
    each wait [a, b) overlaps the windows by G(b) - G(a).
    """
    st = trace.states
    role = dict(zip(trace.threads.tid.tolist(), trace.threads.role.tolist(), strict=True))
    roles = np.array([role.get(int(t), "app") for t in st.tid])
    run = st.state == State.RUNNING
    out = np.zeros(len(trace.threads), dtype=np.int64)
    app_run, svc_run = run & (roles == "app"), run & np.isin(roles, ["gc", "main"])
    if not np.any(svc_run):
        return out
    t = np.concatenate([st.start_ns[app_run], st.end_ns[app_run], st.start_ns[svc_run], st.end_ns[svc_run]])
    na, ns = int(app_run.sum()), int(svc_run.sum())
    d_app = np.concatenate([np.ones(na), -np.ones(na), np.zeros(2 * ns)]).astype(np.int64)
    d_svc = np.concatenate([np.zeros(2 * na), np.ones(ns), -np.ones(ns)]).astype(np.int64)
    order = np.argsort(t, kind="stable")
    t, r_app, r_svc = t[order], np.cumsum(d_app[order]), np.cumsum(d_svc[order])
    window = (r_app[:-1] == 0) & (r_svc[:-1] > 0)
    g = np.concatenate([[0], np.cumsum(np.diff(t) * window)])
    sync = st.state == State.SYNC_WAIT
    over = np.interp(st.end_ns[sync], t, g) - np.interp(st.start_ns[sync], t, g)
    rows = trace.thread_index(st.tid[sync])
    np.add.at(out, rows, np.round(over).astype(np.int64))
    return out


def speedup_stack(single: Trace, multi: Trace, n: int) -> SpeedupStack:
    """Speedup stack of `multi` (N threads) against the single-threaded `single` trace.

    SYNC is the app threads' futex-blocked time outside the STW-GC and SEQ windows (spec §1.2:
    ``Sync_i = |futex-blocked intervals of i minus STW-GC windows minus SEQ windows|``).
    """
    app = np.asarray(multi.threads.role == "app", dtype=bool)
    tis = multi.time_in_states()
    app_st = np.asarray(single.threads.role == "app", dtype=bool)
    cont_st = float(single.time_in_states()[app_st, int(State.RUNNABLE)].sum())
    ends = np.asarray(multi.threads.end_ns)[app]
    imb = float((ends.max() - ends).sum()) if ends.size else 0.0
    sync = tis[app, int(State.SYNC_WAIT)] - gc_seq_window_time(multi)[app]
    # spinning (samples in spin-wait code, `record --stacks`/`--sample`) is synchronization too
    spin = spin_running_ns(multi, multi.threads.tid[app])
    return stack_from_times(
        n, float(single.wall_ns), float(multi.wall_ns),
        gc_st=_role_height(single, "gc"), gc_mt=_role_height(multi, "gc"),
        seq_st=_role_height(single, "main", "running+runnable"),
        seq_mt=_role_height(multi, "main", "running+runnable"),
        sync=float(sync.sum()) + spin,
        imb=imb,
        cont=float(tis[app, int(State.RUNNABLE)].sum()), cont_st=cont_st,
    )


PHASES = ("before", "parallel", "after")


def phase_windows(trace: Trace) -> dict[str, tuple[int, int]]:
    """The run cut at its fork and join: before the first app thread starts, from then until the
    last app thread ends (the parallel phase), and after. Empty phases are left out."""
    app = np.asarray(trace.threads.role == "app", dtype=bool)
    t0, t1 = int(trace.start_ns), int(trace.end_ns)
    if not np.any(app):
        return {"parallel": (t0, t1)}
    a, b = int(trace.threads.start_ns[app].min()), int(trace.threads.end_ns[app].max())
    out = {"before": (t0, a), "parallel": (a, b), "after": (b, t1)}
    return {k: v for k, v in out.items() if v[1] > v[0]}


def phase_stacks(single: Trace, multi: Trace, n: int) -> dict[str, SpeedupStack]:
    """A stack per phase present in both runs (spec: stacks between fork and join, not only
    for the whole run): each phase of the N-thread run against the same phase of the 1-thread
    run, so a serial start-up and a parallel section that scale differently are told apart."""
    ws, wm = phase_windows(single), phase_windows(multi)
    return {p: speedup_stack(single.between(*ws[p]), multi.between(*wm[p]), n)
            for p in PHASES if p in ws and p in wm}
