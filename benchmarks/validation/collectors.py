"""Which collector to trust: perf, the kernel's ftrace buffer (tracefs), BPF programs on BTF
tracepoints (ebpf) and the eBPF aggregator (aggregate), measured.

For four C programs compiled here (an imbalanced barrier, a contended mutex, a producer/consumer
with condition variables, and a barrier with 4 threads on 2 cores) and a Java program's two
application threads (`workloads/java/AllocHeavy.java`), each thread reports its own
CPU time (CLOCK_THREAD_CPUTIME_ID) and run-queue time (schedstat) just before it ends: the
kernel's truth. Each collector records every program `--runs` times; the table gives, per
collector and program, the scheduler-event gaps per 1000 switches, the RUNNING error against
the truth (median, 95th percentile, max, share within 2%, share "ok": within 2% or 1 ms), the RUNNABLE error (median, 95th
percentile, max, share within 5% or 1 ms), each up to the moment the thread read its figures, and the wall
time of the recorded run against a plain run (slowdown, median of pairs).

    .venv/bin/python benchmarks/validation/collectors.py            # 20 runs each (several minutes)
    .venv/bin/python benchmarks/validation/collectors.py --quick    # 2 runs each (the test runs this)

The eBPF aggregator (`record --aggregate`, row "aggregate") keeps no trace, only per-thread totals up to each
thread's end, so its row compares them with the kernel's figures at each thread's last switch-out
(read by `record`'s bpftrace exit probe), and its "gaps" are the switch-ins and switch-outs
its program saw out of order (a switch-out of a thread it did not know was running, and the reverse).
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

import numpy as np

import scalestack

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from scalestack.collect import ebpf  # noqa: E402
from scalestack.trace.kernel_accounting import ThreadTruth, compare, compare_totals, read_truth  # noqa: E402

PROGRAMS = {
    "imbalanced barrier": ("barrier_imbalance", ["8", "3000000", "3"]),
    "contended mutex": ("mutex_counter", ["4", "3000", "500", "3000"]),
    "producer/consumer": ("prodcons", ["20000", "2", "2000"]),
    "oversubscribed (4 on 2)": ("balanced", ["4", "5", "2000000"]),
}
# the JVM's application threads (two allocating workers; GC and JIT threads run beside them and
# report nothing): compiled with javac when the JDK is there
JAVA = ("java workers", ["java", "-Xmx64m", "-XX:+UseParallelGC", "-XX:ParallelGCThreads=2", "-cp", "{classes}",
                         "AllocHeavy", "2", "10"])


def one_run(argv: list[str], collector: str, truth_file: Path, keep: Path | None = None) -> dict:
    """One recording compared with the truth; with `keep`, a run with a RUNNING or RUNNABLE outlier
    keeps its trace and truth there for explaining it."""
    truth_file.unlink(missing_ok=True)
    os.environ["SCHEDSTAT_OUT"] = str(truth_file)
    try:
        trace = scalestack.record(argv, None, collector=collector)
    finally:
        os.environ.pop("SCHEDSTAT_OUT", None)
    res = _errors(compare(trace, read_truth(truth_file)))
    if keep is not None and not (all(res["rq_ok"]) and all(res["run_ok"])):
        keep.mkdir(parents=True, exist_ok=True)
        stem = f"{Path(argv[0]).name}-{collector}-{time.time_ns()}"
        scalestack.save(trace, str(keep / f"{stem}.trace"))
        (keep / f"{stem}.truth.txt").write_text(truth_file.read_text())
    return {**res, "gaps": trace.meta["chain_gaps_traced"], "events": max(1, int(trace.meta.get("n_events", 1))),
            "wall_s": trace.wall_ns / 1e9}


def _errors(rows: list[dict]) -> dict:
    """Per-thread errors and verdicts of one run, from `scalestack.trace.kernel_accounting` rows."""
    return {"run_err": [r["running_err_pct"] for r in rows], "rq_err": [r["runnable_err_ns"] / 1e6 for r in rows],
            "rq_ok": [r["runnable_ok"] for r in rows], "run_ok": [r["running_ok"] for r in rows]}


def one_run_ebpf(argv: list[str], truth_file: Path) -> dict:
    """One run under the eBPF aggregator. It keeps totals up to each thread's end, not up to the
    thread's own reading (a Java worker runs 10 ms more after it, while the JVM detaches it), so its
    truth is the kernel's figures at each reporting thread's last switch-out (the exit probe of
    `record`); without bpftrace, the threads' own readings."""
    from scalestack.collect.aggregate_recording import watch
    from scalestack.collect.exit_check import ExitProbe

    truth_file.unlink(missing_ok=True)
    os.environ["SCHEDSTAT_OUT"] = str(truth_file)
    try:
        with ExitProbe() as probe:
            last = None
            for _prev, cur, _info in watch(argv, None, interval_s=3600.0, quiet_command=True):
                last = cur
    finally:
        os.environ.pop("SCHEDSTAT_OUT", None)
    truth = read_truth(truth_file)
    at_exit = probe.readings()
    if probe.reason is None:
        truth = {tid: ThreadTruth(tid, *at_exit[tid][:2], None) for tid in truth if tid in at_exit}
    rows = compare_totals(last.tid, last.times_ns["running"], last.times_ns["runnable"], truth)
    return {**_errors(rows), "gaps": last.missed_switch_in + last.missed_switch_out, "events": max(1, last.events)}


def plain(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--keep", type=Path, help="keep the traces of runs with a RUNNING or RUNNABLE outlier in this folder")
    ap.add_argument("--only", help="only the program whose name contains this")
    ap.add_argument("--collectors", default="perf,tracefs,ebpf,aggregate",
                    help="comma-separated: perf, tracefs, ebpf, aggregate")
    args = ap.parse_args(argv)
    runs = 2 if args.quick else args.runs
    collectors = [c for c in args.collectors.split(",") if c]
    if ebpf.unavailable():
        for c in ("ebpf", "aggregate"):
            if c in collectors:
                print(f"{c} row left out: {ebpf.unavailable()}")
                collectors.remove(c)
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="scalestack-collectors-") as tmp:
        tmpd = Path(tmp)
        exes = {}
        for name, (src, _a) in PROGRAMS.items():
            exe = tmpd / src
            subprocess.run(["gcc", "-O1", "-pthread", str(ROOT / "workloads" / "c" / f"{src}.c"), "-o", str(exe)],
                           check=True)
            exes[name] = exe
        programs = {name: [str(exes[name]), *pargs] for name, (_src, pargs) in PROGRAMS.items()}
        if shutil.which("javac") and shutil.which("java"):
            classes = tmpd / "java"
            subprocess.run(["javac", "-d", str(classes), *map(str, (ROOT / "workloads" / "java").glob("*.java"))],
                           check=True)
            programs[JAVA[0]] = [a.replace("{classes}", str(classes)) for a in JAVA[1]]
        else:
            print("java workers row left out: javac/java not installed")
        print(f"{'program':24} {'collector':9} {'gaps/1k ev':>10} {'RUN err% med':>12} {'p95':>6} {'max':>6} "
              f"{'<=2%':>5} {'ok':>5} {'RUNNABLE err ms med':>19} {'p95':>6} {'max':>6} {'ok':>5} {'slowdown':>9}")
        for name, prog in programs.items():
            if args.only and args.only not in name:
                continue
            for collector in collectors:
                if collector == "aggregate":
                    res = [one_run_ebpf(prog, tmpd / "truth.txt") for _ in range(runs)]
                else:
                    res = [one_run(prog, collector, tmpd / "truth.txt", args.keep) for _ in range(runs)]
                run_err = np.abs(np.concatenate([r["run_err"] for r in res]))
                rq_err = np.abs(np.concatenate([r["rq_err"] for r in res]))
                gaps = sum(r["gaps"] for r in res) / sum(r["events"] for r in res) * 1000
                if collector == "aggregate":  # the aggregator's cost is timed by benchmarks/speed/overhead.py
                    slow = float("nan")
                else:
                    plains = [plain(prog) for _ in range(runs)]
                    slow = (statistics.median(r["wall_s"] for r in res) / statistics.median(plains) - 1) * 100
                fig = {"gaps_per_1k_events": gaps, "gaps": sum(r["gaps"] for r in res),
                       "events": sum(r["events"] for r in res), "run_err_median_pct": float(np.median(run_err)),
                       "run_err_p95_pct": float(np.percentile(run_err, 95)), "run_err_max_pct": float(run_err.max()),
                       "within_2pct": float(np.mean(run_err <= 2) * 100),
                       "running_within_2pct_or_1ms": float(np.mean(np.concatenate([r["run_ok"] for r in res])) * 100),
                       "runnable_err_median_ms": float(np.median(rq_err)),
                       "runnable_err_p95_ms": float(np.percentile(rq_err, 95)),
                       "runnable_err_max_ms": float(rq_err.max()), "slowdown_pct": slow, "runs": runs,
                       "runnable_within_5pct_or_1ms": float(np.mean(np.concatenate([r["rq_ok"] for r in res])) * 100)}
                out[f"{name} [{collector}]"] = fig
                print(f"{name:24} {collector:9} {gaps:10.2f} {fig['run_err_median_pct']:12.2f} {fig['run_err_p95_pct']:6.2f} "
                      f"{fig['run_err_max_pct']:6.2f} {fig['within_2pct']:4.0f}% "
                      f"{fig['running_within_2pct_or_1ms']:4.0f}% {fig['runnable_err_median_ms']:19.2f} "
                      f"{fig['runnable_err_p95_ms']:6.2f} {fig['runnable_err_max_ms']:6.2f} {fig['runnable_within_5pct_or_1ms']:4.0f}% {slow:8.1f}%", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
