"""Critical functions and lock waits beside the tools a performance engineer would use instead:
the on-CPU profile (unweighted sample shares per function) against `perf report`'s symbols on the
same perf.data, and the per-lock futex wait time against an offcputime-style bpftrace summary
(time from each futex wait call to its return, summed per futex word) on a second run of the same
program; plus, per thread, the critical-functions sum against the thread's criticality.

    .venv/bin/python benchmarks/validation/where_side_by_side.py            # 3 runs of where_locks
    .venv/bin/python benchmarks/validation/where_side_by_side.py --quick    # 1 run

Needs root, perf, gcc and bpftrace. Prints three tables.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import scalestack
from scalestack.analysis.where import where

ROOT = Path(__file__).resolve().parents[2]
BPF = r"""
tracepoint:syscalls:sys_enter_futex /pid == cpid && ((args->op & 127) == 0 || (args->op & 127) == 9)/ {
  @start[tid] = nsecs; @word[tid] = args->uaddr; }
tracepoint:syscalls:sys_exit_futex /@start[tid]/ {
  @wait_ns[@word[tid]] = sum(nsecs - @start[tid]); @waits[@word[tid]] = count();
  delete(@start[tid]); delete(@word[tid]); }
END { clear(@start); clear(@word); }
"""


def perf_report_shares(data: str, pid: int) -> dict[str, float]:
    """`perf report --no-children --sort sym` of the cpu-clock samples of one process."""
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "--pid",
                          str(pid), "-g", "none", "--percent-limit", "1"], capture_output=True, text=True).stdout
    shares, on = {}, False
    for line in out.splitlines():
        if line.startswith("# Samples:"):
            on = "cpu-clock" in line
        m = re.match(r"\s+([\d.]+)%\s+\[[.k]\]\s+(\S+)", line)
        if on and m:
            shares[m.group(2)] = float(m.group(1))
    return shares


def offcpu(cmd: list[str]) -> list[tuple[int, int, int]]:
    """(word, wait ns, waits) per futex word, longest first, from bpftrace on a run of `cmd`."""
    out = subprocess.run(["bpftrace", "-e", BPF, "-c", " ".join(cmd)], capture_output=True, text=True).stdout
    wait = {int(m.group(1), 0): int(m.group(2)) for m in re.finditer(r"@wait_ns\[(\w+)\]: (\d+)", out)}
    count = {int(m.group(1), 0): int(m.group(2)) for m in re.finditer(r"@waits\[(\w+)\]: (\d+)", out)}
    return sorted(((w, ns, count.get(w, 0)) for w, ns in wait.items()), key=lambda r: -r[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    runs = 1 if args.quick else 3
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "where_locks")
        subprocess.run(["gcc", "-O1", "-pthread", str(ROOT / "workloads/c/where_locks.c"), "-o", exe], check=True)
        cmd = [exe, "3", "150", "big"]
        for run in range(runs):
            data = os.path.join(tmp, "perf.data")
            trace = scalestack.record(cmd, None, stacks=True, keep_perf_data=data)
            res = where(trace)
            pid = int(trace.meta["root_tid"])
            ours = {f["function"]: f["samples"] for f in res.functions}
            theirs = perf_report_shares(data, pid)
            common = [k for k in theirs if k in ours]  # both as % of the functions both list
            ours = {k: ours[k] / sum(ours[c] for c in common) * 100 for k in common}
            theirs = {k: theirs[k] / sum(theirs[c] for c in common) * 100 for k in common}
            print(f"run {run + 1}: on-CPU samples per function (% of the functions both list at 1% or more)")
            print(f"  {'function':<24} {'scalestack':>10} {'perf report':>12}")
            for fn in sorted(common, key=lambda k: -ours[k]):
                print(f"  {fn:<24} {ours.get(fn, 0):>10.1f} {theirs.get(fn, 0):>12.1f}")
            crit = scalestack.criticality(trace)
            print("  per thread: weighted samples vs criticality (ms)")
            for row in res.threads:
                c = float(crit.criticality_ns[list(crit.tids).index(row["tid"])]) / 1e6
                print(f"  {row['tid']:>8} {row['criticality_ns'] / 1e6:>9.1f} {c:>9.1f}")
            print("  locks (scalestack): name, wait ms, waits")
            for lk in res.locks[:3]:
                print(f"  {lk['name']:<32} {lk['wait_ns'] / 1e6:>9.1f} {lk['waits']:>6}")
            print("  futex waits (bpftrace, a second run): word, wait ms, waits")
            for word, ns, n in offcpu(cmd)[:3]:
                print(f"  {word:#x}{'':<16} {ns / 1e6:>9.1f} {n:>6}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
