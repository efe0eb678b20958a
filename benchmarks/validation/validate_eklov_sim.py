"""Eklov's speedup-stack protocol inside the memory-hierarchy simulator, against exact truth.

For each workload and thread count N: the truth stack (contention switched off exactly: LLC
set-partitioned C/N per thread + private DRAM + no sync waits; shared LLC and DRAM without sync
waits; the real run) and the protocol's stack (each thread isolated next to a pirate of C(N-1)/N,
the real run's waits subtracted, the real run). Prints cache, memory and sync in units of N, truth
vs protocol, the error as % of N, and the pirate's checks (fetch ratio, share of W lost per segment,
pirate's share of the bus, profiled threads flagged). Two machines: the thesis's 2 MB 8-way LLC (hwsim
default) and the same LLC 16-way, the associativity of the paper's Nehalem.

Usage: python benchmarks/validation/validate_eklov_sim.py [--quick] [--accesses N] [--counts 2,4,8,16] [--ways 8,16]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scalestack.hwsim import HwConfig
from scalestack.hwsim.eklov_sim import COMPONENTS, validate, workloads

THRESHOLD = 0.01


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="3 workloads, N = 2, 4, 100 K accesses, 16-way only")
    ap.add_argument("--accesses", type=int, default=None, help="total accesses of the 1-thread run (default 800 K)")
    ap.add_argument("--counts", default=None, help="thread counts (default 2,4,8,16)")
    ap.add_argument("--ways", default=None, help="LLC associativities to run (default 8,16)")
    ap.add_argument("--pirate-gap", type=int, default=1, help="instructions per pirate access (1 = 4 a cycle)")
    ap.add_argument("--order", default="sawtooth", choices=("sawtooth", "cyclic"), help="pirate access order")
    args = ap.parse_args()
    accesses = args.accesses or (100_000 if args.quick else 800_000)
    counts = [int(x) for x in (args.counts or ("2,4" if args.quick else "2,4,8,16")).split(",")]
    ways = [int(x) for x in (args.ways or ("16" if args.quick else "8,16")).split(",")]
    chosen = workloads(accesses)
    if args.quick:
        chosen = [w for w in chosen if w.name in ("ub-rnd", "fits-llc", "stream")]
    print(f"{accesses:,} accesses per workload (1-thread run), N = {counts}, pirate gap {args.pirate_gap} "
          f"({args.order}), flag: fetch ratio or share of W lost over {100 * THRESHOLD:.0f}%, "
          "or the pirate's misses over 5% of the bus")
    for w_ in ways:
        cfg = HwConfig(llc_ways=w_)
        t0 = time.perf_counter()
        print(f"\n== LLC {cfg.llc_bytes >> 20} MB {w_}-way, {cfg.llc_sets} sets "
              f"(cells: truth / protocol, error as % of N) ==")
        print(f"{'workload':9s} {'N':>3s} {'S_meas':>6s} | {'cache':^22s} | {'memory':^22s} | {'sync':^22s} |"
              f" {'fetch':>6s} {'lost':>6s} {'bus':>6s} {'flag':>4s}")
        errs: dict[tuple[str, int], list[float]] = {}
        kept: list[float] = []  # errors of the cells whose pirate passed every check
        flagged_cells = set()
        for w in chosen:
            v = validate(w, counts, cfg, pirate_gap=args.pirate_gap, threshold=THRESHOLD, order=args.order)
            for r in v.rows():
                n = r["n"]
                cells = []
                for c in COMPONENTS:
                    cells.append(f"{r[c + '_truth']:+6.2f}/{r[c + '_protocol']:+6.2f} {r[c + '_err_pct']:+6.1f}%")
                    errs.setdefault((c, n), []).append(abs(r[c + "_err_pct"]))
                    if not r["flagged"]:
                        kept.append(abs(r[c + "_err_pct"]))
                if r["flagged"]:
                    flagged_cells.add((w.name, n))
                print(f"{w.name:9s} {n:3d} {r['s_meas']:6.2f} | " + " | ".join(cells) +
                      f" | {100 * r['fetch_ratio']:5.2f}% {100 * r['lost_share']:5.2f}% {100 * r['bus_share']:5.1f}% {r['flagged']:4d}")
        print(f"summary, |protocol - truth| / N (mean / max over {len(chosen)} workloads), "
              f"{time.perf_counter() - t0:.0f} s:")
        for n in counts:
            parts = [f"{c} {np.mean(errs[(c, n)]):4.1f}% / {np.max(errs[(c, n)]):4.1f}%" for c in COMPONENTS]
            print(f"  N={n:2d}: " + ", ".join(parts))
        all_e = [e for k, v in errs.items() for e in v]
        within = sum(e <= 5.0 for e in all_e)
        print(f"  all: mean {np.mean(all_e):.2f}% max {np.max(all_e):.2f}%; {within} of {len(all_e)} components "
              f"within 5% of N; cells with a flagged pirate: {sorted(flagged_cells) or 'none'}")
        if kept:
            print(f"  cells whose pirate passed the checks: mean {np.mean(kept):.2f}% max {np.max(kept):.2f}%; "
                  f"{sum(e <= 5.0 for e in kept)} of {len(kept)} components within 5% of N")


if __name__ == "__main__":
    main()
