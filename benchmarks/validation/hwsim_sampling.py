"""Set sampling versus trace length: the sampled-vs-full ATD gap at 100 K, 300 K and 1 M accesses.

The thesis ran billions of instructions; with 100 K accesses per program, 32 of 4096 sampled LLC
sets see < 1% of the LLC accesses, so the extrapolated inter-thread miss penalty is noisy. This
runs the *same* mixes (same programs, same seed) at several trace lengths, once with 32 sampled
sets and once with full ATDs (identical timing: the ATD only observes), against the same isolated
replays, and prints per core count:
- mean |error| of the isolated-time estimate (eq. 6.5), sampled and full;
- mean |sampled estimate - full estimate| / isolated: the part of the error due to sampling alone;
- Σ sampled inter-thread misses x (LLC accesses / sampled accesses) / Σ full-ATD inter-thread
  misses: whether the estimator's extrapolation is unbiased (1.0) or not.

Usage: python benchmarks/validation/hwsim_sampling.py [--quick] [--mixes N] [--lengths 100000,300000,1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from scalestack.hwsim import HwConfig, mix
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import estimate, isolated_cycles, simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_cycle_accounting import real_programs, synthetic  # noqa: E402


def run(lengths: list[int], sizes: tuple[int, ...], n_mix: int, real: bool, seed: int = 0,
        atd_sets: str = "spread") -> dict:
    """{(length, cores): metrics} over the same mixes at every length."""
    sampled, full = HwConfig(atd_sets=atd_sets), HwConfig(full_atd=True)
    out = {}
    for n_acc in lengths:
        pool = synthetic(n_acc) + (real_programs(n_acc) if real else [])
        rng = np.random.default_rng(seed)
        for k in sizes:
            es, ef, gap, sc_inter, full_inter, llc_cov = [], [], [], 0.0, 0.0, []
            for _ in range(n_mix):
                pick = rng.choice(len(pool), size=k, replace=len(pool) < k)
                tr = mix([pool[i][1] for i in pick])
                iso = isolated_cycles(tr, sampled)
                cs, cf = simulate(tr, sampled), simulate(tr, full)
                for t in range(k):
                    a, b = estimate(cs[t]), estimate(cf[t])
                    es.append(abs(a["isolated"] - iso[t]) / iso[t])
                    ef.append(abs(b["isolated"] - iso[t]) / iso[t])
                    gap.append(abs(a["isolated"] - b["isolated"]) / iso[t])
                    if cs[t, E.C_SACC] > 0:
                        sc_inter += cs[t, E.C_SINTERM] * cs[t, E.C_LLCA] / cs[t, E.C_SACC]
                        llc_cov.append(cs[t, E.C_SACC] / max(cs[t, E.C_LLCA], 1))
                    full_inter += cf[t, E.C_SINTERM]
            out[(n_acc, k)] = {
                "sampled": 100 * np.mean(es), "full": 100 * np.mean(ef), "gap": 100 * np.mean(gap),
                "inter_ratio": sc_inter / full_inter if full_inter else float("nan"),
                "coverage": 100 * np.mean(llc_cov) if llc_cov else 0.0,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mixes", type=int, default=None, help="mixes per core count and length (default 10)")
    ap.add_argument("--lengths", default=None, help="accesses per program, comma-separated")
    ap.add_argument("--no-real", action="store_true", help="synthetic programs only")
    ap.add_argument("--atd-sets", default="spread,aligned", help="sampled-set choices to compare")
    args = ap.parse_args()
    lengths = [int(x) for x in (args.lengths or ("5000,20000" if args.quick else "100000,300000,1000000")).split(",")]
    n_mix = args.mixes or (2 if args.quick else 10)
    sizes = (2, 4) if args.quick else (2, 4, 8)
    t0 = time.process_time()
    print(f"{n_mix} mixes per core count and length; same mixes at every length; realistic memory + prefetching")
    for sel in args.atd_sets.split(","):
        r = run(lengths, sizes, n_mix, real=not (args.no_real or args.quick), atd_sets=sel)
        print(f"\n32 sampled sets, atd_sets={sel}")
        print(f"{'accesses':>9s} {'cores':>5s} | {'sampled err%':>12s} {'full err%':>9s} | {'|samp-full|%':>12s}"
              f" | {'scaled inter / full':>19s} | {'LLC acc. sampled%':>17s}")
        for (n_acc, k), m in r.items():
            print(f"{n_acc:9d} {k:5d} | {m['sampled']:12.2f} {m['full']:9.2f} | {m['gap']:12.2f}"
                  f" | {m['inter_ratio']:19.3f} | {m['coverage']:17.2f}")
    print(f"CPU time {time.process_time() - t0:.0f} s")


if __name__ == "__main__":
    main()
