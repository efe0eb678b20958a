"""The kernel's own per-thread accounting as ground truth for a recording.

`/proc/<pid>/task/<tid>/schedstat` holds a thread's time on a CPU and its time waiting on a run
queue, in ns: a truth available on every Linux machine, against which every Trace can be
checked (issue "prove every Trace right"). Test programs (`workloads/c/schedstat.h`) write one
line per thread just before it ends: ``tid on_cpu_ns runqueue_ns monotonic_ns``, the last being
when the figures were read, so the recording is compared up to that moment and not up to the
thread's exit a few microseconds (or, preempted, milliseconds) later.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from scalestack.trace import State, Trace

# What "right" means: RUNNING within 2% of the CPU time, RUNNABLE within 5% of the run delay,
# either within 1 ms (issue 14).
RUNNING_TOL, RUNNABLE_TOL, ABS_TOL_NS = 0.02, 0.05, 1_000_000


@dataclasses.dataclass(frozen=True)
class ThreadTruth:
    tid: int
    on_cpu_ns: int
    runqueue_ns: int
    at_ns: int | None  # CLOCK_MONOTONIC time of the reading (None: at the thread's end)


def read_truth(path: str | os.PathLike) -> dict[int, ThreadTruth]:
    """The lines a program wrote (3 fields from older programs, 4 with the reading's time)."""
    out = {}
    with open(path) as fh:
        for line in fh:
            f = line.split()
            if len(f) >= 3:
                out[int(f[0])] = ThreadTruth(int(f[0]), int(f[1]), int(f[2]), int(f[3]) if len(f) > 3 else None)
    return out


def compare(trace: Trace, truth: dict[int, ThreadTruth]) -> list[dict]:
    """Per thread: RUNNING and RUNNABLE of the trace up to each reading, beside the truth, and
    whether each is within its bound (the one comparison `record`'s exit check, the collectors
    benchmark and the ground-truth tests all use)."""
    tids = trace.threads.tid
    until = np.full(len(tids), np.iinfo(np.int64).max, np.int64)
    for i, tid in enumerate(tids.tolist()):
        if tid in truth and truth[tid].at_ns is not None:
            until[i] = truth[tid].at_ns
    times = trace.time_in_states(until)
    return compare_totals(tids, times[:, State.RUNNING], times[:, State.RUNNABLE], truth, stolen_of(trace))


def stolen_of(trace: Trace) -> dict[int, int]:
    """Per tid, the ns the trace made UNKNOWN as hypervisor steal (`meta["steal_ns"]`)."""
    return {int(k): int(v) for k, v in (trace.meta.get("steal_ns") or {}).items()}


def compare_totals(tids: np.ndarray, running_ns: np.ndarray, runnable_ns: np.ndarray,
                   truth: dict[int, ThreadTruth], stolen: dict[int, int] | None = None) -> list[dict]:
    """The same rows from per-thread totals that some collector measured (the eBPF aggregator
    keeps only totals, up to each thread's end rather than its reading).

    `stolen`: per tid, the ns a trace made UNKNOWN as hypervisor steal inside a run. The kernel's
    run-queue clock lags through such a stretch and catches up at the thread's next switch-in,
    charging the lag to that wait's run delay (measured on a 2-vCPU VM: a 19 µs preemption read
    1.96 ms after 1.94 ms of steal), so RUNNABLE may fall short of the kernel by that much more."""
    rows = []
    for i, tid in enumerate(np.asarray(tids).tolist()):
        if tid not in truth:
            continue
        t = truth[tid]
        run, rq = int(running_ns[i]), int(runnable_ns[i])
        steal = (stolen or {}).get(tid, 0)
        rq_err = rq - t.runqueue_ns
        rows.append({"tid": tid, "running_ns": run, "on_cpu_ns": t.on_cpu_ns, "runnable_ns": rq,
                     "runqueue_ns": t.runqueue_ns, "stolen_ns": steal,
                     "running_err_pct": (run - t.on_cpu_ns) / max(t.on_cpu_ns, 1) * 100,
                     "runnable_err_ns": rq_err,
                     "running_ok": abs(run - t.on_cpu_ns) <= max(RUNNING_TOL * t.on_cpu_ns, ABS_TOL_NS),
                     "runnable_ok": -steal - _rq_bound(t) <= rq_err <= _rq_bound(t)})
    return rows


def _rq_bound(t: ThreadTruth) -> float:
    return max(RUNNABLE_TOL * t.runqueue_ns, ABS_TOL_NS)
