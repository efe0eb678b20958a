"""Criticality and bottle-graph speed on a synthetic trace of many state intervals.

Each of 16 threads alternates RUNNING and waiting intervals of random lengths; the whole
trace is analysed once (criticality + bottle graph + 100 windows). Prints intervals per second
and peak memory (ru_maxrss of this process; the trace itself is part of it).

    .venv/bin/python benchmarks/speed/analysis_throughput.py             # 10^7 intervals
    .venv/bin/python benchmarks/speed/analysis_throughput.py --quick     # 10^5 (the test runs this)
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from scalestack.analysis.bottle import bottle  # noqa: E402
from scalestack.analysis.criticality import criticality  # noqa: E402
from scalestack.trace import NameTable, StateTable, ThreadTable, Trace  # noqa: E402


def synthetic(n_intervals: int, n_threads: int = 16, seed: int = 1) -> Trace:
    rng = np.random.default_rng(seed)
    per = n_intervals // n_threads
    lengths = rng.integers(1_000, 200_000, size=(n_threads, per)).astype(np.int64)
    ends = np.cumsum(lengths, axis=1)
    starts = ends - lengths
    # trim every thread to the shortest so that all end together
    t_end = int(ends[:, -1].min())
    tid = np.repeat(np.arange(100, 100 + n_threads, dtype=np.int32), per)
    a, b = starts.ravel(), np.minimum(ends.ravel(), t_end)
    keep = b > a
    state = np.tile(np.array([0, 2], np.uint8), per // 2 + 1)[:per]
    state = np.tile(state, n_threads)
    states = StateTable(tid=tid[keep], start_ns=a[keep], end_ns=b[keep], state=state[keep],
                        cpu=np.full(keep.sum(), -1, np.int16), addr=np.zeros(keep.sum(), np.uint64),
                        waker=np.full(keep.sum(), -1, np.int32), repaired=np.zeros(keep.sum(), bool))
    tids = np.arange(100, 100 + n_threads, dtype=np.int32)
    threads = ThreadTable(tid=tids, pid=np.full(n_threads, 100, np.int32), ppid=np.full(n_threads, -1, np.int32),
                          name=[f"w{i}" for i in range(n_threads)], role=["app"] * n_threads,
                          start_ns=np.zeros(n_threads, np.int64), end_ns=np.full(n_threads, t_end, np.int64),
                          start_known=np.ones(n_threads, bool), exited=np.ones(n_threads, bool))
    names = NameTable(tid=tids, time_ns=np.zeros(n_threads, np.int64), name=[f"w{i}" for i in range(n_threads)])
    return Trace(threads, states, names, {"start_ns": 0, "end_ns": t_end})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--intervals", type=float, default=1e7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    n = int(1e5 if args.quick else args.intervals)
    trace = synthetic(n)
    criticality(trace.between(0, trace.end_ns // 100))  # warm up
    m = len(trace.states)
    rates = {}
    for name, fn in (("criticality", lambda: criticality(trace)), ("bottle", lambda: bottle(trace)),
                     ("bottle, 100 windows", lambda: bottle(trace, window=max(1, trace.wall_ns // 100)))):
        dt = float("inf")
        for _ in range(2):  # the better of two runs: the first pays for fresh memory pages
            t0 = time.perf_counter()
            res = fn()
            dt = min(dt, time.perf_counter() - t0)
        rates[name] = m / dt
        print(f"{name:22} {m:>11,d} intervals in {dt:7.3f} s = {m / dt / 1e6:6.2f} M intervals/s")
        del res
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory {peak:.0f} MiB (trace columns: {sum(v.nbytes for v in trace.states.columns().values()) / 2**20:.0f} MiB)")
    print("target: >= 10 M intervals/s on one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
