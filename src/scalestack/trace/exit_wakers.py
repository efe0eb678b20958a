"""Who ended a wait that a thread's exit ended: the exiting thread.

Three waits end because another thread exits, and none shows its waker:

* a join: the kernel clears the exiting thread's tid word and wakes the futex on it
  (CLONE_CHILD_CLEARTID, in its exit path: no futex call, so `futex_wakers` finds none);
* a kill: the thread that calls exit_group wakes every other thread of the process to die;
* a parent's wait for its child process (wait4, waitpid: a shell running the program): the
  child's last thread notifies the parent from its exit path.

When the woken thread sleeps on an idle CPU, the kernel delivers the wakeup from that CPU's idle
task (a wakeup list drained after an IPI), so `sched_wakeup` names tid 0, not the exiting thread.
Measured with the eBPF collector on Linux 6.18 (2-vCPU VM, 2026-11-27): a JVM's launcher thread
joins the thread that runs main(); its wakeup came 32 µs after that thread's sched_process_exit,
from the idle task of the other CPU, and the JVM's parked threads killed at exit likewise. The
dependency replay then kept those waits' durations, so making main() faster gained nothing
(1.00x for a parallel-stream program whose main thread runs alone for 18% of the run).

A wait whose waker is the idle task or unknown (a thread outside the trace that woke it keeps it),
that began before another thread of the same process, or of a child process (created by a thread
of the waiter's), exited and ended within `SLACK_NS` of that
exit (of the span from its sched_process_exit to its last switch: this kernel emits the tracepoint
before the join's wake, older ones after it), is given that thread as its waker; of several, the
nearest. Decided row by row on the finished rows, so a trace built whole or in windows gets the
same wakers. The parent's case matters to the replay: `sh -c "prog; true"` recorded with perf had
the shell's wait woken from the idle task, and every acceleration of prog replayed at 1.00x (a
Rust program whose main thread runs alone for 54% of the run: 1.37x by criticality).
"""

from __future__ import annotations

import numpy as np

from scalestack.trace import State, StateTable
from scalestack.trace.lookup import member

# how far from the exit a wait it ended may end: the kill's wakeups come before sched_process_exit
# and a join's after it (tens of µs measured), a remote wakeup tens of µs after the call
SLACK_NS = 200_000
_BLOCKED = (int(State.SYNC_WAIT), int(State.SLEEP), int(State.IO_WAIT))


def exits(tids: np.ndarray, pids: np.ndarray, dead: np.ndarray, end_time: np.ndarray, exiting: np.ndarray,
          exit_time: np.ndarray, parent_pids: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """The exits inside the recording (per walk slot: `tids` sorted, `pids` theirs, and the walk's
    `dead`, `end_time` (last switch), `exiting`, `exit_time` (sched_process_exit); `parent_pids`:
    the process that created each slot's process, -1 if unknown): (tid, pid, first, last,
    parent pid), each exit's span from the earlier of the two instants to the later."""
    k = np.flatnonzero(dead)
    end = end_time[k].astype(np.int64)
    said = np.where(exiting[k], exit_time[k], end).astype(np.int64)
    parent = np.full(len(k), -1, np.int64) if parent_pids is None else np.asarray(parent_pids, np.int64)[k]
    return (tids[k].astype(np.int64), pids[k].astype(np.int64), np.minimum(said, end), np.maximum(said, end),
            parent)


def parent_pids(tids: np.ndarray, pids: np.ndarray, parents: dict[int, int]) -> np.ndarray:
    """Per slot (`tids` sorted, `pids` theirs): the process whose thread created the slot's process
    (its first thread, tid = pid), -1 if no traced thread did (`parents`: {child tid: creator})."""
    out = np.full(len(pids), -1, np.int64)
    if len(tids) == 0:
        return out
    creator = np.array([parents.get(int(p), -1) for p in pids.tolist()], np.int64)
    at = np.searchsorted(tids, creator).clip(max=len(tids) - 1)
    known = (creator >= 0) & (tids[at] == creator)
    out[known] = pids[at[known]]
    out[out == pids] = -1  # a process's first thread made by its own process: no parent's wait
    return out


def exit_wakers(states: StateTable, ex: tuple[np.ndarray, ...], pid_of) -> tuple[StateTable, int]:
    """`states` with the exiting thread as the waker of each wait an exit ended (`ex`: `exits`),
    and how many got one. `pid_of(tid array)`: each waiter's process (-1: unknown, then any)."""
    e_tid, e_pid, e_first, e_last, e_parent = ex
    if len(e_tid) == 0 or len(states) == 0:
        return states, 0
    st = states
    cand = np.flatnonzero(member(st.state, _BLOCKED) & (st.waker <= 0))  # 0: the idle task; -1: none seen
    if len(cand) == 0:
        return states, 0
    end, start, tid = st.end_ns[cand], st.start_ns[cand], st.tid[cand].astype(np.int64)
    pid = np.asarray(pid_of(tid), np.int64)
    best = np.full(len(cand), -1, np.int64)
    best_d = np.full(len(cand), np.iinfo(np.int64).max)
    mid = (e_first + e_last) // 2
    for j in np.argsort(e_first, kind="stable").tolist():
        ok = ((end >= e_first[j] - SLACK_NS) & (end <= e_last[j] + SLACK_NS) & (start < e_first[j])
              & (tid != e_tid[j]) & ((pid < 0) | (pid == e_pid[j]) | (pid == e_parent[j])))
        d = np.abs(end - mid[j])
        take = ok & (d < best_d)
        best[take] = e_tid[j]
        best_d[take] = d[take]
    hit = best >= 0
    n = int(hit.sum())
    if n == 0:
        return states, 0
    cols = st.columns()
    cols["waker"] = st.waker.copy()
    cols["waker"][cand[hit]] = best[hit]
    return StateTable(**cols), n
