"""Where the per-thread cycle accounting goes wrong: LLC vs memory interference, against exact truth.

The truth switches (`private_memory`) split each thread's real slowdown in a multi-program mix in
two, in the Eklov order: LLC interference = cycles with a shared LLC but private DRAM − cycles
alone; memory interference = real cycles − cycles with private DRAM. The accounting's estimates of
the same two parts (net inter-thread-miss penalty, memory waiting counters) are compared with them,
per thread and summed. Full ATDs and no prefetching, so set sampling and prefetch waits do not blur
the DRAM accounting (the ablation's "banks / open page" step).

Usage: python benchmarks/validation/hwsim_interference_split.py [--quick] [--mixes N] [--accesses N]
"""

from __future__ import annotations

import argparse

import numpy as np

from scalestack.hwsim import HwConfig, from_arrays, generate, mix
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import estimate, simulate


def pool(accesses: int) -> list:
    out, seed = [], 0
    for kind in ("stream", "strided", "random", "chase"):
        for ws in (64 << 10, 512 << 10, 2 << 20, 16 << 20):
            for gap in (12, 60):
                seed += 1
                out.append(from_arrays([generate(kind, accesses, ws, gap=gap, stride=256, seed=seed)]))
    return out


def split(k: int, mixes: int, progs: list, cfg: HwConfig, seed: int = 0) -> np.ndarray:
    """Rows per thread: alone, real, est memory, true memory, est LLC (net), true LLC, est isolated."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(mixes):
        tr = mix([progs[i] for i in rng.choice(len(progs), k, replace=False)])
        real = simulate(tr, cfg)
        priv = simulate(tr, cfg.replace(private_memory=True))
        for t in range(k):
            alone = simulate(tr.thread(t), cfg)[0, E.C_CYC]
            e = estimate(real[t])
            rows.append((alone, real[t, E.C_CYC], e["wait"], real[t, E.C_CYC] - priv[t, E.C_CYC],
                         e["inter"] - e["positive"], priv[t, E.C_CYC] - alone, e["isolated"]))
    return np.array(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mixes", type=int, default=None)
    ap.add_argument("--accesses", type=int, default=None)
    ap.add_argument("--variants", default="thesis,inter-wait-to-memory",
                    help="accounting variants: thesis (an inter-thread miss's whole stall in the LLC term) and/or "
                         "inter-wait-to-memory (its DRAM waiting behind other cores in the memory term)")
    args = ap.parse_args()
    mixes = args.mixes or (3 if args.quick else 20)
    accesses = args.accesses or (5000 if args.quick else 30000)
    progs = pool(accesses)
    print(f"{mixes} mixes per core count of 32 synthetic programs, {accesses:,} accesses each; full ATD, no prefetch")
    for variant in args.variants.split(","):
        cfg = HwConfig(full_atd=True, prefetch=False, inter_wait_to_memory=variant == "inter-wait-to-memory")
        print(f"\n{variant}")
        table(cfg, mixes, progs, (2, 4) if args.quick else (2, 4, 8))


def table(cfg: HwConfig, mixes: int, progs: list, sizes: tuple[int, ...]) -> None:
    print(f"{'cores':>5s} {'iso err':>8s} | {'memory est/true':>15s} {'|est-true|/iso':>14s} | "
          f"{'LLC est/true':>12s} {'|est-true|/iso':>14s} | {'both est/true':>13s}")
    for k in sizes:
        a = split(k, mixes, progs, cfg)
        iso = a[:, 0]
        err = np.abs(a[:, 6] - iso) / iso
        mem_r = a[:, 2].sum() / a[:, 3].sum() if a[:, 3].sum() else float("nan")
        llc_r = a[:, 4].sum() / a[:, 5].sum() if a[:, 5].sum() else float("nan")
        both = (a[:, 2] + a[:, 4]).sum() / (a[:, 3] + a[:, 5]).sum()
        print(f"{k:5d} {100 * err.mean():7.1f}% | {mem_r:15.2f} {100 * np.mean(np.abs(a[:, 2] - a[:, 3]) / iso):13.1f}% | "
              f"{llc_r:12.2f} {100 * np.mean(np.abs(a[:, 4] - a[:, 5]) / iso):13.1f}% | {both:13.2f}")


if __name__ == "__main__":
    main()
