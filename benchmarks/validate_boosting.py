"""Critical-thread boosting in the workload simulator, against the thesis's ch. 7 figures.

Every named workload and N random ones (4-16 threads, one core per thread as the thesis ran them)
is simulated under each policy of `scalestack.sim.policies` (base 2 GHz, boost 2.5 GHz, one
boosted thread at a time, α = 1.2, β = 0.8). The slice is 1/50 of the all-base run: the thesis's
runs lasted seconds with 10 ms slices; ours last milliseconds. Printed: mean speedup over the
all-base run, share of the run with a thread boosted, and energy (the documented model of
`scalestack.power`) normalised to the all-base run; then, per workload class (barrier-heavy:
more barrier than lock wait in the all-base run; critical-section dominated: the reverse), how
dynamic boosting and BIS compare.

    .venv/bin/python benchmarks/validate_boosting.py            # named + 120 random workloads
    .venv/bin/python benchmarks/validate_boosting.py --quick    # named + 10 (the test runs this)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from scalestack.sim.engine import simulate  # noqa: E402
from scalestack.sim.policies import POLICIES, run_policy  # noqa: E402
from scalestack.sim.workloads import NAMED, random_workload  # noqa: E402

THESIS = {"boost-critical": "4.4% avg (4.6% / 4.2% at 8 / 16 threads); boosted 71% of the time; energy -3%",
          "offline": "4.8% avg", "bis": "2.4% / 2.7% at 8 / 16 threads", "all-up": "energy +2.5% / +1.3%"}


def workloads(n_random: int, seed: int) -> list[tuple[str, dict, int]]:
    out = []
    for name, fn in NAMED.items():
        if name == "random":
            continue
        if name == "fig32":  # fixed at 4 threads
            out.append((name, fn(), 4))
            continue
        for threads in (5, 9):
            out.append((f"{name}-{threads}", fn(threads, seed), threads))
    rng = np.random.default_rng(seed)
    for k in range(n_random):
        threads = int(rng.integers(4, 17))
        out.append((f"random-{k}", random_workload(threads, seed * 10_000 + k), threads))
    return out


def wait_kind(res) -> str:
    waits = {"barrier": 0, "lock": 0}
    for _tid, a, b, reason, _who in res.truth["waits"]:
        if reason in waits:
            waits[reason] += b - a
    return "barrier-heavy" if waits["barrier"] >= waits["lock"] else "critical-section"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    wls = workloads(10 if args.quick else args.random, args.seed)
    t0 = time.perf_counter()
    rows = []
    for name, wl, threads in wls:
        cores = max(threads, 2)
        ref = simulate(wl, cores=cores)
        row = {"workload": name, "threads": threads, "class": wait_kind(ref)}
        for pol in POLICIES[1:]:
            pr = run_policy(wl, pol, cores=cores, reference=ref, slice_ns=max(ref.runtime_ns // 50, 1))
            row[pol] = {"speedup": pr.speedup, "energy": pr.energy, "boosted": pr.boosted_share}
        rows.append(row)
    print(f"{len(rows)} workloads ({len(wls) - (10 if args.quick else args.random)} named variants), "
          f"{time.perf_counter() - t0:.1f} s")
    print(f"{'policy':16} {'mean speedup':>13} {'boosted':>8} {'energy':>8}   thesis")
    summary = {}
    for pol in POLICIES[1:]:
        sp = np.array([r[pol]["speedup"] for r in rows])
        en = np.array([r[pol]["energy"] for r in rows])
        bo = np.array([r[pol]["boosted"] for r in rows])
        summary[pol] = {"speedup_pct": float((sp.mean() - 1) * 100), "boosted_pct": float(bo.mean() * 100),
                        "energy_pct": float((en.mean() - 1) * 100)}
        print(f"{pol:16} {summary[pol]['speedup_pct']:12.1f}% {summary[pol]['boosted_pct']:7.0f}% "
              f"{summary[pol]['energy_pct']:+7.1f}%   {THESIS.get(pol, '')}")
    print("\nby workload class: mean speedup of dynamic boosting vs BIS, and who wins")
    for cls in ("barrier-heavy", "critical-section"):
        g = [r for r in rows if r["class"] == cls]
        if not g:
            continue
        dyn = np.array([r["boost-critical"]["speedup"] for r in g])
        bis = np.array([r["bis"]["speedup"] for r in g])
        summary[cls] = {"n": len(g), "boost_critical_pct": float((dyn.mean() - 1) * 100),
                        "bis_pct": float((bis.mean() - 1) * 100), "dynamic_wins": int(np.sum(dyn > bis * 1.001)),
                        "bis_wins": int(np.sum(bis > dyn * 1.001))}
        s = summary[cls]
        print(f"{cls:18} n={s['n']:3d}  boost-critical {s['boost_critical_pct']:5.1f}%  bis {s['bis_pct']:5.1f}%  "
              f"dynamic wins {s['dynamic_wins']}, BIS wins {s['bis_wins']}")
        if cls == "critical-section":
            for r in g:
                print(f"    {r['workload']:22} boost-critical {(r['boost-critical']['speedup'] - 1) * 100:5.1f}%  "
                      f"bis {(r['bis']['speedup'] - 1) * 100:5.1f}%")
    print("thesis: boosting criticality wins on programs with many barriers; BIS only on critical-section-"
          "dominated ones (streamcluster)")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
