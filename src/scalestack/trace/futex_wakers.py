"""Who ended a futex wait when the kernel does not say: the traced thread that issued the FUTEX_WAKE.

A wakeup sent to a thread sleeping on an idle CPU is often delivered from that CPU's idle task
(an IPI, or a wakeup list drained by the idle loop), so `sched_wakeup` fires in the context of
tid 0, not in the context of the thread that released the lock or reached the barrier. The futex
tracepoints still tell who did: the last wake-type futex call (FUTEX_WAKE, WAKE_OP, REQUEUE,
UNLOCK_PI, ...) on the same address, by another thread of the same process, while the waiter
slept. Every analysis that follows wakers (advice, the what-if replay, "wait caused") then sees
the real waker instead of "unknown".

The same call also dates the wakeup when its `sched_wakeup` was lost (perf drops wakeups done
from idle): the waiter became runnable during the waker's FUTEX_WAKE, not at its switch-in. On a
busy CPU it may then wait milliseconds on the run queue, which the kernel counts as run delay
(measured: 1.65 ms of one thread's 3.3 ms, 4 threads on 2 cores); such a wait is split into
SYNC_WAIT up to the wake call and RUNNABLE (marked repaired) up to the switch-in. "Busy" means
another task held that CPU at the call, or ran there before the waiter did (3.6 ms measured behind
a task whose switch out of idle was lost); the waiter itself, still switching out, does not count.
A call counts from the waiter's own futex entry, not only from its switch: a barrier's wake can
come while the waiter is still switching out, and the waiter then queues from the switch on
(1.68 ms measured behind another woken task, 4 threads on 2 cores).
A wait whose own call failed (timed out, interrupted) was ended by no wake call and takes none:
CPython's GIL waiters time out every 5 ms while the holder wakes the others (taken as theirs, those
calls put RUNNABLE +85% into each thread of four CPU-bound ones, perf, 10 s).
"""

from __future__ import annotations

import numba
import numpy as np

from scalestack.trace import State, StateTable
from scalestack.trace.events import FUTEX_CMD_MASK, Kind, RawEvents
from scalestack.trace.lookup import member

# futex(2) operations that wake waiters (op & FUTEX_CMD_MASK): WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP,
# UNLOCK_PI, WAKE_BITSET, CMP_REQUEUE_PI.
FUTEX_WAKE_OPS = (1, 3, 4, 5, 7, 10, 12)


def attribute_futex_wakers(states: StateTable, events: RawEvents, tids: np.ndarray,
                           pids: np.ndarray) -> tuple[StateTable, int, int]:
    """`states` with a waker for each SYNC_WAIT whose waker is not a traced thread, where the futex
    calls show who woke it, and RUNNABLE from the wake call where the wakeup event was lost; how
    many waits got a waker, and how many a RUNNABLE. Vectorized: one sort of the wake calls.
    `states` must be sorted by thread, then time; `tids` sorted, `pids` their processes (-1 unknown)."""
    st = states
    waits = np.flatnonzero((st.state == State.SYNC_WAIT) & (st.addr != 0) & ~np.isin(st.waker, tids))
    if len(waits) == 0:
        return states, 0, 0
    wk = (events.kind == Kind.FUTEX_ENTER) & member(events.arg1 & FUTEX_CMD_MASK, FUTEX_WAKE_OPS) \
        & member(events.tid, tids)
    if not np.any(wk):
        return states, 0, 0
    w_addr = events.arg0[wk].view(np.uint64)
    w_time = events.time[wk].astype(np.int64)
    w_tid = events.tid[wk].astype(np.int64)
    w_pid = events.pid[wk].astype(np.int64)
    # key each wake call by (address, rank of its time) so one searchsorted finds, per wait, the
    # last wake on its address at or before the wait's end
    addrs, w_aid = np.unique(w_addr, return_inverse=True)
    times = np.sort(w_time)
    m = len(times) + 1
    w_key = w_aid.astype(np.int64) * m + np.searchsorted(times, w_time, side="left")
    order = np.argsort(w_key, kind="stable")
    keys = w_key[order]
    q_addr = st.addr[waits]
    a_pos = np.minimum(np.searchsorted(addrs, q_addr), len(addrs) - 1)
    has_addr = addrs[a_pos] == q_addr
    q_key = a_pos.astype(np.int64) * m + np.searchsorted(times, st.end_ns[waits], side="right")
    k = np.searchsorted(keys, q_key, side="left") - 1
    ok = has_addr & (k >= 0)
    k = np.maximum(k, 0)
    j = order[k]
    # a wake call counts from the waiter's own futex entry: one made while the waiter was still
    # switching out wakes it too (the wait's row starts at the switch, microseconds later)
    since = np.minimum(_futex_entry(events, st.tid[waits], st.start_ns[waits]), st.start_ns[waits])
    ok &= (w_aid[j] == a_pos) & (w_time[j] >= since) & (w_tid[j] != st.tid[waits])
    # same process, where the source says which process a thread belongs to (private futexes)
    waiter_pid = pids[np.searchsorted(tids, st.tid[waits])]
    known = (waiter_pid > 0) & (w_pid[j] > 0)
    ok &= ~known | (waiter_pid == w_pid[j])
    # a wait whose futex call failed (-ETIMEDOUT, -EINTR) was ended by its timer or a signal, not by a
    # wake call: a CPython thread waiting for the GIL times out every 5 ms while others wake other waiters
    cand = waits[ok]
    ok[ok] = ~_failed_wait(events, st.tid[cand], st.start_ns[cand])
    if not np.any(ok):
        return states, 0, 0
    waker = st.waker.copy()
    waker[waits[ok]] = w_tid[j[ok]].astype(waker.dtype)
    cols = st.columns()
    cols["waker"] = waker
    named, n_split = _runnable_from_wake(type(st)(**cols), events, waits[ok], w_time[j[ok]])
    return named, int(ok.sum()), n_split


def _futex_entry(events: RawEvents, tid: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Each thread's last futex call at or before `start` (the call that began its wait), or
    `start` where there is none."""
    fe = events.kind == Kind.FUTEX_ENTER
    f_time = events.time[fe].astype(np.int64)
    if len(f_time) == 0:
        return start.astype(np.int64)
    times = np.sort(f_time)
    m = len(times) + 1
    keys = np.sort(events.tid[fe].astype(np.int64) * m + np.searchsorted(times, f_time, side="left"))
    q = tid.astype(np.int64) * m + np.searchsorted(times, start, side="right")
    k = np.searchsorted(keys, q, side="left") - 1
    kk = np.maximum(k, 0)
    found = (k >= 0) & (keys[kk] // m == tid)
    return np.where(found, times[np.minimum(keys[kk] % m, len(times) - 1)], start).astype(np.int64)


def _next_own(events: RawEvents, mask: np.ndarray, tid: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Index of each thread's first event in `mask` strictly after `after`, or -1 where there is none
    (`events` in time order: a stable sort by thread keeps each thread's events in it)."""
    sel = np.flatnonzero(mask)
    if len(sel) == 0:
        return np.full(len(tid), -1, np.int64)
    m = len(sel) + 1
    order = np.argsort(events.tid[sel], kind="stable")
    keys = events.tid[sel][order].astype(np.int64) * m + order  # (thread, position in time order)
    q = tid.astype(np.int64) * m + np.searchsorted(events.time[sel], after, side="right")
    k = np.minimum(np.searchsorted(keys, q, side="left"), len(keys) - 1)
    found = (keys[k] >= q) & (keys[k] // m == tid)
    return np.where(found, sel[order[k]], -1)


def _failed_wait(events: RawEvents, tid: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Whether the futex call each wait (thread, start) is in returned an error: its thread's first
    FUTEX_EXIT after the start, unless another futex call of the thread came first (its exit lost)."""
    if len(events) == 0 or len(tid) == 0:
        return np.zeros(len(tid), bool)
    events = events.sorted()
    ex = _next_own(events, events.kind == Kind.FUTEX_EXIT, tid, start)
    en = _next_own(events, (events.kind == Kind.FUTEX_ENTER) | (events.kind == Kind.FUTEX_WAITV), tid, start)
    exs, ens = np.maximum(ex, 0), np.maximum(en, 0)
    own = (ex >= 0) & ((en < 0) | (events.time[ens] >= events.time[exs]))
    return own & (events.arg0[exs] < 0)


def _runnable_from_wake(st: StateTable, events: RawEvents, waits: np.ndarray,
                        wake_ns: np.ndarray) -> tuple[StateTable, int]:
    """Split each wait that runs straight into its thread's RUNNING (its sched_wakeup was lost) at
    the wake call, where the CPU it then ran on was busy: the waker enqueued it there at once and
    the kernel's run delay starts then. An idle CPU is sent an IPI and enqueues the task itself
    when it wakes (measured: 50-80 us later in this VM), and runs it at once: no split."""
    # a call made while the waiter was still switching out queues it from the switch on
    wake_ns = np.maximum(wake_ns, st.start_ns[waits])
    # the row after the wait's tail (slivers of the same wait that reconciling RUNNING left)
    n = len(st)
    cont = np.zeros(n, bool)
    cont[1:] = (st.tid[1:] == st.tid[:-1]) & (st.state[1:] == State.SYNC_WAIT) & (st.start_ns[1:] == st.end_ns[:-1])
    breaks = np.flatnonzero(~cont)
    pos = np.searchsorted(breaks, waits, side="right")
    nxt = np.where(pos < len(breaks), breaks[np.minimum(pos, len(breaks) - 1)], n)
    safe = np.minimum(nxt, n - 1)
    cut = ((nxt < n) & (st.tid[safe] == st.tid[waits]) & (st.state[safe] == State.RUNNING)
           & (st.start_ns[safe] == st.end_ns[np.maximum(safe - 1, 0)])
           & (wake_ns >= st.start_ns[waits]) & (wake_ns < st.end_ns[waits]))
    if not np.any(cut):
        return st, 0
    run_cpu = _run_cpu(st)
    cut[cut] = _cpu_busy(events, run_cpu[safe[cut]], wake_ns[cut], st.start_ns[safe[cut]], st.tid[waits[cut]])
    w, at, nx = waits[cut], wake_ns[cut], safe[cut]
    if len(w) == 0:
        return st, 0
    cols = st.columns()
    tail_len = nx - w - 1  # the slivers between the wait and the run are run-queue time too
    if np.any(tail_len > 0):
        tail = np.repeat(w + 1, tail_len) + (np.arange(tail_len.sum()) - np.repeat(np.cumsum(tail_len) - tail_len,
                                                                                  tail_len))
        cols = {k: v.copy() for k, v in cols.items()}
        cols["state"][tail] = State.RUNNABLE
        cols["cpu"][tail] = np.repeat(run_cpu[nx], tail_len)
        cols["addr"][tail] = 0
        cols["waker"][tail] = -1
        cols["repaired"][tail] = True
    new = {k: v[w].copy() for k, v in cols.items()}
    new["start_ns"] = at.astype(cols["start_ns"].dtype)
    new["state"][:] = State.RUNNABLE
    new["cpu"] = run_cpu[nx].astype(cols["cpu"].dtype)
    new["addr"][:] = 0
    new["waker"][:] = -1
    new["repaired"][:] = True
    end = cols["end_ns"].copy()
    end[w] = at
    cols["end_ns"] = end
    merged = {k: np.concatenate([cols[k], new[k]]) for k in cols}
    # each wait's RUNNABLE part follows it at once (the table is in thread and time order); a wait
    # woken while its thread was still switching out is run-queue time from its first instant
    order = np.insert(np.arange(n), w + 1, n + np.arange(len(w)))
    order = order[merged["end_ns"][order] > merged["start_ns"][order]]
    return type(st)(**{k: v[order] for k, v in merged.items()}), int(len(w))


def _run_cpu(st: StateTable) -> np.ndarray:
    """The CPU of the RUNNING stretch each row begins: its own, or, where reconciling with the
    runtime reports moved the stretch's start (a report proves the run began before its switch
    event, and the added part has no CPU), that of the first later row of the same stretch that has one."""
    n = len(st)
    idx = np.where(st.cpu >= 0, np.arange(n), n)
    first = np.minimum.accumulate(idx[::-1])[::-1]  # next row at or after each with a CPU
    f = np.minimum(first, n - 1)
    not_run = np.cumsum(st.state != State.RUNNING)  # rows i..f all RUNNING <=> equal counts before
    prev = np.r_[0, not_run[:-1]]
    same = (first < n) & (st.tid[f] == st.tid) & (not_run[f] == prev) & (st.state == State.RUNNING)
    return np.where(same, st.cpu[f], st.cpu).astype(np.int64)


def _cpu_busy(events: RawEvents, cpu: np.ndarray, at: np.ndarray, until: np.ndarray,
              waiter: np.ndarray) -> np.ndarray:
    """Whether each CPU ran a task other than the waiter between the wake call and the waiter's run:
    by its last switch before the call (it was running something then), or by any event in the
    context of another task on that CPU before the run began (it started something else first, so
    the waiter queued behind it; the switch out of idle is the event this VM loses most).
    One compiled pass buckets the events by CPU (no sort); each question is a binary search in its
    CPU's bucket."""
    ev = events.sorted()
    if len(ev) == 0 or len(cpu) == 0:
        return np.zeros(len(cpu), bool)
    return _cpu_busy_compiled(ev.time, ev.cpu.astype(np.int64), ev.kind == Kind.SWITCH, ev.arg1, ev.context_tid(),
                              cpu.astype(np.int64), at.astype(np.int64), until.astype(np.int64),
                              waiter.astype(np.int64))


@numba.njit(cache=True, inline="always")
def _first_after(time, order, lo, hi, t):
    """The first position in order[lo:hi] (indices of events in time order) whose time is after t."""
    while lo < hi:
        mid = (lo + hi) // 2
        if time[order[mid]] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True)
def _cpu_busy_compiled(time, ecpu, is_switch, nxt, ctx, cpu, at, until, waiter):
    n = time.shape[0]
    n_cpu = 1
    for i in range(n):
        if ecpu[i] + 1 > n_cpu:
            n_cpu = ecpu[i] + 1
    # events (and switches) of each CPU, in time order: a stable counting sort by CPU
    off = np.zeros(n_cpu + 1, np.int64)
    s_off = np.zeros(n_cpu + 1, np.int64)
    for i in range(n):
        if ecpu[i] >= 0:
            off[ecpu[i] + 1] += 1
            if is_switch[i]:
                s_off[ecpu[i] + 1] += 1
    for c in range(n_cpu):
        off[c + 1] += off[c]
        s_off[c + 1] += s_off[c]
    idx = np.empty(off[n_cpu], np.int64)
    s_idx = np.empty(s_off[n_cpu], np.int64)
    fill = off[:-1].copy()
    s_fill = s_off[:-1].copy()
    for i in range(n):
        c = ecpu[i]
        if c >= 0:
            idx[fill[c]] = i
            fill[c] += 1
            if is_switch[i]:
                s_idx[s_fill[c]] = i
                s_fill[c] += 1
    out = np.zeros(cpu.shape[0], np.bool_)
    for q in range(cpu.shape[0]):
        c = cpu[q]
        if c < 0 or c >= n_cpu:
            continue
        # the CPU's last switch at or before the call: busy unless it went idle or to the waiter
        lo = _first_after(time, s_idx, s_off[c], s_off[c + 1], at[q])
        if lo > s_off[c]:
            j = s_idx[lo - 1]
            if nxt[j] != 0 and nxt[j] != waiter[q]:
                out[q] = True
                continue
        # another task's event on the CPU strictly between the call and the run
        k = _first_after(time, idx, off[c], off[c + 1], at[q])
        while k < off[c + 1] and time[idx[k]] < until[q]:
            x = ctx[idx[k]]
            if x > 0 and x != waiter[q]:
                out[q] = True
                break
            k += 1
    return out
