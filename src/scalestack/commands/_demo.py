"""`make demo`: compile small real C pthread programs, record them, write a report and speedup stacks.

The program is workloads/c/barrier_imbalance.c: two threads meet at a barrier ten times and
thread 1 does three times the work of thread 0, so thread 1 is the critical thread and thread 0
waits at the barrier for about two thirds of the parallel section.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scalestack.errors import UserError
from scalestack.tools import which

ROOT = Path(__file__).resolve().parents[3]  # the checkout: src/scalestack/commands/_demo.py


def main(out_dir: str = "demo-out") -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = ROOT / "workloads" / "c" / "barrier_imbalance.c"
    if not src.exists():
        raise UserError(f"{src} is missing; run the demo from a scalestack checkout")
    if which("gcc") is None:
        raise UserError("gcc is not installed; install it with `apt-get install gcc`")
    exe = out / "barrier_imbalance"
    subprocess.run(["gcc", "-O1", "-pthread", str(src), "-o", str(exe)], check=True)
    trace_path = out / "barrier_imbalance.trace"
    print(f"recording: {exe} 10 4000000 3  (thread 1 does 3x the work of thread 0)", flush=True)
    from scalestack.collect.record import record

    trace = record([str(exe), "10", "4000000", "3"], str(trace_path))
    print(f"trace: {trace_path} ({len(trace.threads)} threads, {trace.wall_ns / 1e9:.3f} s)", flush=True)
    from scalestack.cli import main as cli_main

    step = ["report", str(trace_path), "-o", str(out / "report")]
    try:
        cli_main(step)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return int(exc.code)
    # speedup stacks: the same total work split over 1, 2 and 4 threads (4 > this machine's cores
    # on a 2-core VM), after a serial part, with 20% of each unit under one lock
    knobs = out / "speedup_knobs"
    subprocess.run(["gcc", "-O1", "-pthread", str(ROOT / "workloads" / "c" / "speedup_knobs.c"), "-o", str(knobs)],
                   check=True)
    print("\nspeedup stacks of speedup_knobs at 1, 2, 4 threads (200 serial units, 2000 parallel, 20% locked):",
          flush=True)
    try:
        # --pirate: the Eklov stack (thread isolation + a cache pirate) at the counts the cores allow, beside it;
        # C measured, as a VM's sysfs may describe its host's cache
        cli_main(["scale", "--threads", "1,2,4", "-o", str(out / "sweep"), "--report", str(out / "speedup-report"),
                  "--pirate", "--pirate-repeat", "1", "--pirate-cache-size", "measured", "--", str(knobs), "{threads}",
                  "200", "2000", "20"])
    except SystemExit as exc:
        if exc.code not in (0, None):
            return int(exc.code)
    return 0


if __name__ == "__main__":
    from scalestack.cli import prepare_process

    prepare_process()  # among it the notice that a fresh checkout compiles for minutes after "recording:"
    try:
        sys.exit(main(*sys.argv[1:]))
    except UserError as exc:
        print(f"scalestack: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except subprocess.CalledProcessError as exc:
        print(f"scalestack: error: {' '.join(map(str, exc.cmd))} failed with status {exc.returncode}", file=sys.stderr)
        sys.exit(1)
