"""Every recording checked against the kernel's own accounting, read at each thread's exit.

The kernel keeps, per thread, its time on a CPU (`se.sum_exec_runtime`) and its time waiting on
a run queue (`sched_info.run_delay`): the figures `/proc/<tid>/schedstat` shows. A thread that
exits during a recording takes them with it, so `record` runs a one-line bpftrace probe on
`sched:sched_process_exit` beside the collector that prints both at the moment each thread
switches out for the last time (its state TASK_DEAD). Its filter runs at every context switch
of the machine, a few tens of nanoseconds each; `record --no-exit-check` turns it off.

The trace's RUNNING and RUNNABLE time of each thread that was born and exited inside the
recording are compared with them: RUNNING within 2% (or 1 ms), RUNNABLE within 5% (or 1 ms).
Disagreements become warnings; the figures go into `meta["exit_check"]`. Without bpftrace (or
without root) the check says it is unavailable and recording goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time

import numpy as np

from scalestack.tools import which
from scalestack.trace import State, Trace
from scalestack.trace.kernel_accounting import ThreadTruth, compare, compare_totals, stolen_of

# The task's last switch-out (state TASK_DEAD, 0x80 since Linux 4.14): there the scheduler has
# just charged its last stretch, so the figures are final (at sched_process_exit the running
# stretch is not yet charged: up to a tick, 4 ms, missing).
PROBE = ('tracepoint:sched:sched_switch /((struct task_struct *)curtask)->__state == 128/ { '
         '$t = (struct task_struct *)curtask; printf("X %d %llu %llu %llu\\n", tid, '
         '$t->se.sum_exec_runtime, $t->sched_info.run_delay, nsecs); }')


class ExitProbe:
    """bpftrace printing each exiting thread's final kernel figures; a context manager."""

    def __init__(self, enabled: bool = True) -> None:
        self.proc: subprocess.Popen | None = None
        self.out = None
        self.reason: str | None = None if enabled else "turned off (--no-exit-check, or attaching with --pid)"

    def __enter__(self) -> ExitProbe:
        exe = which("bpftrace")
        if self.reason:
            return self
        if exe is None:
            self.reason = "bpftrace is not installed"
        elif os.geteuid() != 0:
            self.reason = "the exit probe needs root"
        if self.reason:
            return self
        self.out = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([exe, "-e", PROBE], stdout=self.out, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # "Attaching 1 probe..." once it is in place
            self.out.seek(0)
            if b"Attaching" in self.out.read() or self.proc.poll() is not None:
                break
            time.sleep(0.01)
        if self.proc.poll() is not None:
            self.reason = "bpftrace could not attach to sched:sched_process_exit"
            self.proc = None
        return self

    def __exit__(self, *exc) -> None:
        """Detach: bpftrace is told to stop, and `readings` waits for it (it takes ~0.2 s to exit,
        which the trace's building covers); on an error, waited for here."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        if exc[0] is not None:
            self.close()

    def close(self) -> None:
        """Wait for bpftrace to exit (killed after 10 s)."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def readings(self) -> dict[int, tuple[int, int, int]]:
        """tid -> (on-CPU ns, run-queue ns, monotonic ns of the exit), once bpftrace has exited."""
        self.close()
        if self.out is None:
            return {}
        self.out.seek(0)
        out = {}
        for line in self.out.read().decode("utf-8", "replace").splitlines():
            f = line.split()
            if len(f) == 5 and f[0] == "X":
                out[int(f[1])] = (int(f[2]), int(f[3]), int(f[4]))
        self.out.close()
        return out


def check(trace: Trace, readings: dict[int, tuple[int, int, int]], reason: str | None = None,
          times: np.ndarray | None = None) -> dict:
    """Compare each thread born and exited inside the trace with its exit readings (`times`: the
    trace's `time_in_states()`, for a Trace written as it was built, which holds no states)."""
    if reason:
        return {"available": False, "reason": reason}
    th = trace.threads
    whole = {int(t) for t, known, gone in zip(th.tid.tolist(), th.start_known, th.exited, strict=True) if known and gone}
    truth = {tid: ThreadTruth(tid, on_cpu, rq, None) for tid, (on_cpu, rq, _at) in readings.items() if tid in whole}
    per, bad = {}, []
    rows = compare(trace, truth) if times is None else compare_totals(
        th.tid, times[:, State.RUNNING], times[:, State.RUNNABLE], truth, stolen_of(trace))
    for row in rows:
        run, on_cpu, runnable, rq = row["running_ns"], row["on_cpu_ns"], row["runnable_ns"], row["runqueue_ns"]
        per[str(row["tid"])] = [run, on_cpu, runnable, rq]
        if not (row["running_ok"] and row["runnable_ok"]):
            bad.append(row["tid"])
    run_err = [abs(r - k) / max(k, 1) for r, k, _a, _b in per.values()]
    return {"available": True, "threads": per, "disagreeing": bad,
            "running_max_rel_err": float(np.max(run_err)) if run_err else 0.0}


def warning(result: dict) -> str | None:
    if not result.get("disagreeing"):
        return None
    worst = result["disagreeing"][0]
    r, k, q, w = result["threads"][str(worst)]
    return (f"{len(result['disagreeing'])} threads disagree with the kernel's own accounting at their exit "
            f"(e.g. tid {worst}: running {r / 1e6:.2f} ms recorded vs {k / 1e6:.2f} ms, runnable {q / 1e6:.2f} ms "
            f"vs {w / 1e6:.2f} ms); see `scalestack info`")
