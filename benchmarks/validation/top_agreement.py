"""Does the in-kernel aggregator agree with perf? The same run watched by both at once.

Each program is started held before its exec; the eBPF aggregator and `perf record -a --pid`
attach, then it runs. Per thread: criticality C_j and running time Run_j from both, and the
thread's own CPU clock (the workloads' SCHEDSTAT_OUT self-report) where it has one.

    .venv/bin/python benchmarks/validation/top_agreement.py            # 3 runs each of barrier, mutex, Java
    .venv/bin/python benchmarks/validation/top_agreement.py --quick    # 1 run of the barrier program
    .venv/bin/python benchmarks/validation/top_agreement.py --bpftrace # a third opinion (below)

With --bpftrace, bpftrace also writes every sched_switch of the machine during the run, and the
offline sweep (analysis/criticality.timeline) computes each thread's C_j from those switch
instants: the same quantity the aggregator keeps online, from an independent event trace.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


class SwitchTrace:
    """bpftrace writing every sched_switch (time, prev tid, next tid) to a file while it runs."""

    def __init__(self, path: str):
        import shutil
        import time

        if shutil.which("bpftrace") is None:
            raise UserError("--bpftrace needs bpftrace (apt-get install bpftrace)")
        self.path = path
        prog = 'tracepoint:sched:sched_switch { printf("%llu %d %d\\n", nsecs, args->prev_pid, args->next_pid); }'
        self.proc = subprocess.Popen(["bpftrace", "-e", prog], stdout=open(path, "w"), stderr=subprocess.DEVNULL)
        time.sleep(4)  # attached

    def criticality(self, tids: set[int]) -> dict[int, float]:
        import time

        import numpy as np

        from scalestack.analysis.criticality import timeline

        time.sleep(0.3)
        self.proc.send_signal(2)
        self.proc.wait()
        ev = np.array([[int(x) for x in ln.split()] for ln in open(self.path) if ln[:1].isdigit()], dtype=np.int64)
        ev = ev[np.argsort(ev[:, 0], kind="stable")]
        start: dict[int, int] = {}
        ivs = []
        for t, prev, nxt in ev.tolist():  # a few 10^4 events: a plain loop is fine here
            if prev in tids and prev in start:
                ivs.append((prev, start.pop(prev), t))
            if nxt in tids:
                start[nxt] = t
        iv = np.array(ivs, dtype=np.int64)
        tl, where = timeline(iv[:, 1], iv[:, 2], int(iv[:, 1].min()), int(iv[:, 2].max()))
        m = len(iv)
        c = tl.F[where[1:2 * m:2]] - tl.F[where[0:2 * m:2]]
        return {t: float(c[iv[:, 0] == t].sum()) for t in tids}


def main(argv: list[str] | None = None) -> int:
    from scalestack.collect.aggregator import check
    from tests.top.agreement import both, compare, summary

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--min-ms", type=float, default=2.0, help="threads below this C_j are listed, not scored")
    ap.add_argument("--bpftrace", action="store_true", help="also C_j from a bpftrace switch trace, swept offline")
    args = ap.parse_args(argv)
    check()
    runs = args.runs or (1 if args.quick else 3)
    worst: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="scalestack-agree-") as tmp:
        for name, cmd in programs(Path(tmp), args.quick).items():
            for k in range(runs):
                third = SwitchTrace(f"{tmp}/switches.txt") if args.bpftrace else None
                trace, snap = both(cmd)
                rows = compare(trace, snap)
                if third is not None:
                    offline = third.criticality(set(snap.tid.tolist()))
                    for r in rows:
                        r["crit_offline_ms"] = offline.get(r["tid"], 0.0) / 1e6
                shown = [r for r in rows if r["run_perf_ms"] >= 1.0 or r["run_ebpf_ms"] >= 1.0]
                print(f"\n== {name}, run {k + 1}: {snap.events} events in the tree, missed switch-ins "
                      f"{snap.missed_switch_in}, perf chain gaps {trace.meta.get('chain_gaps_traced')}")
                print(summary(shown))
                if third is not None:
                    print("C_j from the bpftrace switch trace, swept offline (ms): "
                          + ", ".join(f"{r['tid']} {r['crit_offline_ms']:.3f} (eBPF {r['crit_ebpf_ms']:.3f})"
                                      for r in shown))
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
