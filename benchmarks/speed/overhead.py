"""What recording costs: slowdown of real programs under `scalestack record`, paired runs.

For each program, runs alternate plain / recorded (the pairing cancels slow drifts of a noisy VM)
and the medians are compared. The recorded run's time is the trace's own wall time (from the
command's exec to its last thread's exit), so perf's start-up and the trace processing are not
counted; the plain run is timed around fork/exec/wait, which adds about a millisecond.

Configurations: the perf collector (sched + futex + runtime events), the same without the futex
syscall tracepoints (`--no-futex`), the perf collector sampling at 1 kHz (`--sample`) and the same with
call stacks on the samples and the futex calls (`--stacks`, docs/where.md), the tracefs collector (the same events in the kernel's ftrace
buffer, read after the run), the eBPF collector (BTF tracepoint programs into a BPF ring buffer,
drained to a file during the run), and the in-kernel aggregation mode where available
(benchmarks/speed/overhead_aggregate.py). Compare with the thesis's kernel module: 0.68% on average.

    .venv/bin/python benchmarks/speed/overhead.py            # 5 pairs per program (a few minutes)
    .venv/bin/python benchmarks/speed/overhead.py --quick    # 1 pair, short programs (the test runs this)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from paired_runs import build, measure  # noqa: E402

from scalestack.errors import UserError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one pair of short runs per program")
    ap.add_argument("--pairs", type=int, default=None, help="paired runs per program (default 5, quick 1)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    pairs = args.pairs or (1 if args.quick else 5)
    configs = {"perf": {"collector": "perf"}, "perf no-futex": {"collector": "perf", "futex": False},
               "tracefs": {"collector": "tracefs"}, "ebpf": {"collector": "ebpf"},
               "perf sample": {"collector": "perf", "sample_hz": 1000},
               "perf stacks": {"collector": "perf", "stacks": True}}
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="scalestack-overhead-") as tmp:
        progs = build(Path(tmp), args.quick)
        aggregate = None
        try:
            from overhead_aggregate import measure_aggregate as aggregate  # type: ignore
        except ImportError:
            pass
        print(f"{'program':34} {'config':13} {'plain s':>9} {'recorded s':>11} {'slowdown':>9} {'events/s':>10} {'lost':>6}")
        for name, prog in progs.items():
            for cname, opts in configs.items():
                if args.quick and cname in ("perf no-futex", "perf sample", "perf stacks"):
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
