"""Validation of the Eklov pirate-stack tooling on this machine.

1. The no-sync estimate (issue 10, acceptance 1): ub-tiny / ub-rnd / ub-seq are compiled twice,
   with their lock and barrier and with them compiled out (-DNOSYNC). For N threads, the estimate
   max_i (t_i - t_{l+b,i}) from the shim's timing run is compared with the phase time of the
   sync-free build (wall clock, the paper's measure), and the same in CPU time (each thread's CPU
   time less the CPU it spent inside waits, against the sync-free build's busiest thread), which
   other jobs on the machine do not disturb. Runs are interleaved; medians; the share of the CPUs
   other processes used meanwhile is printed, since wall-clock figures mean little when it is high.
2. Stacks of real programs nobody wrote for this project (zstd -T, xz -T, sort --parallel), with
   `scalestack pirate-stack`'s warnings.

    .venv/bin/python benchmarks/validation/eklov_validate.py            # 9 repeats, 1 and 2 threads, 3 repeats per stack
    .venv/bin/python benchmarks/validation/eklov_validate.py --quick    # 3 repeats, 2 threads, one repeat per stack (the test runs this)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from scalestack.eklov import driver, shim  # noqa: E402
from scalestack.report.eklov_section import table_lines  # noqa: E402


def build_ubs(out: str) -> dict[str, tuple[str, str]]:
    built = {}
    for u in ("tiny", "rnd", "seq"):
        src = str(ROOT / "workloads" / "c" / f"ub_{u}.c")
        pair = []
        for flags, suffix in (([], ""), (["-DNOSYNC"], "_nosync")):
            exe = os.path.join(out, f"ub_{u}{suffix}")
            subprocess.run(["gcc", "-O2", "-Wall", "-pthread", *flags, src, "-o", exe], check=True)
            pair.append(exe)
        built[u] = (pair[0], pair[1])
    return built


def nosync_table(ubs: dict[str, tuple[str, str]], counts: list[int], repeat: int) -> list[str]:
    lines = [f"{'ub':>5} {'N':>2} {'estimate':>9} {'no sync':>9} {'error':>7}   {'est CPU':>8} {'no sync':>8} "
             f"{'error':>7}   {'waiting':>7} {'load':>5}  {'speedup':>7}",
             f"{'':>5} {'':>2} {'wall ms':>9} {'wall ms':>9} {'':>7}   {'CPU ms':>8} {'CPU ms':>8} {'':>7}   "
             f"{'share':>7} {'':>5}  {'error':>7}"]
    for u, (sync_exe, nosync_exe) in ubs.items():
        one = None  # (estimate, no sync) wall medians at N = 1, for the speedup comparison
        for n in counts:
            rows = []
            for _ in range(repeat):
                a = shim.run([sync_exe, str(n)], "timing")
                b = shim.run([nosync_exe, str(n)], "phase")
                w = a.log.waits_ns()
                rows.append((a.log.nosync_ns(), b.log.phase_ns, a.log.nosync_cpu_ns(),
                             b.log.max_thread_cpu_ns(created_only=True),
                             (w["lock_wait_ns"] + w["barrier_wait_ns"]) / n / a.log.phase_ns,
                             (a.foreign_load + b.foreign_load) / 2))
            e, r, ec, rc, waited, load = (median(c) for c in zip(*rows, strict=True))
            if n == 1:
                one = (e, r)
            # the paper plots speedup curves: T(1)/T_nosync(N) against the sync-free build's own
            # T(1)/T(N); there the one-thread cost of having a lock (ub-rnd's) cancels out
            sp = f"{100 * ((one[0] / e) / (one[1] / r) - 1):+6.1f}%" if one and n > 1 else f"{'-':>7}"
            lines.append(f"{u:>5} {n:>2} {e / 1e6:9.1f} {r / 1e6:9.1f} {100 * (e - r) / r:+6.1f}%   {ec / 1e6:8.1f} "
                         f"{rc / 1e6:8.1f} {100 * (ec - rc) / rc:+6.1f}%   {waited:7.0%} {load:5.0%}  {sp}")
    return lines


def text_file(path: str, lines: int) -> str:
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    with open(path, "w") as fh:
        for _ in range(lines):
            fh.write(" ".join(rng.choice(words) for _ in range(8)) + "\n")
    return path


REAL = {
    "zstd": ["zstd", "-q", "-f", "-3", "-T{threads}", "{file}", "-o", "/dev/null"],
    "xz": ["xz", "-q", "-k", "-c", "-0", "-T{threads}", "{file}"],
    "sort": ["sort", "--parallel={threads}", "-S", "64M", "{file}", "-o", "/dev/null"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if shutil.which("gcc") is None:
        sys.exit("gcc is needed")
    repeat, counts, stack_repeat = (3, [2], 1) if args.quick else (9, [1, 2], 3)
    counts = [n for n in counts if n <= len(os.sched_getaffinity(0))]
    with tempfile.TemporaryDirectory(prefix="eklov-validate-") as tmp:
        ubs = build_ubs(tmp)
        print(f"no-sync estimate vs the same ub with synchronization compiled out (medians of {repeat}; "
              "load = share of the CPUs other processes used meanwhile)")
        for line in nosync_table(ubs, counts, repeat):
            print(line)
        data = text_file(os.path.join(tmp, "words.txt"), 210_000)
        for name, argv in REAL.items():
            if shutil.which(name) is None:
                print(f"\n{name}: not installed, skipped")
                continue
            argv = [a.replace("{file}", data) for a in argv]
            p = driver.plan(argv, [1, 2] if len(os.sched_getaffinity(0)) >= 2 else [1])
            res = driver.measure(p, stack_repeat, profile="first" if args.quick else "all")
            print()
            for line in table_lines(res):
                print(line)


if __name__ == "__main__":
    main()
