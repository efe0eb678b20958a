"""Simulated memory accesses per second of the compiled hwsim kernel on one core.

Usage: python benchmarks/speed/hwsim_speed.py [--quick]   (target: >= 20 M accesses/s)

Rates are per second of this process's CPU time (best of the repeats): on a shared machine the
wall clock also counts the time other jobs held the core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scalestack.hwsim import HwConfig, from_arrays, generate
from scalestack.hwsim.accounting import simulate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 500_000 if args.quick else 10_000_000
    simulate(from_arrays([generate("random", 1000, 1 << 20)]), HwConfig())  # compile / load cache
    print(f"{'pattern':10s} {'cores':>5s} {'accesses':>11s} {'cpu s':>8s} {'M acc/s':>8s}")
    for kind, ws in (("stream", 64 << 20), ("random", 512 << 10), ("random", 64 << 20), ("chase", 8 << 20)):
        for cores in (1, 4):
            tr = from_arrays([generate(kind, n // cores, ws, seed=s) for s in range(cores)])
            best = np.inf
            for _ in range(1 if args.quick else 5):
                t = time.process_time()
                simulate(tr, HwConfig())
                best = min(best, time.process_time() - t)
            print(f"{kind:10s} {cores:5d} {n:11,d} {best:8.3f} {n / best / 1e6:8.1f}")


if __name__ == "__main__":
    main()
