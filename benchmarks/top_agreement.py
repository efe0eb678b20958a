"""Does the in-kernel aggregator agree with perf? The same run watched by both at once.

Each program is started held before its exec; the eBPF aggregator and `perf record -a --pid`
attach, then it runs. Per thread: criticality C_j and running time Run_j from both, and the
thread's own CPU clock (the workloads' SCHEDSTAT_OUT self-report) where it has one.

    .venv/bin/python benchmarks/top_agreement.py            # 3 runs each of barrier, mutex, Java
    .venv/bin/python benchmarks/top_agreement.py --quick    # 1 run of the barrier program
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from scalestack.errors import UserError  # noqa: E402


def programs(tmp: Path, quick: bool) -> dict[str, list[str]]:
    cdir = ROOT / "workloads" / "c"
    out = {}
    for name in ("barrier_imbalance", "mutex_counter"):
        subprocess.run(["gcc", "-O1", "-pthread", str(cdir / f"{name}.c"), "-o", str(tmp / name)], check=True)
    out["barrier"] = [str(tmp / "barrier_imbalance"), "10", "2000000", "3"]
    if quick:
        return out
    out["mutex"] = [str(tmp / "mutex_counter"), "4", "20000", "500", "3000"]
    subprocess.run(["javac", "-d", str(tmp), str(ROOT / "workloads" / "java" / "AllocHeavy.java")], check=True)
    out["java"] = ["java", "-Xmx64m", "-XX:+UseParallelGC", "-XX:ParallelGCThreads=2", "-cp", str(tmp), "AllocHeavy",
                   "2", "10"]
    return out


def main(argv: list[str] | None = None) -> int:
    from scalestack.collect.ebpf import check
    from tests.top.agreement import both, compare, summary

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--min-ms", type=float, default=2.0, help="threads below this C_j are listed, not scored")
    args = ap.parse_args(argv)
    check()
    runs = args.runs or (1 if args.quick else 3)
    worst: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="scalestack-agree-") as tmp:
        for name, cmd in programs(Path(tmp), args.quick).items():
            for k in range(runs):
                trace, snap = both(cmd)
                rows = compare(trace, snap)
                shown = [r for r in rows if r["run_perf_ms"] >= 1.0 or r["run_ebpf_ms"] >= 1.0]
                print(f"\n== {name}, run {k + 1}: {snap.events} events in the tree, missed switch-ins "
                      f"{snap.missed_switch_in}, perf chain gaps {trace.meta.get('chain_gaps_traced')}")
                print(summary(shown))
                big = [r for r in rows if r["crit_perf_ms"] >= args.min_ms]
                w = worst.setdefault(name, [0.0, 0.0, 0])
                w[0] = max(w[0], *(r["crit_diff_pct"] for r in big))
                w[1] = max(w[1], *(r["run_diff_pct"] for r in big))
                w[2] += sum(r["crit_diff_pct"] <= 1.0 for r in big) / len(big) / runs * 100
    print(f"\n{'program':10} {'worst C_j diff':>15} {'worst Run_j diff':>17} {'C_j within 1%':>14}  (threads >= "
          f"{args.min_ms} ms)")
    for name, (c, r, share) in worst.items():
        print(f"{name:10} {c:14.2f}% {r:16.2f}% {share:13.0f}%")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as exc:
        print(f"top_agreement: {exc}", file=sys.stderr)
        sys.exit(2)
