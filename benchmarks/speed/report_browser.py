"""report.html's timeline in headless Chromium: size, first paint and zoom frame time at 10^6 intervals.

Builds a synthetic Trace (32 threads, every state, CPUs, futex addresses and wakers), writes its
report, opens it in headless Chromium (Playwright driving /usr/bin/chromium) and prints:

* report.html's size and the time to build and write the report (Python);
* first paint: ms from navigation start until the timeline has been drawn (the browser's clock);
* ms per zoom frame: 20 wheel-sized zoom steps in and out, each one draw plus the next animation
  frame, whole run visible at the start (every interval under the pixels), then a 1 ms view.

Nothing is asserted: the figures are printed (docs/report.md quotes them).

    .venv/bin/python benchmarks/speed/report_browser.py            # 10^6 intervals
    .venv/bin/python benchmarks/speed/report_browser.py --quick    # 10^5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from scalestack.report import ReportOptions, build_report, write_report  # noqa: E402
from scalestack.report.browser import browser_page, open_report, why_not  # noqa: E402
from scalestack.trace import State, Trace, make_trace  # noqa: E402


def synthetic(n_intervals: int, n_threads: int = 32, cores: int = 8, seed: int = 1) -> Trace:
    """Threads cycling run -> (runnable | futex wait | sleep | io) -> run, with wakers and CPUs."""
    rng = np.random.default_rng(seed)
    per = n_intervals // n_threads
    tids = np.arange(1000, 1000 + n_threads, dtype=np.int32)
    lengths = rng.integers(500, 60_000, size=(n_threads, per)).astype(np.int64)
    ends = np.cumsum(lengths, axis=1)
    t_end = int(ends[:, -1].max())
    ends[:, -1] = t_end  # every thread ends with the run: its last interval is stretched
    starts = np.concatenate([np.zeros((n_threads, 1), np.int64), ends[:, :-1]], axis=1)
    waits = rng.choice([State.RUNNABLE, State.SYNC_WAIT, State.SYNC_WAIT, State.SLEEP, State.IO_WAIT], size=(n_threads, per))
    state = np.where(np.arange(per) % 2 == 0, int(State.RUNNING), waits).astype(np.uint8)
    cpu = np.where((state == State.RUNNING) | (state == State.RUNNABLE), rng.integers(0, cores, (n_threads, per)), -1)
    addr = np.where(state == State.SYNC_WAIT, 0x7f0000001000 + 0x40 * rng.integers(0, 16, (n_threads, per)), 0)
    waker = np.where(state == State.SYNC_WAIT, tids[rng.integers(0, n_threads, (n_threads, per))], -1)
    tid = np.repeat(tids, per).reshape(n_threads, per)
    keep = (ends > starts).ravel()
    names = ["main"] + [f"worker-{k}" for k in range(1, n_threads)]
    return make_trace(
        {"tid": tids, "name": names, "start_ns": np.zeros(n_threads, np.int64), "end_ns": np.full(n_threads, t_end)},
        {"tid": tid.ravel()[keep], "start_ns": starts.ravel()[keep], "end_ns": ends.ravel()[keep],
         "state": state.ravel()[keep], "cpu": cpu.ravel()[keep].astype(np.int16),
         "addr": addr.ravel()[keep].astype(np.uint64), "waker": waker.ravel()[keep].astype(np.int32)},
        meta={"source": "synthetic", "command": ["synthetic", str(n_intervals)], "cores": cores},
    )


ZOOM = """async (steps) => {
  const t = window.scalestackTimeline, frame = () => new Promise(r => requestAnimationFrame(() => r()));
  const out = [];
  for (let k = 0; k < steps; k++) {
    const t0 = performance.now();
    t.zoom(k < steps / 2 ? 0.8 : 1.25, 0.37);
    await frame();
    out.push(performance.now() - t0);
  }
  return out;
}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10^5 intervals instead of 10^6")
    ap.add_argument("--intervals", type=int, help="number of intervals (overrides --quick)")
    args = ap.parse_args()
    reason = why_not()
    if reason:
        print(f"report_browser: skipped: {reason}")
        return 0
    n = args.intervals or (100_000 if args.quick else 1_000_000)
    trace = synthetic(n)
    trace.validate()
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        report = build_report(trace, ReportOptions())
        t_build = time.perf_counter() - t
        t = time.perf_counter()
        written = write_report(report, out)
        t_write = time.perf_counter() - t
        size = os.path.getsize(written["report.html"])
        print(f"{len(trace.states):,} intervals, {len(trace.threads)} threads: report built in {t_build:.1f} s, "
              f"written in {t_write:.1f} s; report.html {size / 1e6:.1f} MB "
              f"({size / len(trace.states):.1f} bytes per interval)")
        with browser_page(1400, 900) as (page, errors):
            info = open_report(page, written["report.html"], timeout_ms=120_000)
            if info["error"] or errors:
                print("report_browser: the page failed:", info["error"], errors)
                return 1
            print(f"first paint: {info['firstPaintMs']:.0f} ms after navigation start "
                  f"({info['lanes']} lanes, {info['intervals']:,} intervals)")
            whole = page.evaluate(ZOOM, 20)
            print(f"zoom, whole run in view: median {statistics.median(whole):.1f} ms/frame, max {max(whole):.1f}")
            page.evaluate("() => window.scalestackTimeline.setRange(0, 1e6)")
            close = page.evaluate(ZOOM, 20)
            print(f"zoom, 1 ms in view: median {statistics.median(close):.1f} ms/frame, max {max(close):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
