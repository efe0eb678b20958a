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

Native programs (issue 27; docs/speedup.md): without a driver thread (one that works alone or not at
all and waits while the others work, `analysis.serial`) in both runs, SEQ comes from the N-thread
run's serial windows, ``(N − 1)·T_seq / T_p`` (thesis eq. 3.12), and SYNC and IMB leave those windows
out; with one (Jikes' MainThread, the thread running a JVM's main()) T_seq is its box height. Either
way the stack carries the thesis form and `seq_general` holds ``(N·T_seq,MT − T_seq,ST) / T_p``; the
per-thread terms sum over the working threads, not over coordinators; contention windows (the one
active thread waits for a CPU) are CONT; `with_spin` books spinning from a passive-wait twin run.

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
    # how SEQ was found (analysis.serial): "managed" (a driver thread's box height, both runs have
    # one) or "native" (the N-thread run's serial windows, thesis eq. 3.12 form); both SEQ forms
    form: str = "managed"
    seq_thesis: float = 0.0  # (N − 1)·T_seq,MT / T_p
    seq_general: float = 0.0  # (N·T_seq,MT − T_seq,ST) / T_p
    t_seq_mt_ns: float = 0.0
    t_seq_st_ns: float = 0.0
    seq_st_measured: bool = True  # False: the 1-thread run has no separate parallel phase; T_seq,ST := T_seq,MT
    spin: float = 0.0  # spinning booked into SYNC (samples in spin-wait code, or a passive-wait twin run)
    workers: int = 0  # working threads in the N-thread run (N slots are the sweep's N)
    threads: tuple = ()  # one line per driver or coordinator thread (analysis.serial.ThreadKinds.lines)
    # |T_1 − T_1,twin| / min of the two: the baseline and its passive twin do the same work (a 1-thread
    # run has no partner to spin for), so their spread is the machine's run-to-run noise, which S and
    # OTHER carry as about ±S·spread; nan without twins
    baseline_spread: float = float("nan")

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


def gc_seq_window_time(trace: Trace, app: np.ndarray | None = None, svc: np.ndarray | None = None) -> np.ndarray:
    """Per thread: ns of its SYNC_WAIT that fall in a stop-the-world GC or SEQ window.

    A window (spec §2.5, inference (b)) is a span in which no app thread runs and a GC or main
    thread does: the app threads are stopped for the collector or cannot start yet. Their futex
    waits there are GC or SEQ time, already counted in those terms, so SYNC leaves them out.
    G(t), the window time up to t, is a cumulative sum over the running intervals' endpoints;
    each wait [a, b) overlaps the windows by G(b) - G(a). `app` / `svc` (bool per thread row) say
    which threads are the workers and which the GC and driver threads (default: by role).
    """
    st = trace.states
    roles_by_row = np.asarray(trace.threads.role, dtype=object)
    app = np.asarray(roles_by_row == "app", dtype=bool) if app is None else app
    svc = np.isin(roles_by_row, ["gc", "main"]) if svc is None else svc
    out = np.zeros(len(trace.threads), dtype=np.int64)
    if len(st) == 0:
        return out
    rows_all = trace.thread_index(st.tid)
    run = st.state == State.RUNNING
    app_run, svc_run = run & app[rows_all], run & svc[rows_all]
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
    rows = rows_all[sync]
    np.add.at(out, rows, np.round(over).astype(np.int64))
    return out


FORMS = ("auto", "managed", "native")


def speedup_stack(single: Trace, multi: Trace, n: int, form: str = "auto",
                  threads: tuple[int, int] | None = None) -> SpeedupStack:
    """Speedup stack of `multi` (N threads) against the single-threaded `single` trace.

    form: "managed" (spec §1.2: SEQ from the driver thread's box height, C_j with "running"; SYNC the
    workers' futex-blocked time outside the STW-GC and SEQ windows), "native" (SEQ from the N-thread
    run's serial windows, thesis eq. 3.12: (N − 1)·T_seq/T_p; SYNC and IMB outside those windows),
    or "auto": managed when both runs have a driver thread (`analysis.serial.classify_threads`:
    a thread that works alone or not at all and waits while the others work), native otherwise.
    Either way the per-thread terms sum over the working threads; drivers and coordinators get a line
    of their own (`SpeedupStack.threads`). threads: the thread counts the two runs were asked for
    (default 1 and n), so that no more threads are demoted to coordinators than leave that many workers.
    """
    from scalestack.analysis.serial import classify_threads

    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    t_st, t_mt = threads or (1, n)
    ks, km = classify_threads(single, t_st), classify_threads(multi, t_mt)
    if form == "auto":
        form = "managed" if ks.driver is not None and km.driver is not None else "native"
    base = _native_stack if form == "native" else _managed_stack
    return base(single, multi, n, ks, km)


def _rows_height(trace: Trace, rows: np.ndarray, active: str = "running") -> float:
    """Σ C_j over the threads in `rows` (bool per thread row): their bottle-graph boxes' height."""
    from scalestack.analysis.criticality import criticality

    if not np.any(rows):
        return 0.0
    return float(criticality(trace, active=active).criticality_ns[rows].sum())


def _cont_ns(trace: Trace, k, slots: int) -> float:
    """CONT·T_p of one run before the baseline's is subtracted (`_common`)."""
    from scalestack.analysis.serial import _active

    w = k.workers
    nw = (k.kind != "") & ~w
    _, a, b = _active(trace, nw, (int(State.RUNNABLE),))
    own = float(np.sum(k.sweep.cont_in(a, b))) if len(a) else 0.0
    return float(trace.time_in_states()[w, int(State.RUNNABLE)].sum()) + (slots - 1) * k.sweep.cont_ns + own


def _common(single: Trace, multi: Trace, n: int, ks, km) -> dict:
    """The terms both forms share: CPU contention in both runs, GC heights.

    CONT·T_p = [Σ_workers Runnable + (N − 1)·T_cw + Runnable_nw,cw]_MT − [Σ_workers Runnable + Runnable_nw,cw]_ST,
    T_cw the contention windows (the one active thread waits for a CPU: the other N − 1 slots wait for
    it) and Runnable_nw,cw a driver's or coordinator's waits for a CPU there (its own slot is no worker's,
    so all N wait). Like SEQ, ``N·T − T_1`` when both runs wait alike, and a 1-thread run slowed by other
    processes while its driver ran alone no longer inflates S unanswered (it did into OTHER).
    """
    gc_s = np.asarray(single.threads.role == "gc", dtype=bool)
    gc_m = np.asarray(multi.threads.role == "gc", dtype=bool)
    return {"cont": _cont_ns(multi, km, n), "cont_st": _cont_ns(single, ks, 1),
            "gc_st": _rows_height(single, gc_s), "gc_mt": _rows_height(multi, gc_m)}


def _managed_stack(single: Trace, multi: Trace, n: int, ks, km) -> SpeedupStack:
    def driver(trace, k):
        if k.driver is not None:
            m = np.zeros(len(trace.threads), dtype=bool)
            m[k.driver] = True
            return m
        return np.asarray(trace.threads.role == "main", dtype=bool)

    w = km.workers
    if not np.any(w):  # nothing but a driver: the app threads are whatever is not main
        w = np.asarray(multi.threads.role == "app", dtype=bool)
    drv_s, drv_m = driver(single, ks), driver(multi, km)
    gc_m = np.asarray(multi.threads.role == "gc", dtype=bool)
    tis = multi.time_in_states()
    ends = np.asarray(multi.threads.end_ns)[w].astype(np.int64)
    # an exited worker's wait for the last one, less the contention windows (CONT has those slots)
    imb = float(np.sum((ends.max() - ends) - km.sweep.cont_in(ends, np.full(ends.shape, ends.max())))) \
        if ends.size else 0.0
    sync = float((tis[w, int(State.SYNC_WAIT)] - gc_seq_window_time(multi, w, drv_m | gc_m)[w]).sum())
    # the driver's waits for a CPU while it is the only thread that could run are contention windows,
    # as in the native form: CPU contention for the other N − 1 slots, and the workers' futex waits
    # there are no SYNC (analysis.serial.Sweep)
    sw, stt = km.sweep, multi.states
    rows = multi.thread_index(stt.tid) if len(stt) else np.zeros(0, np.int64)
    m = (stt.state == State.SYNC_WAIT) & w[rows] if len(stt) else np.zeros(0, bool)
    sync -= float(np.sum(sw.cont_in(stt.start_ns[m], stt.end_ns[m])))
    common = _common(single, multi, n, ks, km)
    seq_st = _rows_height(single, drv_s)
    seq_mt = _rows_height(multi, drv_m)
    # the stack carries the thesis form (eq. 3.12), (N − 1)·T_seq,MT/T_p, as the native form does: the
    # general form moves any difference in the driver's time between the two runs (a JVM start-up
    # slower under other load) into SEQ; it is kept beside it (seq_general), with both inputs
    spin = spin_running_ns(multi, multi.threads.tid[w])  # samples in spin-wait code: synchronization
    st = stack_from_times(n, float(single.wall_ns), float(multi.wall_ns), seq_st=seq_mt, seq_mt=seq_mt,
                          sync=max(sync, 0.0) + spin, imb=max(imb, 0.0), **common)
    return dataclasses.replace(st, form="managed", spin=spin / multi.wall_ns, seq_thesis=st.seq, seq_general=(n * seq_mt - seq_st) / multi.wall_ns,
                               t_seq_mt_ns=seq_mt, t_seq_st_ns=seq_st, workers=int(w.sum()),
                               threads=tuple(km.lines(multi)))


def baseline_serial_ns(single: Trace, ks) -> tuple[float, bool]:
    """The 1-thread run's serial time for the general SEQ form, and whether it was measured.

    Measured when the baseline has a worker spawned after its first thread (a pool of one, a JVM's
    worker): its serial windows before the first such worker starts and after the last one ends.
    Otherwise the single thread does serial and parallel work alike and the trace cannot tell them
    apart: (nan, False), and the caller uses the thesis's assumption T_seq,ST = T_seq,MT instead.
    """
    cand = ks.kind != ""
    if not np.any(cand):
        return 0.0, False
    starts = np.asarray(single.threads.start_ns)
    first = starts[cand].min()
    spawned = ks.workers & (starts > first)
    if not np.any(spawned):
        return float("nan"), False
    a, b = int(starts[spawned].min()), int(np.asarray(single.threads.end_ns)[spawned].max())
    sw = ks.sweep
    return float(sw.serial_in(single.start_ns, a) + sw.serial_in(b, single.end_ns)), True


def _native_stack(single: Trace, multi: Trace, n: int, ks, km) -> SpeedupStack:
    sw, w = km.sweep, km.workers
    t_p = float(multi.wall_ns)
    t_ser = sw.serial_ns
    t_ser_st, measured = baseline_serial_ns(single, ks)
    if not measured:
        t_ser_st = t_ser
    st = multi.states
    rows = multi.thread_index(st.tid) if len(st) else np.zeros(0, np.int64)
    m = (st.state == State.SYNC_WAIT) & w[rows] if len(st) else np.zeros(0, bool)
    sync = float(np.sum((st.end_ns[m] - st.start_ns[m]) - sw.excluded_in(st.start_ns[m], st.end_ns[m])))
    ends = np.asarray(multi.threads.end_ns)[w].astype(np.int64)
    imb = 0.0
    if ends.size:
        last = ends.max()
        full = np.full(ends.shape, last)
        imb = float(np.sum((last - ends) - sw.serial_in(ends, full) - sw.cont_in(ends, full)))
    common = _common(single, multi, n, ks, km)  # with the contention windows: CONT, not SEQ
    spin = spin_running_ns(multi, multi.threads.tid[w])  # samples in spin-wait code: synchronization
    stack = stack_from_times(n, float(single.wall_ns), t_p, seq_st=t_ser, seq_mt=t_ser, sync=max(sync, 0.0) + spin,
                             imb=max(imb, 0.0), **common)
    return dataclasses.replace(stack, form="native", spin=spin / t_p, seq_thesis=stack.seq, seq_general=(n * t_ser - t_ser_st) / t_p,
                               t_seq_mt_ns=t_ser, t_seq_st_ns=t_ser_st, seq_st_measured=measured,
                               workers=int(w.sum()), threads=tuple(km.lines(multi)))


def with_spin(stack: SpeedupStack, multi: Trace, multi_passive: Trace, single: Trace | None = None,
              single_passive: Trace | None = None) -> SpeedupStack:
    """`stack` with spinning booked as SYNC instead of OTHER (`scale --omp-passive`).

    Spin-then-block waits (libgomp's OMP_WAIT_POLICY=active, GOMP_SPINCOUNT; adaptive mutexes) show
    as RUNNING: work in the trace. The same program with passive waits (blocking at once) does the
    same work, so the working threads' extra running time in the active run is the spin:
    ``spin = (ΔRun_MT − ΔRun_ST) / T_p`` with ΔRun = Σ_workers Run(active) − Σ_workers Run(passive),
    clamped at 0 per run; it moves out of OTHER. Threads spinning through a serial part hide it from
    the serial windows, so for the native form the serial time the passive run's windows show and the
    default run's do not goes to SEQ: ``ΔSEQ = (N − 1)·(T_seq,passive − T_seq)/T_p`` (measured
    directly, not capped by the spin, a difference of two noisy totals); what is left of the spin,
    ``max(spin − ΔSEQ, 0)``, goes to SYNC; both come out of OTHER. The stack still sums to N.
    ΔSEQ is taken wherever the N-thread run spins (its ΔRun > 0), even when the 1-thread runs'
    ΔRun, noise there, cancels the spin (measured: a 1-thread active run 39 ms slower than its twin
    did, and the serial time the spinning hid, 16% of the run, was lost from SEQ).

    A spinner that another process keeps off its core while it spins through a serial part waits
    for a CPU inside a window ΔSEQ already books whole: that wait is no contention. The default
    run's CONT beyond the passive twin's (whose threads wait for a CPU only with work to do), at most
    the hidden serial time, leaves CONT for OTHER (measured: an OpenMP sweep on 2 vCPUs with CONT
    0.098 against the twin's 0.033 read OTHER -0.11).
    """
    from scalestack.analysis.serial import classify_threads

    def run(trace, slots):
        k = classify_threads(trace, slots)
        return float(trace.time_in_states()[k.workers, int(State.RUNNING)].sum()), k

    (r_mt, _), (r_mp, kp) = run(multi, stack.n), run(multi_passive, stack.n)
    spin = spin_mt = max(r_mt - r_mp, 0.0)
    if single is not None and single_passive is not None:
        spin -= max(run(single, 1)[0] - run(single_passive, 1)[0], 0.0)
    t_p = float(multi.wall_ns)
    booked = stack.spin  # already in SYNC from samples in spin-wait code (`record --stacks`/`--sample`)
    x = max(spin / t_p - booked, 0.0)
    if stack.form != "native" or spin_mt <= 0:
        return dataclasses.replace(stack, sync=stack.sync + x, other=stack.other - x, spin=booked + x)
    hidden = max(kp.sweep.serial_ns - stack.t_seq_mt_ns, 0.0)
    d_seq = (stack.n - 1) * hidden / t_p
    rest = max(x - d_seq, 0.0)
    km = classify_threads(multi, stack.n)
    spun_off = min(max(_cont_ns(multi, km, stack.n) - _cont_ns(multi_passive, kp, stack.n), 0.0), hidden) / t_p
    t_seq = stack.t_seq_mt_ns + hidden
    t_st = t_seq if not stack.seq_st_measured else stack.t_seq_st_ns
    return dataclasses.replace(stack, seq=stack.seq + d_seq, sync=stack.sync + rest, cont=stack.cont - spun_off,
                               other=stack.other - d_seq - rest + spun_off,
                               spin=booked + rest, seq_thesis=stack.seq + d_seq, t_seq_mt_ns=t_seq, t_seq_st_ns=t_st,
                               seq_general=(stack.n * t_seq - t_st) / t_p)


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


def phase_stacks(single: Trace, multi: Trace, n: int, form: str = "auto") -> dict[str, SpeedupStack]:
    """A stack per phase present in both runs (spec: stacks between fork and join, not only
    for the whole run): each phase of the N-thread run against the same phase of the 1-thread
    run, so a serial start-up and a parallel section that scale differently are told apart."""
    if form == "auto":  # the whole runs decide, so every phase is read the same way
        form = speedup_stack(single, multi, n).form
    ws, wm = phase_windows(single), phase_windows(multi)
    return {p: speedup_stack(single.between(*ws[p]), multi.between(*wm[p]), n, form)
            for p in PHASES if p in ws and p in wm}
