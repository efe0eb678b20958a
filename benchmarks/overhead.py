"""What recording costs: slowdown of real programs under `scalestack record`, paired runs.

For each program, runs alternate plain / recorded (the pairing cancels slow drifts of a noisy VM)
and the medians are compared. The recorded run's time is the trace's own wall time (from the
command's exec to its last thread's exit), so perf's start-up and the trace processing are not
counted; the plain run is timed around fork/exec/wait, which adds about a millisecond.

Configurations: the perf collector (sched + futex + runtime events), the same without the futex
syscall tracepoints (`--no-futex`), the tracefs collector (the same events in the kernel's ftrace
buffer, read after the run), the eBPF collector (BTF tracepoint programs into a BPF ring buffer,
drained to a file during the run), and the in-kernel aggregation mode where available
(benchmarks/overhead_aggregate.py). Compare with the thesis's kernel module: 0.68% on average.

    .venv/bin/python benchmarks/overhead.py            # 5 pairs per program (a few minutes)
    .venv/bin/python benchmarks/overhead.py --quick    # 1 pair, short programs (the test runs this)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import scalestack  # noqa: E402
from scalestack.errors import UserError  # noqa: E402


def build(tmp: Path, quick: bool) -> dict[str, list[str]]:
    """The programs: name -> argv. Sizes chosen for ~1 s runs (~0.2 s with --quick)."""
    cdir = ROOT / "workloads" / "c"
    progs: dict[str, list[str]] = {}
    for name in ("balanced", "mutex_counter"):
        exe = tmp / name
        subprocess.run(["gcc", "-O1", "-pthread", str(cdir / f"{name}.c"), "-o", str(exe)], check=True)
    scale = 1 if quick else 5
    progs["compute (balanced, 2 threads)"] = [str(tmp / "balanced"), "2", str(10 * scale), "20000000"]
    progs["futex-heavy (mutex, 4 threads)"] = [str(tmp / "mutex_counter"), "4", str(16000 * scale), "500", "3000"]
    if shutil.which("xz"):
        data = tmp / "data.bin"
        with open(data, "wb") as fh:
            block = os.urandom(1 << 16)
            for i in range(160 * scale):
                fh.write(block[: (1 << 15)] + bytes([i % 251]) * (1 << 15))
        progs["xz -T2"] = ["xz", "-T2", "-6", "--block-size=2MiB", "-k", "-f", "-c", str(data)]
    if shutil.which("javac") and shutil.which("java"):
        subprocess.run(["javac", "-d", str(tmp), str(ROOT / "workloads" / "java" / "AllocHeavy.java")], check=True)
        progs["GC-heavy Java (2 threads)"] = ["java", "-Xmx64m", "-XX:+UseParallelGC", "-cp", str(tmp), "AllocHeavy",
                                             "2", str(10 * scale)]
    return progs


def plain_run(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def recorded_run(argv: list[str], **options) -> tuple[float, int, int]:
    saved = os.dup(1)
    try:  # the program's output is not the benchmark's
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        trace = scalestack.record(argv, None, **options)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return trace.wall_ns / 1e9, int(trace.meta.get("n_events", 0)), int(trace.meta.get("lost_events", 0))


def measure(argv: list[str], pairs: int, options: dict) -> dict:
    plain, rec, events, lost = [], [], [], []
    plain_run(argv)  # warm the page cache and the CPU before the first pair
    for _ in range(pairs):
        plain.append(plain_run(argv))
        r, n, lo = recorded_run(argv, **options)
        rec.append(r)
        events.append(n)
        lost.append(lo)
    p, r = statistics.median(plain), statistics.median(rec)
    return {
        "plain_s": p, "recorded_s": r, "slowdown_pct": (r / p - 1) * 100,
        "events": int(statistics.median(events)), "event_rate_per_s": statistics.median(events) / r,
        "lost": max(lost), "pairs": pairs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one pair of short runs per program")
    ap.add_argument("--pairs", type=int, default=None, help="paired runs per program (default 5, quick 1)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    pairs = args.pairs or (1 if args.quick else 5)
    configs = {"perf": {"collector": "perf"}, "perf no-futex": {"collector": "perf", "futex": False},
               "tracefs": {"collector": "tracefs"}, "ebpf": {"collector": "ebpf"}}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="scalestack-overhead-") as tmp:
        progs = build(Path(tmp), args.quick)
        aggregate = None
        try:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            from overhead_aggregate import measure_aggregate as aggregate  # type: ignore
        except ImportError:
            pass
        print(f"{'program':34} {'config':13} {'plain s':>9} {'recorded s':>11} {'slowdown':>9} {'events/s':>10} {'lost':>6}")
        for name, prog in progs.items():
            for cname, opts in configs.items():
                if args.quick and cname == "perf no-futex":
                    continue
                try:
                    r = measure(prog, pairs, opts)
                except UserError as exc:
                    print(f"{name:34} {cname:13} skipped: {exc}")
                    continue
                results[f"{name} [{cname}]"] = r
                print(f"{name:34} {cname:13} {r['plain_s']:9.3f} {r['recorded_s']:11.3f} {r['slowdown_pct']:8.1f}% "
                      f"{r['event_rate_per_s']:10.0f} {r['lost']:6d}", flush=True)
            if aggregate is not None and not args.quick:
                try:
                    r = aggregate(prog, pairs)
                    results[f"{name} [aggregate]"] = r
                    print(f"{name:34} {'aggregate':13} {r.get('plain_s', 0):9.3f} {r.get('recorded_s', 0):11.3f} "
                          f"{r.get('slowdown_pct', 0):8.1f}%")
                except Exception as exc:  # noqa: BLE001 - report, do not hide, and go on
                    print(f"{name:34} {'aggregate':13} failed: {exc}")
    print("thesis kernel-module collector: 0.68% average, 1.11% max (Du Bois, Table 5.1)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as exc:
        print(f"overhead: {exc}", file=sys.stderr)
        sys.exit(2)
