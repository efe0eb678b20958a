"""Speedup stacks against the simulator's ground truth (issue: speedup stacks from sweeps).

Strong-scaling workloads (the same total work split over N worker threads) are simulated at
N = 1, 2, 4, 8 and their stacks computed from the traces alone, exactly as for recordings. The
simulator has no hardware interference and no work inflation, so every bit of lost speedup has a
known cause and the true OTHER is zero: |OTHER| / N is the share of the lost speedup the stack
fails to attribute, i.e. the error of the speedup the components predict, (Ŝ − S) / N with
Ŝ = N − GC − SEQ − SYNC − IMB − CONT (the thesis's figure of merit: 3.0-5.1% for its hardware
stacks). Each component is also compared with the same quantity computed from the simulator's
own record of why every thread waited (truth["waits"]: lock / barrier / join / cpu / ...).

Workload kinds: `serial` (a main-thread part before the fork), `locks` (critical sections on one
lock), `barriers` (phases with skewed work between barriers), `gc` (stop-the-world pauses run by
two GC threads; the collector's work grows with the allocating threads' total, so it is the same
at every N), `mixed` (all of these); each at 8 cores, and `oversubscribed` (mixed, 4 cores).
These have a main thread that only drives (the managed form of the stack). Native programs
(issue 27; SEQ from the N-thread run's serial windows, `truth_native`): `participates` (the main
thread is one of the N workers, OpenMP-like, with serial parts between the parallel loops),
`coordinator` (a main thread that feeds N workers through a queue and mostly waits; 16 cores) and
`spin` (participates with spin-then-block barriers, the spin booked as SYNC from a passive-wait
twin). For them the reading of the run is part of the known answer: the native form, and exactly
the designed workers (the coordinator is not one).

    .venv/bin/python benchmarks/validation/validate_speedup.py            # 40 seeds per kind
    .venv/bin/python benchmarks/validation/validate_speedup.py --quick    # 4 seeds (the test runs this)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from scalestack.analysis.speedup import COMPONENTS, speedup_stack, with_spin  # noqa: E402
from scalestack.sim import workloads as named  # noqa: E402
from scalestack.sim.engine import TID_BASE, simulate  # noqa: E402

MANAGED_KINDS = ("serial", "locks", "barriers", "gc", "mixed", "oversubscribed")
# native programs (issue 27): no thread that only drives; SEQ from the N-thread run's serial windows
NATIVE_KINDS = ("participates", "coordinator", "spin")
KINDS = MANAGED_KINDS + NATIVE_KINDS


def workload(kind: str, n: int, seed: int) -> dict:
    """Total work fixed; N workers share it."""
    if kind == "participates":
        return named.participates(n, seed)
    if kind == "coordinator":
        return named.coordinator(n, seed)
    if kind == "spin":
        return named.spin_barriers(n, seed)
    rng = np.random.default_rng(seed)
    mixed = kind in ("mixed", "oversubscribed")
    total = int(rng.integers(4_000_000, 8_000_000))
    phases = 4
    serial = int(rng.integers(200_000, 800_000)) if kind == "serial" or mixed else 0
    cs = kind == "locks" or mixed
    skew = rng.lognormal(0, 0.4 if kind == "barriers" or mixed else 0.0, 64)[:n]
    skew = skew / skew.mean()
    ngc = 2 if kind == "gc" or mixed else 0
    parties = n + ngc
    work = [[] for _ in range(n)]
    gcs = [[] for _ in range(ngc)]
    b = 0
    for p in range(phases):
        for w in range(n):
            chunk = int(total / phases / n * skew[w])
            if cs:
                for _ in range(4):
                    work[w] += [["compute", int(chunk * 0.2)], ["lock", 0], ["compute", int(chunk * 0.05)],
                                ["unlock", 0]]
            else:
                work[w].append(["compute", chunk])
            if ngc:
                work[w] += [["barrier", b, parties], ["barrier", b + 1, parties]]
            elif p < phases - 1:
                work[w].append(["barrier", b, n])
        if ngc:
            for g in range(ngc):
                gcs[g] += [["barrier", b, parties], ["compute", int(total * 0.02 / ngc)], ["barrier", b + 1, parties]]
            b += 2
        else:
            b += 1
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": ([["compute", serial]] if serial else []) + [["spawn", i] for i in range(1, n + 1 + ngc)]
            + [["join", i] for i in range(1, n + 1 + ngc)]}]
    ths += [{"name": f"worker-{w}", "role": "app", "start": False, "ops": work[w]} for w in range(n)]
    ths += [{"name": f"GC Thread#{g}", "role": "gc", "start": False, "ops": gcs[g]} for g in range(ngc)]
    return {"name": f"{kind}-{n}", "threads": ths}


def _union(spans) -> int:
    """Length of the union of [a, b) spans."""
    total, hi = 0, None
    for a, b in sorted(spans):
        if hi is None or a > hi:
            total, hi = total + b - a, b
        elif b > hi:
            total, hi = total + b - hi, b
    return total


def _role_spans(wl, truth, role: str) -> list[tuple[int, int]]:
    """The simulator's own record of when threads of `role` computed (truth segments)."""
    tids = {TID_BASE + i for i, th in enumerate(wl["threads"]) if th.get("role", "app") == role}
    return [(int(a), int(b)) for t, a, b, *_ in truth["segments"].tolist() if t in tids]


def truth_components(res, n: int, t_p: int, single=None) -> dict[str, float]:
    """Every component from the simulator's own records, not from the trace (speedup units).

    GC: N·G_N − G_1 with G the union of the GC threads' compute spans (the STW windows). SEQ: the
    same with the main thread's compute spans (its serial part). SYNC and CONT: the app threads'
    waits whose reason is a lock/barrier/queue/spin (minus the STW windows) or a CPU. IMB: per app
    thread, from its last compute or wait to the last app thread's. OTHER: zero (no interference).
    """
    roles = {TID_BASE + i: th.get("role", "app") for i, th in enumerate(res.workload["threads"])}
    out = {"other": 0.0}
    if single is not None:
        for comp, role in (("gc", "gc"), ("seq", "main")):
            mt = _union(_role_spans(res.workload, res.truth, role))
            st = _union(_role_spans(single.workload, single.truth, role))
            out[comp] = (n * mt - st) / t_p
        last: dict[int, int] = {}
        for t, _a, b, *_ in res.truth["segments"].tolist():
            if roles.get(t) == "app":
                last[t] = max(last.get(t, 0), int(b))
        for tid, _a, b, _r, _w in res.truth["waits"]:
            if roles.get(tid) == "app":
                last[tid] = max(last.get(tid, 0), int(b))
        ends = np.array(list(last.values()))
        out["imb"] = float((ends.max() - ends).sum()) / t_p if ends.size else 0.0
    sync = cont = 0
    gc_windows = res.gc_windows
    for tid, a, b, reason, _who in res.truth["waits"]:
        if roles.get(tid) != "app":
            continue
        if reason == "cpu":
            cont += b - a
        elif reason in ("lock", "barrier", "queue empty", "queue full", "spinning"):
            # the time the collector held everyone is GC, not synchronization
            sync += (b - a) - sum(max(0, min(b, e) - max(a, s)) for s, e in gc_windows)
    return {**out, "sync": sync / t_p, "cont": cont / t_p}


def _count_spans(spans: list[tuple[int, int]], t1: int) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints u and the number of spans covering [u[k], u[k+1]), over [0, t1]."""
    a = np.array([x for x, _ in spans] + [0, t1], dtype=np.int64)
    b = np.array([y for _, y in spans], dtype=np.int64)
    t = np.concatenate([a, b])
    d = np.concatenate([np.ones(len(spans)), [0, 0], -np.ones(len(spans))]).astype(np.int64)
    o = np.argsort(t, kind="stable")
    return t[o], np.cumsum(d[o])


def truth_native(res, n: int, t_p: int, single) -> dict[str, float]:
    """Every component of a native program from the simulator's own records (speedup units).

    Active: a thread computing (truth segments) or waiting for a CPU (truth waits); a spinning thread
    waits (its spin is SYNC, or SEQ where it spins through a serial part). Serial
    windows: spans in which at most one thread is active, unless that one waits for a CPU (then the
    others' N − 1 slots are CONT); SEQ = (N − 1)·T_serial / T_p (thesis eq. 3.12). Workers: the threads the workload does not mark as coordinators. SYNC: the workers' lock /
    barrier / queue / spin waits outside the serial windows; IMB: from each worker's last activity to
    the last worker's, outside them; CONT: the workers' waits for a CPU less the 1-thread run's.
    """
    wl = res.workload
    roles = {TID_BASE + i: th.get("kind", "worker") for i, th in enumerate(wl["threads"])}
    running: list[tuple[int, int]] = [(int(a), int(b)) for _t, a, b, *_ in res.truth["segments"].tolist() if b > a]
    queued = [(int(a), int(b)) for _t, a, b, r, _w in res.truth["waits"] if r == "cpu" and b > a]
    u, r = _count_spans(running + queued, t_p)
    ur, rr = _count_spans(running, t_p)
    rr = rr[np.clip(np.searchsorted(ur, u, side="right") - 1, 0, len(ur) - 1)]  # running count on u's segments
    dt = np.diff(u)
    # one thread waiting for a CPU while the others wait for it: contention, not serial code
    contw = (r[:-1] == 1) & (rr[:-1] == 0)
    serial = ((r[:-1] <= 1) & ~contw) * dt
    g = np.concatenate([[0], np.cumsum(serial)]).astype(np.float64)
    gc_ = np.concatenate([[0], np.cumsum(contw * dt)]).astype(np.float64)

    def ser(a, b, cum=g):
        return float(np.interp(b, u, cum) - np.interp(a, u, cum))

    sync = cont = 0.0
    last: dict[int, int] = {}
    for tid, a, b, reason, _who in res.truth["waits"]:
        if roles.get(tid) != "worker":
            continue
        if reason in ("lock", "barrier", "queue empty", "queue full", "spinning"):
            sync += (b - a) - ser(a, b) - ser(a, b, gc_)
        elif reason == "cpu":
            cont += b - a
        last[tid] = max(last.get(tid, 0), int(b))
    for t, _a, b, *_ in res.truth["segments"].tolist():
        if roles.get(t) == "worker":
            last[t] = max(last.get(t, 0), int(b))
    ends = list(last.values())
    imb = sum((max(ends) - e) - ser(e, max(ends)) - ser(e, max(ends), gc_) for e in ends) if ends else 0.0
    cont_st = sum(b - a for tid, a, b, reason, _ in single.truth["waits"] if reason == "cpu")
    return {"gc": 0.0, "seq": (n - 1) * float(g[-1]) / t_p, "sync": sync / t_p, "imb": imb / t_p,
            "cont": (cont - cont_st + (n - 1) * float(gc_[-1])) / t_p, "other": 0.0}


def passive(wl: dict) -> dict:
    """The same workload with every spin-then-block wait blocking at once (OMP_WAIT_POLICY=passive)."""
    out = json.loads(json.dumps(wl))
    for th in out["threads"]:
        th["ops"] = [op[:3] if op[0] == "barrier" else op[:2] if op[0] == "lock" else op for op in th["ops"]]
    return out


class _Run:
    def __init__(self, wl, res):
        self.workload, self.truth, self.trace, self.runtime_ns = wl, res.truth, res.trace, res.runtime_ns
        # STW windows, from the ground truth: while a GC thread computes between its two barriers
        gc_tids = {TID_BASE + i for i, th in enumerate(wl["threads"]) if th.get("role") == "gc"}
        segs = res.truth["segments"]
        spans = sorted((int(a), int(b)) for t, a, b, *_ in segs.tolist() if t in gc_tids)
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.gc_windows = [tuple(m) for m in merged]


def one(kind: str, seed: int, ns=(2, 4, 8)) -> list[dict]:
    cores = 4 if kind == "oversubscribed" else 16 if kind == "coordinator" else 8
    wl1 = workload(kind, 1, seed)
    single = _Run(wl1, simulate(wl1, cores=cores))
    out = []
    for n in ns:
        wl = workload(kind, n, seed)
        res = _Run(wl, simulate(wl, cores=cores))
        st = speedup_stack(single.trace, res.trace, n)
        if kind == "spin":  # spinning booked as SYNC from the passive-wait twin runs (scale --omp-passive)
            st = with_spin(st, res.trace, simulate(passive(wl), cores=cores).trace,
                           single.trace, simulate(passive(wl1), cores=cores).trace)
        if kind in NATIVE_KINDS:
            tru = truth_native(res, n, res.runtime_ns, single)
            # the known answer for who works: every thread the workload does not mark as a coordinator
            designed = sum(th.get("kind", "worker") == "worker" for th in wl["threads"])
            if st.form != "native" or st.workers != designed:
                raise SystemExit(f"{kind} N={n} seed {seed}: read as {st.form} with {st.workers} workers, "
                                 f"designed native with {designed}")
        else:
            tru = truth_components(res, n, res.runtime_ns, single)
        s_true = single.runtime_ns / res.runtime_ns
        s_hat = n - sum(getattr(st, c) for c in COMPONENTS if c != "other")
        out.append({"kind": kind, "n": n, "seed": seed, "speedup": st.speedup, "form": st.form,
                    **{c: getattr(st, c) for c in COMPONENTS},
                    "err_pct_of_n": abs(s_hat - s_true) / n * 100,
                    **{f"{c}_err_pct_of_n": abs(getattr(st, c) - tru[c]) / n * 100 for c in COMPONENTS}})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    seeds = 4 if args.quick else args.seeds
    rows = [r for kind in KINDS for s in range(seeds) for r in one(kind, s)]
    print(f"{len(rows)} stacks ({seeds} seeds x {len(KINDS)} kinds x N = 2, 4, 8)")
    print("errors in % of N, mean over seeds (max of any seed for S_hat): |component - truth| / N")
    head = " ".join(f"{c.upper():>6}" for c in COMPONENTS)
    print(f"{'kind':15} {'N':>2} {'S':>5} {'S_hat err':>9} {'max':>5}  {head}   largest component, form")
    summary = {}
    for kind in KINDS:
        for n in (2, 4, 8):
            g = [r for r in rows if r["kind"] == kind and r["n"] == n]
            e = np.array([r["err_pct_of_n"] for r in g])
            mean = {c: float(np.mean([r[c] for r in g])) for c in COMPONENTS}
            cerr = {f"{c}_err": float(np.mean([r[f"{c}_err_pct_of_n"] for r in g])) for c in COMPONENTS}
            cmax = max(max(r[f"{c}_err_pct_of_n"] for c in COMPONENTS) for r in g)
            top = max((c for c in COMPONENTS if c != "other"), key=lambda c: mean[c])
            summary[f"{kind}-{n}"] = {"speedup": float(np.mean([r["speedup"] for r in g])), "err_mean": float(e.mean()),
                                      "form": "/".join(sorted({r["form"] for r in g})),
                                      "err_max": float(e.max()), "component_err_max": float(cmax), **cerr, **mean}
            s = summary[f"{kind}-{n}"]
            errs = " ".join(f"{s[c + '_err']:5.2f}%" for c in COMPONENTS)
            print(f"{kind:15} {n:2d} {s['speedup']:5.2f} {s['err_mean']:8.2f}% {s['err_max']:4.1f}%  {errs}"
                  f"   {top} {mean[top]:.2f}, {s['form']}")
    allerr = np.array([r["err_pct_of_n"] for r in rows])
    comp = np.array([[r[f"{c}_err_pct_of_n"] for c in COMPONENTS] for r in rows])
    print(f"all: estimated speedup (S_hat - S)/N mean {allerr.mean():.2f}%, max {allerr.max():.2f}% (target 3%); "
          f"components |X - truth|/N mean {comp.mean():.2f}%, max {comp.max():.2f}% (target 5%)")
    print("thesis (hardware speedup stacks, real machines): 3.0-5.1% average error of the estimated speedup")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
