"""Simulator speed: simulated events per second on large random workloads."""

from __future__ import annotations

import argparse
import time

from scalestack.sim.engine import simulate
from scalestack.sim.workloads import random_workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    target = 50_000 if a.quick else 1_000_000
    events, secs, seed = 0, 0.0, 0
    while events < target:
        wl = random_workload(16, seed)
        for t in wl["threads"][1:]:
            t["ops"] = t["ops"] * 50
        t0 = time.perf_counter()
        r = simulate(wl, cores=8)
        secs += time.perf_counter() - t0
        events += r.events
        seed += 1
    print(f"{events} simulated events in {secs:.2f} s: {events / secs:,.0f} events/s")


if __name__ == "__main__":
    main()
