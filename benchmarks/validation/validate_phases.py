"""Validate phase detection on simulated programs with planted phases (spec parallel-phases.md §3).

For seeded workloads with 2-5 planted phases (4 threads), prints: how often BIC picks the planted
k, the adjusted Rand index of the intervals' phases against the planted ones, the within-phase
reduction of the standard deviation of per-interval CPI (paper: about 50%), and the error of the
whole-run CPI estimated from one representative interval per phase (paper: about 3% mean). Then a
thread-count sweep (1, 2, 4 threads clustered together) with a serial phase, and the time to
cluster 10^6 intervals (subsample + assign).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.metrics import adjusted_rand_score

from scalestack.analysis.phases import cluster, estimate, phases, variance_reduction
from scalestack.sim.samples import interval_truth, planted_run


def planted(seeds: int, interval_samples: int) -> None:
    rows = []
    for seed in range(seeds):
        n_ph = 2 + seed % 4
        ps = planted_run(threads=4, n_phases=n_ph, seed=seed)
        res = phases(ps.trace, interval_samples=interval_samples, seed=seed)
        iv = res.intervals
        truth, purity, cpi = interval_truth(ps, iv["first"], iv["last"], res.params["_sample_order"][0])
        est, true, err = estimate(res, cpi)
        plain = phases(ps.trace, interval_samples=interval_samples, seed=seed, noise_factor=None, init="random")
        rows.append((n_ph, res.k, adjusted_rand_score(truth, iv["phase"]), variance_reduction(res, cpi), err,
                     len(iv["phase"]), plain.k))
    a = np.array(rows)
    print(f"planted phases: {seeds} seeds, 2-5 phases, 4 threads, {interval_samples} samples per interval, "
          f"{a[:, 5].mean():.0f} intervals per run")
    print(f"  right k: {np.mean(a[:, 0] == a[:, 1]) * 100:.0f}% of seeds "
          f"(wrong: {[(int(p), int(k)) for p, k in a[a[:, 0] != a[:, 1]][:, :2]]} planted->found)")
    print(f"  plain SimPoint (random starts, BIC alone): right k in {np.mean(a[:, 0] == a[:, 6]) * 100:.0f}% of seeds, "
          f"found - planted: mean {np.mean(a[:, 6] - a[:, 0]):+.2f}")
    print(f"  adjusted Rand index: mean {a[:, 2].mean():.3f}, median {np.median(a[:, 2]):.3f}, min {a[:, 2].min():.3f}; "
          f">= 0.9 in {np.mean(a[:, 2] >= 0.9) * 100:.0f}% of seeds")
    print(f"  CPI std-dev reduction within phases: mean {a[:, 3].mean() * 100:.1f}% (paper: 50%)")
    print(f"  whole-run CPI from the representatives: mean error {a[:, 4].mean() * 100:.2f}%, "
          f"max {a[:, 4].max() * 100:.2f}% (paper: ~3% mean, <= 15% max)")


def sweep(interval_samples: int) -> None:
    runs = [planted_run(threads=t, n_phases=3, seed=7, serial_phase=2) for t in (1, 2, 4)]
    res = phases([r.trace for r in runs], interval_samples=interval_samples, labels=["T1", "T2", "T4"])
    truth = np.concatenate([interval_truth(r, res.intervals["first"][res.intervals["run"] == i],
                                           res.intervals["last"][res.intervals["run"] == i],
                                           res.params["_sample_order"][i])[0] for i, r in enumerate(runs)])
    print(f"thread-count sweep (1, 2, 4 threads clustered together, planted phase 2 serial): k = {res.k}, "
          f"ARI over all runs {adjusted_rand_score(truth, res.intervals['phase']):.3f}")
    for r in res.phases:
        if r["speedup"] is not None:
            print(f"  {r['run']} phase {r['phase']}: time {r['time_ns'] / 1e9:.2f} s, speedup {r['speedup']:.2f}, "
                  f"parallelism {r['parallelism']:.2f}")


def scale(n: int) -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 15))
    x = centres[rng.integers(0, 6, n)] + 0.05 * rng.normal(size=(n, 15))
    t0 = time.perf_counter()
    k, *_ = cluster(x, np.ones(n), k_max=10, max_fit=100_000)
    print(f"clustering {n} intervals (k-means fitted on a 10^5 subsample, all assigned): {time.perf_counter() - t0:.1f} s, "
          f"k = {k} (planted 6)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=None)
    args = ap.parse_args()
    seeds = args.seeds or (4 if args.quick else 40)
    planted(seeds, 500)
    sweep(500)
    scale(200_000 if args.quick else 1_000_000)


if __name__ == "__main__":
    main()
