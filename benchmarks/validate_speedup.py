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

    .venv/bin/python benchmarks/validate_speedup.py            # 40 seeds per kind
    .venv/bin/python benchmarks/validate_speedup.py --quick    # 4 seeds (the test runs this)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from scalestack.analysis.speedup import COMPONENTS, speedup_stack  # noqa: E402
from scalestack.sim.engine import TID_BASE, simulate  # noqa: E402

KINDS = ("serial", "locks", "barriers", "gc", "mixed", "oversubscribed")


def workload(kind: str, n: int, seed: int) -> dict:
    """Total work fixed; N workers share it."""
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


def truth_components(res, n: int, t_p: int) -> dict[str, float]:
    """SYNC and CONT from the simulator's own wait reasons (app threads only), in speedup units."""
    roles = {TID_BASE + i: th.get("role", "app") for i, th in enumerate(res.workload["threads"])}
    sync = cont = 0
    gc_windows = res.gc_windows
    for tid, a, b, reason, _who in res.truth["waits"]:
        if roles.get(tid) != "app":
            continue
        if reason == "cpu":
            cont += b - a
        elif reason in ("lock", "barrier", "queue", "spinning"):
            # the time the collector held everyone is GC, not synchronization
            sync += (b - a) - sum(max(0, min(b, e) - max(a, s)) for s, e in gc_windows)
    return {"sync": sync / t_p, "cont": cont / t_p}


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
    cores = 4 if kind == "oversubscribed" else 8
    wl1 = workload(kind, 1, seed)
    single = simulate(wl1, cores=cores)
    out = []
    for n in ns:
        wl = workload(kind, n, seed)
        res = _Run(wl, simulate(wl, cores=cores))
        st = speedup_stack(single.trace, res.trace, n)
        tru = truth_components(res, n, res.runtime_ns)
        out.append({"kind": kind, "n": n, "seed": seed, "speedup": st.speedup,
                    **{c: getattr(st, c) for c in COMPONENTS},
                    "err_pct_of_n": abs(st.other) / n * 100,
                    "sync_err_pct_of_n": abs(st.sync - tru["sync"]) / n * 100,
                    "cont_err_pct_of_n": abs(st.cont - tru["cont"]) / n * 100})
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
    print(f"{'kind':15} {'N':>2} {'speedup':>8} {'|OTHER|/N mean':>15} {'max':>6} {'SYNC err/N':>11} {'CONT err/N':>11}"
          f"   largest component")
    summary = {}
    for kind in KINDS:
        for n in (2, 4, 8):
            g = [r for r in rows if r["kind"] == kind and r["n"] == n]
            e = np.array([r["err_pct_of_n"] for r in g])
            mean = {c: float(np.mean([r[c] for r in g])) for c in COMPONENTS}
            top = max((c for c in COMPONENTS if c != "other"), key=lambda c: mean[c])
            summary[f"{kind}-{n}"] = {"speedup": float(np.mean([r["speedup"] for r in g])), "err_mean": float(e.mean()),
                                      "err_max": float(e.max()),
                                      "sync_err": float(np.mean([r["sync_err_pct_of_n"] for r in g])),
                                      "cont_err": float(np.mean([r["cont_err_pct_of_n"] for r in g])), **mean}
            s = summary[f"{kind}-{n}"]
            print(f"{kind:15} {n:2d} {s['speedup']:8.2f} {s['err_mean']:14.2f}% {s['err_max']:5.1f}% "
                  f"{s['sync_err']:10.2f}% {s['cont_err']:10.2f}%   {top} {mean[top]:.2f}")
    allerr = np.array([r["err_pct_of_n"] for r in rows])
    print(f"all: (S_hat - S)/N mean {allerr.mean():.2f}%, max {allerr.max():.2f}%   thesis (hardware stacks): 3.0-5.1%")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
