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

import os
from typing import NamedTuple

import numba
import numpy as np

from scalestack.trace import State, StateTable
from scalestack.trace.cpu_sweeps import busy_chunk, busy_end, busy_start, busy_sweep
from scalestack.trace.events import FUTEX_CMD_MASK, Kind, RawEvents
from scalestack.trace.lookup import EventIndex, find_sorted, member
from scalestack.trace.parallel import on_threads
from scalestack.trace.rows import emit_row, new_rows, put_row, rows_cut, state_table

# futex(2) operations that wake waiters (op & FUTEX_CMD_MASK): WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP,
# UNLOCK_PI, WAKE_BITSET, CMP_REQUEUE_PI.
FUTEX_WAKE_OPS = (1, 3, 4, 5, 7, 10, 12)


def attribute_futex_wakers(states: StateTable, events: RawEvents, tids: np.ndarray, pids: np.ndarray,
                           index: EventIndex | None = None, join: bool = False,
                           room: tuple | None = None) -> tuple[StateTable, int, int]:
    """`states` with a waker for each SYNC_WAIT whose waker is not a traced thread, where the futex
    calls show who woke it, and RUNNABLE from the wake call where the wakeup event was lost; how
    many waits got a waker, and how many a RUNNABLE. Two compiled sweeps over the events answer
    every wait (`_last_wakes_chunk`, `_failed_chunk`: resumable over chunks of the events).
    `states` must be sorted by thread, then time; `tids` sorted, `pids` their processes (-1 unknown);
    `index` the builder's index of the (time-sorted) events.
    `join`: where waits are split, the new table's adjacent rows are joined as
    `builder._merge_adjacent` joins them (for a caller that would join them next). `room`: writable
    `rows.new_rows` columns whose first rows are `states`, with rows to spare: the new table is
    written over them (no second table; `states` is then no longer valid)."""
    st = states
    waits = np.flatnonzero((st.state == State.SYNC_WAIT) & (st.addr != 0) & ~member(st.waker, tids))
    if len(waits) == 0:
        return states, 0, 0
    index = index if index is not None else EventIndex(events.sorted())
    waits, w_tid, w_time = _wake_calls(st, waits, index, tids, pids)
    if len(waits) == 0:
        return states, 0, 0
    named, n_split = _runnable_from_wake(st, index, waits, w_time, w_tid, join, room)
    return named, int(len(waits)), n_split


def attribute_futex_wakers_windows(states: StateTable, windows, tids: np.ndarray, pids: np.ndarray, join: bool = False,
                                   room: tuple | None = None, progress=None, calls=None) -> tuple[StateTable, int, int]:
    """`attribute_futex_wakers` of events read in windows (`windows()`: a fresh iterator of time-sorted
    windows in time order): one reading answers every wait's futex calls (the last wake call, and
    whether its own call failed: asked of every wait, an answer not depending on the others), a
    second whether the CPU each woken thread ran on was busy at the call. `calls()`, if given,
    reads the recording's futex events alone instead of the windows for the first (dicts of
    `FUTEX_COLUMNS`, in time order: the only events it reads). `progress(events, stage)`: the
    events read so far (of `calls()`: the futex events)."""
    st = states
    waits = np.flatnonzero((st.state == State.SYNC_WAIT) & (st.addr != 0) & ~member(st.waker, tids))
    if len(waits) == 0 or len(tids) == 0:
        return states, 0, 0
    carry = _last_wakes_start(tids, st.tid[waits], st.start_ns[waits], st.end_ns[waits], st.addr[waits].view(np.int64))
    failed = _failed_start_from(carry)  # (the same waits: their threads and starts shared)
    done = 0
    for w in windows() if calls is None else (_Calls(**c) for c in calls()):
        carry = _both_sweeps(w, carry, failed)
        done += len(w.time)
        del w  # not held while the next window is read
        if progress is not None:
            progress(done, "4/5 futex calls")
    ok, w_time, w_tid, w_pid, since = _last_wakes_end(carry)
    del carry
    ok &= _explained(st, waits, tids, pids, st.tid[waits].astype(np.int64), w_time, w_tid, w_pid, since)
    ok[ok] = ~_failed_end(failed)[ok]
    waits, w_tid, w_time = waits[ok], w_tid[ok], w_time[ok]
    if len(waits) == 0:
        return states, 0, 0

    def busy(cpu, at, until, waiter):
        carry = busy_start(cpu, at, until, waiter)
        done = 0
        for w in windows():
            busy_chunk(w.time, w.cpu, w.kind, w.arg0, w.arg1, w.tid, carry)
            done += len(w)
            del w
            if progress is not None:
                progress(done, "5/5 woken threads' CPUs")
        return busy_end(carry)

    named, n_split = _runnable_from_wake(st, busy, waits, w_time, w_tid, join, room)
    return named, int(len(waits)), n_split


# what pass 4 reads of an event, and of which events (`futex_rows`)
FUTEX_COLUMNS = {"time": np.int64, "tid": np.int32, "pid": np.int32, "kind": np.uint8, "arg0": np.int64,
                 "arg1": np.int64}


class _Calls(NamedTuple):
    """A chunk of kept futex events, read by the sweeps as a window's columns are."""

    time: np.ndarray
    tid: np.ndarray
    pid: np.ndarray
    kind: np.ndarray
    arg0: np.ndarray
    arg1: np.ndarray


def futex_rows(kind: np.ndarray) -> np.ndarray:
    """The rows of the futex events: the only ones `_last_wakes_chunk` and `_failed_chunk` read."""
    return np.flatnonzero((kind == _FUTEX_ENTER) | (kind == _FUTEX_EXIT) | (kind == _FUTEX_WAITV))


def _explained(st: StateTable, waits: np.ndarray, tids: np.ndarray, pids: np.ndarray, q_tid: np.ndarray,
               w_time: np.ndarray, w_tid: np.ndarray, w_pid: np.ndarray, since: np.ndarray) -> np.ndarray:
    """Which waits the last wake call on their address explains: made since the waiter's own futex
    entry (one made while the waiter was still switching out wakes it too: the wait's row starts at
    the switch, microseconds later), by another thread, of the same process where the source says
    which process a thread belongs to (private futexes)."""
    ok = (w_time >= since) & (w_tid != q_tid)
    waiter_pid = pids[np.searchsorted(tids, st.tid[waits])]
    known = (waiter_pid > 0) & (w_pid > 0)
    return ok & (~known | (waiter_pid == w_pid))


def _wake_calls(st: StateTable, waits: np.ndarray, index: EventIndex, tids: np.ndarray,
                pids: np.ndarray, workers: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The waits (rows of `st`) that a futex call explains, with the caller's tid and the call's time.
    The events are read as one chunk of `_last_wakes_chunk` and `_failed_chunk`, the two on
    `workers` threads (1 or 2; default 2 where the process may use two CPUs and there are 2^16
    events or more)."""
    ev = index.events
    if len(ev) == 0 or len(tids) == 0:
        return waits[:0], waits[:0], waits[:0]
    q_tid = st.tid[waits].astype(np.int64)
    carry = _last_wakes_start(tids, q_tid, st.start_ns[waits], st.end_ns[waits], st.addr[waits].view(np.int64))
    # a wait whose futex call failed (-ETIMEDOUT, -EINTR) was ended by its timer or a signal, not by a
    # wake call: a CPython thread waiting for the GIL times out every 5 ms while others wake other waiters
    failed = _failed_start_from(carry)
    carry = _both_sweeps(ev, carry, failed, workers)
    ok, w_time, w_tid, w_pid, since = _last_wakes_end(carry)
    ok &= _explained(st, waits, tids, pids, q_tid, w_time, w_tid, w_pid, since) & ~_failed_end(failed)
    return waits[ok], w_tid[ok], w_time[ok]


def _both_sweeps(w, calls: tuple, failed: tuple, workers: int | None = None) -> tuple:
    """The next time-sorted events (columns of `w`) read into both carries: the wake calls'
    (`_last_wakes_chunk`; the carry to pass on is returned) and the failed calls' (`_failed_chunk`,
    updated in place). Each wait's answers depend on no other wait, so the two sweeps read the
    events at once on `workers` threads (1 or 2; default 2 where the process may use two CPUs and
    there are 2^16 events or more)."""
    if workers is None:
        workers = 2 if len(w.time) >= 1 << 16 and len(os.sched_getaffinity(0)) > 1 else 1
    workers = min(max(int(workers), 1), 2)
    out = [calls]

    def sweep(k: int) -> None:
        if k == 0:
            out[0] = _last_wakes_chunk(w.time, w.tid, w.pid, w.kind, w.arg0, w.arg1, out[0])
        if k == 1 or workers == 1:
            _failed_chunk(w.time, w.tid, w.kind, w.arg0, failed)

    on_threads(workers, sweep)
    return out[0]


def _failed_start_from(calls: tuple) -> tuple:
    """`_failed_carry` of the waits of `_last_wakes_start`'s carry, sharing their threads and starts."""
    return _failed_carry(calls[1], calls[2], calls[3])


def _failed_carry(q_tids, q_slot, q_start) -> tuple:
    """`_failed_chunk`'s carry before the first event, for the waits of threads q_tids[q_slot] (q_tids
    sorted, `_slots`) begun at q_start: the waits in order of their start, each thread's waits begun
    and undecided (a linked list), the threads with a futex event at the current instant (decided
    when it ends: a chunk may end inside it), the answers, and [next wait to begin, threads at the
    instant, the instant, an instant seen]."""
    n_t, n_q = len(q_tids), len(q_slot)
    return (q_tids, q_slot, q_start, _order(q_start, "stable"),
            np.full(n_t, -1, np.int64), np.full(n_q, -1, np.int64), np.zeros(n_q, np.bool_),
            np.zeros(n_t, np.bool_), np.zeros(n_t, np.bool_), np.zeros(n_t, np.bool_), np.zeros(n_t, np.int64),
            np.zeros(4, np.int64))


def _slots(tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The waits' threads (sorted, int64) and each wait's index among them (int32: a wait's carry
    is held through a reading of the whole recording, ~100 bytes each)."""
    q_tids, q_slot = np.unique(np.asarray(tid, np.int64), return_inverse=True)
    return q_tids, q_slot.ravel().astype(np.int32)


def _order(x: np.ndarray, kind: str = "quicksort") -> np.ndarray:
    """`np.argsort(x, kind)` as int32 where the rows fit."""
    order = np.argsort(x, kind=kind)
    return order.astype(np.int32) if len(x) < 2**31 else order


@numba.njit(cache=True, nogil=True)
def _failed_chunk(time, etid, kind, arg0, carry):
    """Read the next time-sorted events into `carry` (updated in place). An instant's futex events
    decide the waits of their threads begun before it once a later instant's event (or the end)
    shows the instant complete: the thread's first exit at the instant, wherever the chunks cut."""
    q_tids, q_slot, q_start, order, head, nxt, out, seen, exited, failed, at, cnt = carry
    k, n_at, now, begun = cnt[0], cnt[1], cnt[2], cnt[3]
    nq = q_slot.shape[0]
    for i in range(time.shape[0]):
        kd = kind[i]
        if kd != _FUTEX_ENTER and kd != _FUTEX_EXIT and kd != _FUTEX_WAITV:
            continue
        t = time[i]
        if begun == 0 or t > now:
            n_at = _failed_decide(head, nxt, out, seen, exited, failed, at, n_at)
            while k < nq and q_start[order[k]] < t:  # waits that began before this instant
                q = order[k]
                nxt[q] = head[q_slot[q]]
                head[q_slot[q]] = q
                k += 1
            now = t
            begun = 1
        s = find_sorted(q_tids, np.int64(etid[i]))
        if s < 0 or head[s] < 0:
            continue
        if not seen[s]:  # the thread's futex events at this instant decide its waits
            seen[s] = True
            at[n_at] = s
            n_at += 1
        if kd == _FUTEX_EXIT and not exited[s]:  # its first exit at the instant counts first
            exited[s] = True
            failed[s] = arg0[i] < 0
    cnt[0], cnt[1], cnt[2], cnt[3] = k, n_at, now, begun


@numba.njit(cache=True)
def _failed_decide(head, nxt, out, seen, exited, failed, at, n_at):
    """Decide the waits of the threads seen at the instant just complete; none left to decide."""
    for a in range(n_at):
        s = at[a]
        q = head[s]
        while q >= 0:
            out[q] = failed[s]
            q = nxt[q]
        head[s] = -1
        seen[s] = exited[s] = failed[s] = False
    return 0


@numba.njit(cache=True)
def _failed_end(carry):
    """The answers once every event is read (the last instant is complete)."""
    q_tids, q_slot, q_start, order, head, nxt, out, seen, exited, failed, at, cnt = carry
    cnt[1] = _failed_decide(head, nxt, out, seen, exited, failed, at, cnt[1])
    return out


_FUTEX_ENTER, _FUTEX_EXIT, _FUTEX_WAITV = int(Kind.FUTEX_ENTER), int(Kind.FUTEX_EXIT), int(Kind.FUTEX_WAITV)


_WAKE_OPS_MASK = 0
for _op in FUTEX_WAKE_OPS:
    _WAKE_OPS_MASK |= 1 << _op


@numba.njit(cache=True, inline="always")
def _addr_hash(x, mask):
    return ((x >> 3) ^ (x >> 17) ^ (x >> 31) ^ (x >> 47)) & mask


def _last_wakes_start(tids: np.ndarray, q_tid: np.ndarray, q_start: np.ndarray, q_end: np.ndarray,
                      q_addr: np.ndarray) -> tuple:
    """`_last_wakes_chunk`'s carry before the first event, for the waits (thread, start, end,
    address; `tids` the traced threads, sorted): the waits in order of their start and of their
    end; the wake calls' addresses so far, each an id (open addressing, 1024 slots to start), with
    the time, tid and pid of the last wake call on each; each waiting thread's last futex call; the
    answers; and [next wait by start, next by end, addresses]."""
    q_tids, q_slot = _slots(q_tid)
    n_q, n_t = len(q_slot), len(q_tids)
    q_start, q_end = np.asarray(q_start, np.int64), np.asarray(q_end, np.int64)
    size = 1024
    return (np.asarray(tids, np.int64), q_tids, q_slot, q_start, q_end,
            np.asarray(q_addr, np.int64), _order(q_start), _order(q_end),
            np.full(size, -1, np.int64), *_addr_columns(size),
            np.zeros(n_t, np.int64), np.zeros(n_t, np.bool_),
            np.zeros(n_q, np.bool_), np.zeros(n_q, np.int64), np.zeros(n_q, np.int64), np.zeros(n_q, np.int64),
            np.empty(n_q, np.int64), np.zeros(3, np.int64))


def _addr_columns(size: int) -> tuple:
    """Per address id of a table of `size` slots, at most half of them used: the address, and the
    time, tid and pid of its last wake call."""
    return tuple(np.empty(size // 2 + 1, np.int64) for _ in range(4))


def _last_wakes_chunk(time, etid, epid, kind, arg0, arg1, carry) -> tuple:
    """Read the next time-sorted events into `carry`; the carry to pass on (a new one where the
    address table grew: grown outside the compiled loop, where a replaced array slows every
    iteration). Only the futex calls among the events are read."""
    i = _last_wakes_events(time, etid, epid, kind, arg0, arg1, _WAKE_OPS_MASK, carry, 0)
    while i < len(time):  # stopped where the table would be more than half full
        table, n_addr = carry[8], int(carry[-1][2])
        size = 2 * len(table)
        cols = _addr_columns(size)
        for new, old in zip(cols, carry[9:13], strict=True):
            new[:n_addr] = old[:n_addr]
        carry = (*carry[:8], _addr_table(cols[0], n_addr, size), *cols, *carry[13:])
        i = _last_wakes_events(time, etid, epid, kind, arg0, arg1, _WAKE_OPS_MASK, carry, i)
    return carry


@numba.njit(cache=True)
def _addr_table(addrs, n_addr, size):
    """A table of `size` slots holding the ids of the first `n_addr` addresses."""
    table = np.full(size, -1, np.int64)
    for b in range(n_addr):
        g = _addr_hash(addrs[b], size - 1)
        while table[g] >= 0:
            g = (g + 1) & (size - 1)
        table[g] = b
    return table


@numba.njit(cache=True, nogil=True)
def _last_wakes_events(time, etid, epid, kind, arg0, arg1, wake_mask, carry, i):
    """`_last_wakes_chunk` from event i until the events end or a new address would fill the
    table more than half: where it stopped. Before each futex call, the waits that began (ended)
    before its time take the waiter's last call (the last wake call on their address) so far:
    every event at or before their time has been read, even where a chunk cut an instant."""
    (tids, q_tids, q_slot, q_start, q_end, q_addr, by_start, by_end, table, a_addr, a_time, a_tid, a_pid,
     last_call, called, found, w_time, w_tid, w_pid, since, cnt) = carry
    size = table.shape[0]
    n_addr = cnt[2]
    n = time.shape[0]
    while i < n:
        if kind[i] != _FUTEX_ENTER:
            i += 1
            continue
        t = time[i]
        _answer_before(t, False, carry)
        op = arg1[i] & FUTEX_CMD_MASK
        if op < 63 and (wake_mask >> op) & 1 and find_sorted(tids, etid[i]) >= 0:
            a = arg0[i]
            h = _addr_hash(a, size - 1)
            while table[h] >= 0 and a_addr[table[h]] != a:
                h = (h + 1) & (size - 1)
            b = table[h]
            if b < 0:
                if 2 * (n_addr + 1) > size:
                    break  # grow first
                b = n_addr
                a_addr[b] = a
                table[h] = b
                n_addr += 1
                cnt[2] = n_addr
            a_time[b] = t
            a_tid[b] = etid[i]
            a_pid[b] = epid[i]
        s = find_sorted(q_tids, etid[i])
        if s >= 0:
            last_call[s] = t
            called[s] = True
        i += 1
    return i


@numba.njit(cache=True, inline="always")
def _answer_before(t, every, carry):
    """Answer the waits that began before `t` (each its thread's last futex call at or before its
    start, the start if none or later) and those that ended before it (the last wake call on its
    address, if any); with `every`, all those still open."""
    (tids, q_tids, q_slot, q_start, q_end, q_addr, by_start, by_end, table, a_addr, a_time, a_tid, a_pid,
     last_call, called, found, w_time, w_tid, w_pid, since, cnt) = carry
    n_q = by_start.shape[0]
    k = cnt[0]
    while k < n_q and (every or q_start[by_start[k]] < t):
        q = by_start[k]
        s = q_slot[q]
        since[q] = q_start[q]
        if called[s] and last_call[s] < q_start[q]:
            since[q] = last_call[s]
        k += 1
    cnt[0] = k
    k = cnt[1]
    size = table.shape[0]
    while k < n_q and (every or q_end[by_end[k]] < t):
        q = by_end[k]
        a = q_addr[q]
        h = _addr_hash(a, size - 1)
        while table[h] >= 0 and a_addr[table[h]] != a:
            h = (h + 1) & (size - 1)
        b = table[h]
        if b >= 0:
            found[q] = True
            w_time[q] = a_time[b]
            w_tid[q] = a_tid[b]
            w_pid[q] = a_pid[b]
        k += 1
    cnt[1] = k


@numba.njit(cache=True)
def _last_wakes_end(carry):
    """Per wait, once every event is read: whether a wake-type futex call by a traced thread was
    made on its address at or before its end, the last one's time, tid and pid (0 if none), and
    the time of its thread's last futex call at or before its start (the start if none or later).
    Held meanwhile: the waits, and per address and waiting thread the last call so far (the
    rows of every wake call and each waiting thread's call took 12 and 8 bytes a call)."""
    _answer_before(0, True, carry)
    return carry[15], carry[16], carry[17], carry[18], carry[19]


def _runnable_from_wake(st: StateTable, busy, waits: np.ndarray, wake_ns: np.ndarray,
                        wakers: np.ndarray | None = None, join: bool = False,
                        room: tuple | None = None) -> tuple[StateTable, int]:
    """Split each wait that runs straight into its thread's RUNNING (its sched_wakeup was lost) at
    the wake call, where the CPU it then ran on was busy: the waker enqueued it there at once and
    the kernel's run delay starts then. An idle CPU is sent an IPI and enqueues the task itself
    when it wakes (measured: 50-80 us later in this VM), and runs it at once: no split.
    `busy`: the builder's index of the events, or `busy(cpu, at, until, waiter)` answering
    `cpu_sweeps.busy_sweep`'s question otherwise; `wakers`: each wait's waker, written into the new
    table (the same pass); `join`, `room`: see `attribute_futex_wakers`."""
    if isinstance(busy, EventIndex):
        ev = busy.events
        busy = lambda *q: busy_sweep(ev.time, ev.cpu, ev.kind, ev.arg0, ev.arg1, ev.tid, *q)  # noqa: E731
    # a call made while the waiter was still switching out queues it from the switch on
    wake_ns = np.maximum(wake_ns, st.start_ns[waits])
    cut, nx, run_cpu = _wake_cuts(st.tid, st.start_ns, st.end_ns, st.state, st.cpu, waits, wake_ns,
                                  int(State.SYNC_WAIT), int(State.RUNNING))
    if np.any(cut):  # was the CPU busy: one sweep over the events (no by-CPU buckets: 4 bytes an event)
        cut[cut] = busy(run_cpu[cut], wake_ns[cut], st.start_ns[nx[cut]], st.tid[waits[cut]])
    w, at, nx, run_cpu = waits[cut], wake_ns[cut], nx[cut], run_cpu[cut]
    n = len(st)
    if room is not None and len(room[0]) < n + len(w):
        room = None
    if len(w) == 0:
        if wakers is None:
            return st, 0
        if room is not None:
            room[6][waits] = wakers
            return state_table(rows_cut(room, 0, n)), 0
        cols = st.columns()  # only the wakers change: one new column
        cols["waker"] = st.waker.copy()
        cols["waker"][waits] = wakers
        return type(st)(**cols), 0
    named = waits[:0] if wakers is None else waits
    if room is not None:  # the rows moved up by as many as the split adds, then read from there
        _shift_rows(room, n, len(w))
        src, off, out = room, len(w), room
    else:
        src, off, out = (st.tid, st.start_ns, st.end_ns, st.state, st.cpu, st.addr.view(np.int64), st.waker,
                         st.repaired), 0, new_rows(n + len(w))
    m = _split_waits(src, off, out, n, w, at.astype(np.int64), nx, run_cpu, int(State.RUNNABLE), named,
                     named if wakers is None else wakers.astype(np.int64), join)
    return state_table(rows_cut(out, 0, m)), int(len(w))


@numba.njit(cache=True)
def _shift_rows(rows, n, k):
    """Rows 0..n of `new_rows` columns moved to k..k + n (from the last: they overlap)."""
    for i in range(n - 1, -1, -1):
        rows[0][i + k] = rows[0][i]
        rows[1][i + k] = rows[1][i]
        rows[2][i + k] = rows[2][i]
        rows[3][i + k] = rows[3][i]
        rows[4][i + k] = rows[4][i]
        rows[5][i + k] = rows[5][i]
        rows[6][i + k] = rows[6][i]
        rows[7][i + k] = rows[7][i]


@numba.njit(cache=True)
def _wake_cuts(tid, start, end, state, cpu, waits, wake, s_sync_wait, s_running):
    """Per wait: whether its thread's next row after the wait's tail (slivers of the same wait that
    reconciling RUNNING left) is RUNNING, right after it, with the wake call inside the wait; that
    row; and the CPU of the RUNNING stretch it begins (its own, or, where reconciling with the
    runtime reports moved the stretch's start and the added part has no CPU, that of the first
    later row of the same stretch that has one)."""
    n = tid.shape[0]
    k = waits.shape[0]
    cut = np.zeros(k, np.bool_)
    nx = np.zeros(k, np.int64)
    run_cpu = np.zeros(k, np.int64)
    for q in range(k):
        w = waits[q]
        j = w + 1
        while j < n and tid[j] == tid[j - 1] and state[j] == s_sync_wait and start[j] == end[j - 1]:
            j += 1
        nx[q] = min(j, n - 1)
        if j >= n or tid[j] != tid[w] or state[j] != s_running or start[j] != end[j - 1]:
            continue
        if wake[q] < start[w] or wake[q] >= end[w]:
            continue
        cut[q] = True
        f = j
        while f < n and cpu[f] < 0 and state[f] == s_running:
            f += 1
        if f < n and cpu[f] >= 0 and state[f] == s_running and tid[f] == tid[j]:
            run_cpu[q] = cpu[f]
        else:
            run_cpu[q] = cpu[j]
    return cut, nx, run_cpu


@numba.njit(cache=True)
def _split_waits(src, off, out, n, w, at, nx, run_cpu, s_runnable, named, named_waker, join):
    """The table (`new_rows` columns `src`, rows off..off + n) with each wait w[q] ending at at[q]
    and followed by a repaired RUNNABLE row up to its old end on CPU run_cpu[q]; the rows between
    it and its run (nx[q]) RUNNABLE there too; rows left empty dropped; row named[q] (sorted) woken
    by named_waker[q]; adjacent rows joined (`put_row`) if `join`; written to `out` from row 0, its
    row count returned. One pass: each wait's new row follows it at once (the table is in thread
    and time order). `out` may be `src` with off = len(w): a row is written no later than it is
    read (at most one new row a wait before it)."""
    k = w.shape[0]
    tid, start, end, state, cpu, addr, waker, rep = src
    m = 0
    qa = 0  # waits whose tails begin at or before the row
    qb = 0  # the next wait
    qn = 0  # the next named row
    t_end = -1
    t_cpu = 0
    for i in range(n):
        while qa < k and w[qa] < i:
            if nx[qa] > t_end:
                t_end = nx[qa]
                t_cpu = run_cpu[qa]
            qa += 1
        r = i + off
        r_tid, r_start, r_end, r_state, r_cpu, r_addr, r_waker, r_rep = (tid[r], start[r], end[r], state[r], cpu[r],
                                                                         addr[r], waker[r], rep[r])
        while qn < named.shape[0] and named[qn] < i:
            qn += 1
        if qn < named.shape[0] and named[qn] == i:
            r_waker = named_waker[qn]
        is_w = qb < k and w[qb] == i
        e = at[qb] if is_w else r_end
        if e > r_start:
            if i < t_end:  # in a tail: run-queue time too
                m = _write(out, m, join, r_tid, r_start, e, s_runnable, t_cpu, 0, -1, True)
            else:
                m = _write(out, m, join, r_tid, r_start, e, r_state, r_cpu, r_addr, r_waker, r_rep)
        if is_w:
            if r_end > at[qb]:
                m = _write(out, m, join, r_tid, at[qb], r_end, s_runnable, run_cpu[qb], 0, -1, True)
            qb += 1
    return m


@numba.njit(cache=True, inline="always")
def _write(out, m, join, tid, start, end, state, cpu, addr, waker, rep):
    if join:
        return put_row(out, m, tid, start, end, state, cpu, addr, waker, rep)
    return emit_row(out, m, tid, start, end, state, cpu, addr, waker, rep)
