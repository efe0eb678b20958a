"""What the in-kernel aggregation (`record --aggregate`, `top`) costs a program, paired runs.

`benchmarks/overhead.py` imports `measure_aggregate` for its aggregate rows; run alone, this
measures the futex-heavy and compute programs with the aggregator beside perf recording.
The aggregated run is timed from the command's release (it is held before its exec until the
BPF program is attached) to its exit, the plain run around fork/exec/wait. Both also report the
program's own CPU time (user + system, from wait4), which a machine shared with other work
disturbs less than the wall clock; the kernel-side handler runs in the switching thread's
context, so its cost is in that figure.

    .venv/bin/python benchmarks/overhead_aggregate.py            # 7 pairs per program
    .venv/bin/python benchmarks/overhead_aggregate.py --quick    # 1 pair, short programs
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scalestack.errors import UserError  # noqa: E402


def plain_cpu_run(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one plain run."""
    import subprocess

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime


def aggregated_run(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds from release to exit under the aggregator, CPU seconds, events handled."""
    from scalestack.collect.ebpf import Aggregator, GatedCommand

    gated = GatedCommand(argv, quiet=True)
    with Aggregator(gated.pid) as agg:
        gated.release()
        t0 = time.perf_counter()
        _, status, ru = os.wait4(gated.pid, 0)
        gated.proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - t0
        snap = agg.snapshot()
    return elapsed, ru.ru_utime + ru.ru_stime, snap.events


def measure_aggregate(argv: list[str], pairs: int) -> dict:
    from scalestack.collect.ebpf import check

    check()
    plain, agg, pcpu, acpu, events = [], [], [], [], []
    plain_cpu_run(argv)
    aggregated_run(argv)  # builds (once) and warms
    for _ in range(pairs):
        w, c = plain_cpu_run(argv)
        plain.append(w)
        pcpu.append(c)
        w, c, n = aggregated_run(argv)
        agg.append(w)
        acpu.append(c)
        events.append(n)
    p, a = statistics.median(plain), statistics.median(agg)
    return {"plain_s": p, "recorded_s": a, "slowdown_pct": (a / p - 1) * 100, "pairs": pairs,
            "plain_cpu_s": statistics.median(pcpu), "recorded_cpu_s": statistics.median(acpu),
            "cpu_slowdown_pct": (statistics.median(acpu) / statistics.median(pcpu) - 1) * 100,
            "events": int(statistics.median(events)), "event_rate_per_s": statistics.median(events) / a,
            "pair_slowdowns_pct": [(x / y - 1) * 100 for x, y in zip(agg, plain, strict=True)]}


def handler_cost(argv: list[str]) -> dict[str, tuple[int, float]]:
    """Per BPF program: invocations and mean ns per invocation while `argv` runs, from the
    kernel's own BPF statistics (kernel.bpf_stats_enabled, switched on only for this run).
    Every sched_switch of the machine pays the filter; the program's own events pay the rest."""
    import json

    from scalestack.collect.ebpf import Aggregator, GatedCommand, _which

    stats = "/proc/sys/kernel/bpf_stats_enabled"
    old = open(stats).read().strip()
    open(stats, "w").write("1")
    try:
        gated = GatedCommand(argv, quiet=True)
        with Aggregator(gated.pid):
            gated.release()
            t0 = time.perf_counter()
            gated.proc.wait()
            elapsed = time.perf_counter() - t0
            out = subprocess.run([_which("bpftool"), "prog", "show", "--json"], capture_output=True, text=True).stdout
            ours = {"on_switch", "on_wakeup", "on_wakeup_new", "on_fork", "on_exit", "on_rename"}
            newest: dict[str, dict] = {}  # the programs just loaded: the highest id of each name
            for p in json.loads(out):
                if p.get("name") in ours and p["id"] > newest.get(p["name"], {"id": -1})["id"]:
                    newest[p["name"]] = p
            mine = list(newest.values())
    finally:
        open(stats, "w").write(old)
    res = {p["name"]: (int(p.get("run_cnt", 0)), p.get("run_time_ns", 0) / max(p.get("run_cnt", 0), 1))
           for p in mine}
    res["_elapsed_s"] = (0, elapsed)
    return res


def print_handler_cost(argv: list[str], label: str) -> None:
    cost = handler_cost(argv)
    elapsed = cost.pop("_elapsed_s")[1]
    total = sum(n * ns for n, ns in cost.values()) / 1e9
    for prog_name, (cnt, ns) in sorted(cost.items()):
        print(f"{'':34} BPF {prog_name:14} {cnt:9d} calls, {ns:6.0f} ns each (kernel's BPF stats)")
    print(f"{label:34} BPF handlers ran {total * 1e3:.2f} ms in a {elapsed:.3f} s run: {total / elapsed * 100:.2f}% of "
          f"one CPU, {total / elapsed / (os.cpu_count() or 1) * 100:.2f}% of the machine")


def main(argv: list[str] | None = None) -> int:
    from overhead import build, measure

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pairs", type=int)
    ap.add_argument("--no-perf", action="store_true", help="skip the perf rows")
    args = ap.parse_args(argv)
    pairs = args.pairs or (1 if args.quick else 7)
    with tempfile.TemporaryDirectory(prefix="scalestack-overhead-") as tmp:
        progs = build(Path(tmp), args.quick)
        print(f"{'program':34} {'config':13} {'plain s':>9} {'recorded s':>11} {'slowdown':>9} {'events/s':>10}")
        for name, prog in progs.items():
            if not name.startswith(("futex", "compute")):
                continue
            configs = [("aggregate", None)] + ([] if args.no_perf else [("perf", {"collector": "perf"})])
            for cname, opts in configs:
                try:
                    r = measure_aggregate(prog, pairs) if opts is None else measure(prog, pairs, opts)
                except UserError as exc:
                    print(f"{name:34} {cname:13} skipped: {exc}")
                    continue
                print(f"{name:34} {cname:13} {r['plain_s']:9.3f} {r['recorded_s']:11.3f} {r['slowdown_pct']:8.1f}% "
                      f"{r['event_rate_per_s']:10.0f}", flush=True)
                if "cpu_slowdown_pct" in r:
                    print(f"{'':34} {'':13} CPU time {r['plain_cpu_s']:.3f} s -> {r['recorded_cpu_s']:.3f} s: "
                          f"{r['cpu_slowdown_pct']:+.1f}%")
                if "pair_slowdowns_pct" in r:
                    print(f"{'':34} {'':13} pairs: " + " ".join(f"{x:+.1f}%" for x in r["pair_slowdowns_pct"]))
            if name.startswith("futex"):
                print_handler_cost(prog, name)
        cdir = ROOT / "workloads" / "c"
        subprocess.run(["gcc", "-O1", "-pthread", str(cdir / "prodcons.c"), "-o", f"{tmp}/prodcons"], check=True)
        print_handler_cost([f"{tmp}/prodcons"], "switch storm (producer/consumer)")
    print("thesis kernel-module collector: 0.68% average, 1.11% max (Du Bois, Table 5.1)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as exc:
        print(f"overhead_aggregate: {exc}", file=sys.stderr)
        sys.exit(2)
