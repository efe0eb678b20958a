"""Paired plain/recorded runs of the overhead benchmarks' programs, shared by overhead.py and
overhead_aggregate.py (so neither imports the other)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

import scalestack  # noqa: E402


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
