"""Turn raw kernel events into per-thread state intervals: the one place state logic lives.

Every Linux source (perf.data, perf script text, tracefs, eBPF) ends here, so a fix to the
logic fixes every source at once (Perfetto's `thread_state_tracker`). The walk over events is
inherently sequential (each event changes the state of one or two threads), so it is one
numba-compiled pass over time-sorted events. The passes around it that would mask, sort or copy
every event (or every state row) are compiled passes too, reading one index of the events by kind
and by CPU built once per build (`lookup.EventIndex`): 9.8 M events build in about 1.4 s (4.7 s before).

What the kernel does not tell us is counted, bounded and marked, never silently guessed
(measured on these machines: `perf record -a` drops some switches out of idle and wakeups done
from idle without any LOST record):

* **chain gaps** - on each CPU the next_pid of one switch must be the prev_pid of the next one;
  a break means switches are missing. Counted per CPU (`meta["chain_gaps"]`) and, separately,
  the gaps touching traced threads (`meta["chain_gaps_traced"]`).
* **missing switch-in** - a traced thread emits an event (its own switch-out, a futex call, a
  wakeup it performs) while we believe it is off-CPU. It must have been switched in on that CPU
  after the CPU's previous event and after its own previous state change. If it had been woken
  (RUNNABLE), an idle CPU runs it at once, so the lower bound is used; otherwise there is no
  evidence it ran before this event, so the event time is used. The interval is marked
  `repaired` and the width of the bound is added to `meta["repair_uncertainty_ns"][tid]`.
* **missing switch-out** - the chain shows another task on the CPU where a traced thread was
  running: its RUNNING interval ends at the CPU's last event (the last proof it ran) and it is
  SLEEP (repaired) until its next event.
* **missing wakeup** - a blocked thread switched in with no wakeup: its wait simply ends at the
  switch-in (counted as `missing_wakeups`).

Only the scheduler's tracepoints and the calls traced threads make are read as evidence of who runs
where. An event of a task the kernel did not name (tid -1: one past the unhash of its exit) shows
nothing, and CPU samples (`perf record -e cpu-clock`, read by perf script only) are not read at all:
the states are the same whether perf was there to read the samples or not.
"""

from __future__ import annotations

import os
import threading

import numba
import numpy as np

from scalestack.errors import UserError
from scalestack.trace import (
    NameTable,
    SampleTable,
    State,
    StateTable,
    SwitchSpanTable,
    ThreadTable,
    Trace,
)
from scalestack.trace.cpu_sweeps import witness_sweep
from scalestack.trace.event_facts import EventFacts, born_times
from scalestack.trace.events import (
    FUTEX_CMD_MASK,
    FUTEX_WAIT_OPS,
    MAX_CPUS,
    PID_MAX_LIMIT,
    PREV_STATE_DEAD,
    PREV_STATE_UNINTERRUPTIBLE,
    Kind,
    RawEvents,
    context_of,
    is_sorted,
    shows_no_cpu_state,
)
from scalestack.trace.exit_wakers import exit_wakers, exits, parent_pids
from scalestack.trace.futex_wakers import attribute_futex_wakers
from scalestack.trace.kernel_accounting import ABS_TOL_NS, RUNNING_TOL
from scalestack.trace.lookup import (
    EventIndex,
    find_sorted,
    member,
    order_by_key_then,
    unique_first,
    unique_sorted,
)
from scalestack.trace.parallel import balanced, on_threads
from scalestack.trace.rows import (
    RELEASE_EVERY,
    emit_row,
    give_back,
    give_back_pages,
    give_back_within,
    new_rows,
    put_row,
    rows_cut,
    rows_grown,
    state_table,
)
from scalestack.trace.switch_spans import switch_spans

# The compiled walk uses the enum values as literals; keep them in step.
assert [int(v) for v in State] == [0, 1, 2, 3, 4, 5]
assert (Kind.SWITCH, Kind.WAKEUP, Kind.WAKEUP_NEW, Kind.FORK, Kind.EXIT) == (1, 2, 3, 4, 6)
assert (Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV, Kind.TASK_COMM) == (8, 9, 10, 12)
assert (Kind.TASK_FORK, Kind.TASK_EXIT, Kind.STAT_RUNTIME, Kind.MIGRATE) == (13, 14, 15, 16)
assert PREV_STATE_DEAD == 48 and FUTEX_CMD_MASK == 0x7F

# A runtime report this close before a switch on the same CPU, with no event between, is the
# switch's own (measured: 2-5 us from prev's report to the sched_switch tracepoint under perf).
# States and event kinds as compile-time constants of the compiled walk (numba freezes globals)
S_RUNNING = int(State.RUNNING)
S_RUNNABLE = int(State.RUNNABLE)
S_SYNC_WAIT = int(State.SYNC_WAIT)
S_IO_WAIT = int(State.IO_WAIT)
S_SLEEP = int(State.SLEEP)
S_UNKNOWN = int(State.UNKNOWN)
K_SWITCH = int(Kind.SWITCH)
K_WAKEUP = int(Kind.WAKEUP)
K_WAKEUP_NEW = int(Kind.WAKEUP_NEW)
K_FORK = int(Kind.FORK)
K_EXIT = int(Kind.EXIT)
K_RENAME = int(Kind.RENAME)
K_FUTEX_ENTER = int(Kind.FUTEX_ENTER)
K_FUTEX_EXIT = int(Kind.FUTEX_EXIT)
K_FUTEX_WAITV = int(Kind.FUTEX_WAITV)
K_TASK_COMM = int(Kind.TASK_COMM)
K_EXEC = int(Kind.EXEC)
K_STAT_RUNTIME = int(Kind.STAT_RUNTIME)
K_MIGRATE = int(Kind.MIGRATE)

_SCHED_SLACK_NS = 30_000

# Hypervisor steal comes in host-scheduler slices (0.1-6 ms here). Shorter uncharged stretches
# are the kernel's clock skew around wakeups, which its own figures count as run delay.
_STEAL_MIN_NS = 100_000
_NO_END = (1 << 63) - 1  # `_reconcile_cut`'s open_end when no run is left open at the trace's end
_ASK = -(2**31)  # the waker (no tid) `_reconcile_cut` writes on the stretches `_reconcile_steals` decides

_WAIT_OPS_MASK = 0
for _op in FUTEX_WAIT_OPS:
    _WAIT_OPS_MASK |= 1 << _op


@numba.njit(cache=True, inline="always")
def _settle(out, m, s, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start):
    """Emit the interval before a tentatively repaired switch-in, as it now stands."""
    if pend[s]:
        if st_start[s] > p_start[s]:
            m = emit_row(out, m, s, p_start[s], st_start[s], p_state[s], p_cpu[s], p_addr[s], -1, p_rep[s])
        pend[s] = False
    return m


def _walk(time, cpu, tid, kind, a0, a1, a2, slot_of, born_at, n_slots, n_cpus, wait_ops_mask, win_start):
    """One pass over time-sorted events; returns the state intervals of traced threads.

    Output rows (`new_rows` columns): slot, start, end, state, cpu, addr (uint64 bits), waker, repaired.
    The same as `_walk_start`, `_walk_chunk` over consecutive pieces of the events, `_walk_end`.
    """
    rows, tail, carry = _walk_parts(time, cpu, tid, kind, a0, a1, a2, slot_of, born_at, n_slots, n_cpus, wait_ops_mask,
                                    win_start)
    return _walk_result(tuple(np.concatenate([r, t]) for r, t in zip(rows, tail, strict=True)), carry)


def _walk_parts(time, cpu, tid, kind, a0, a1, a2, slot_of, born_at, n_slots, n_cpus, wait_ops_mask, win_start,
                close_at=None):
    """`_walk`'s rows as the walk and its end emit them (not joined: `_walk_states` reads both), and its carry.
    What is open at the end closes at the last event, or at `close_at` when later (a part of a
    recording that goes on: its threads stay as they were until the part's end)."""
    carry = _walk_start(n_slots, n_cpus, born_at, time[0] if time.shape[0] > 0 else 0)
    rows = _walk_chunk(time, cpu, tid, kind, a0, a1, a2, slot_of, n_slots, n_cpus, wait_ops_mask, win_start, carry)
    t_last = time[time.shape[0] - 1] if time.shape[0] > 0 else 0
    tail = _walk_end(t_last if close_at is None else max(int(t_last), int(close_at)), n_slots, carry)
    return rows, tail, carry


def _walk_states(rows, tail, t0, t1, tids, release):
    """The walk's rows (then its end's) clipped to [t0, t1), as the state table's columns in thread
    order (a stable counting sort by slot; tids sorted), each thread's rows in emission order; and
    whether those are in start order within each thread (else the caller sorts). With `release` > 0,
    the rows' memory is given back every `release` rows copied (`give_back`: the caller drops
    them), so the copy adds little above them (it added all of them: +1.3 GB for 37.5 M rows)."""
    return _walk_states_of([rows, tail], t0, t1, tids, release)


def _walk_states_of(parts: list, t0, t1, tids, release):
    """`_walk_states` of any number of parts in emission order (a walk in chunks emits one per
    chunk); `parts` is emptied as they are copied, so that a part's memory goes with it."""
    n_slots = tids.shape[0]
    off = np.zeros(n_slots + 1, np.int64)
    for part in parts:
        _count_in_window(part[0], part[1], part[2], t0, t1, off)
    np.cumsum(off, out=off)
    cols = new_rows(off[n_slots])
    fill = off[:-1].copy()
    while parts:
        _fill_in_window(parts.pop(0), t0, t1, tids, fill, cols, release)
    return (*cols, _in_start_order(off, cols[1]))


@numba.njit(cache=True)
def _count_in_window(slot, start, end, t0, t1, off):
    """Rows of each slot inside [t0, t1), added to off[slot + 1]."""
    for i in range(slot.shape[0]):
        if end[i] > t0 and start[i] < t1:
            off[slot[i] + 1] += 1


@numba.njit(cache=True)
def _fill_in_window(part, t0, t1, tids, fill, out, release):
    """A part's rows inside [t0, t1), clipped, each written at its slot's next row (`fill`)."""
    tid, start, end, state, cpu, addr, waker, rep = out
    p_slot, p_start, p_end, p_state, p_cpu, p_addr, p_waker, p_rep = part
    done = 0
    for i in range(p_slot.shape[0]):
        if release > 0 and i - done == release:
            _give_back_rows(part, done, i, False)
            done = i
        if p_end[i] > t0 and p_start[i] < t1:
            s = p_slot[i]
            j = fill[s]
            fill[s] += 1
            tid[j] = tids[s]
            start[j] = max(p_start[i], t0)
            end[j] = min(p_end[i], t1)
            state[j] = p_state[i]
            cpu[j] = p_cpu[i]
            addr[j] = p_addr[i]
            waker[j] = p_waker[i]
            rep[j] = p_rep[i]
    if release > 0:
        _give_back_rows(part, done, p_slot.shape[0], False)


@numba.njit(cache=True)
def _in_start_order(off, start):
    for k in range(off.shape[0] - 1):
        for j in range(off[k] + 1, off[k + 1]):
            if start[j] < start[j - 1]:
                return False
    return True


@numba.njit(cache=True)
def _give_back_rows(rows, lo, hi, within):
    """`give_back` (`within`: `give_back_within`) rows lo..hi of every column of `new_rows`."""
    give_back_pages(rows[0], lo, hi, within)
    give_back_pages(rows[1], lo, hi, within)
    give_back_pages(rows[2], lo, hi, within)
    give_back_pages(rows[3], lo, hi, within)
    give_back_pages(rows[4], lo, hi, within)
    give_back_pages(rows[5], lo, hi, within)
    give_back_pages(rows[6], lo, hi, within)
    give_back_pages(rows[7], lo, hi, within)


def _walk_result(out, carry):
    (st, st_start, st_cpu, st_addr, st_rep, st_hint, kernel_rt, futex_addr, in_futex, exiting, exit_time, dead, end_time,
     uncertain, repairs, pend, p_state, p_start, p_cpu, p_addr, p_rep, p_lo, p_hi, p_unc, chain, cpu_last, rt_at,
     rt_tid, gaps, cnt) = carry
    return (out, dead, end_time, gaps, cnt[1], cnt[2], cnt[3], uncertain, repairs, kernel_rt, cnt[0])


def _walk_start(n_slots, n_cpus, born_at, t0):
    """The walk's state before the first event (`t0`: its time): per thread slot, per CPU, and the
    counters [settled, gaps_traced, missing_wakeups, double_running]. `_walk_chunk` carries it on."""
    st = np.full(n_slots, -1, np.int64)  # current State, -1 = not born yet
    st_start = np.zeros(n_slots, np.int64)
    st_cpu = np.full(n_slots, -1, np.int64)
    st_addr = np.zeros(n_slots, np.int64)
    st_rep = np.zeros(n_slots, np.int64)
    st_hint = np.zeros(n_slots, np.int64)  # earliest possible switch-in (wakeup or migration)
    kernel_rt = np.zeros(n_slots, np.int64)  # sched_stat_runtime sums: the kernel's own accounting
    futex_addr = np.zeros(n_slots, np.int64)
    in_futex = np.zeros(n_slots, np.bool_)
    exiting = np.zeros(n_slots, np.bool_)
    exit_time = np.zeros(n_slots, np.int64)
    dead = np.zeros(n_slots, np.bool_)
    end_time = np.zeros(n_slots, np.int64)
    uncertain = np.zeros(n_slots, np.int64)
    repairs = np.zeros(n_slots, np.int64)
    # a repaired switch-in stays tentative until the kernel's next runtime report for the thread
    # (sched_stat_runtime: ns run since the switch-in) fixes it; p_* hold the interval before it
    pend = np.zeros(n_slots, np.bool_)
    p_state = np.zeros(n_slots, np.int64)
    p_start = np.zeros(n_slots, np.int64)
    p_cpu = np.zeros(n_slots, np.int64)
    p_addr = np.zeros(n_slots, np.int64)
    p_rep = np.zeros(n_slots, np.int64)
    p_lo = np.zeros(n_slots, np.int64)
    p_hi = np.zeros(n_slots, np.int64)
    p_unc = np.zeros(n_slots, np.int64)
    chain = np.full(n_cpus, -1, np.int64)  # task believed current on each CPU (-1 unknown)
    cpu_last = np.full(n_cpus, -1, np.int64)  # time of the CPU's previous event
    rt_at = np.full(n_cpus, -2, np.int64)  # time and task of the CPU's last runtime report
    rt_tid = np.full(n_cpus, -1, np.int64)
    gaps = np.zeros(n_cpus, np.int64)
    cnt = np.zeros(4, np.int64)
    # threads alive before their first event (no fork seen) are UNKNOWN from the first event
    st[born_at < 0] = S_UNKNOWN
    st_start[born_at < 0] = t0
    return (st, st_start, st_cpu, st_addr, st_rep, st_hint, kernel_rt, futex_addr, in_futex, exiting, exit_time, dead,
            end_time, uncertain, repairs, pend, p_state, p_start, p_cpu, p_addr, p_rep, p_lo, p_hi, p_unc, chain,
            cpu_last, rt_at, rt_tid, gaps, cnt)


@numba.njit(cache=True)
def _walk_chunk(time, cpu, tid, kind, a0, a1, a2, slot_of, n_slots, n_cpus, wait_ops_mask, win_start, carry):
    """Walk the next time-sorted events from the state in `carry` (updated in place); the rows of
    the intervals they ended."""
    out = new_rows(time.shape[0] + 2 * n_slots + 64)
    m = np.int64(0)  # (not the literal 0: a call with constants would compile the walk a second time)
    i = np.int64(0)
    while True:
        m, i = _walk_events(time, cpu, tid, kind, a0, a1, a2, slot_of, n_slots, n_cpus, wait_ops_mask, win_start,
                            carry, out, m, i)
        if i >= time.shape[0]:
            break
        out = rows_grown(out, m, 2 * out[0].shape[0])  # stopped for room: grown outside the loop (a replaced array slows it 2x)
    return rows_cut(out, 0, m)


@numba.njit(cache=True)
def _walk_events(time, cpu, tid, kind, a0, a1, a2, slot_of, n_slots, n_cpus, wait_ops_mask, win_start, carry, out, m,
                 i0):
    """`_walk_chunk` from event i0, its rows written from m on, until the events end or `out` has
    no room for the next one's: the rows written and the next event."""
    (st, st_start, st_cpu, st_addr, st_rep, st_hint, kernel_rt, futex_addr, in_futex, exiting, exit_time, dead, end_time,
     uncertain, repairs, pend, p_state, p_start, p_cpu, p_addr, p_rep, p_lo, p_hi, p_unc, chain, cpu_last, rt_at,
     rt_tid, gaps, cnt) = carry
    settled, gaps_traced, missing_wakeups, double_running = cnt[0], cnt[1], cnt[2], cnt[3]
    n = time.shape[0]
    n_map = slot_of.shape[0]
    room = out[0].shape[0] - 2 * n_slots - 16

    i = i0
    while i < n:
        if m > room:
            break
        t = time[i]
        c = cpu[i]
        k = kind[i]
        if shows_no_cpu_state(k):
            i += 1
            continue
        x = context_of(kind, a0, tid, i)
        xs = slot_of[x] if 0 <= x < n_map else -1
        cvalid = 0 <= c < n_cpus
        seen = cvalid and x >= 0  # (-1: the kernel did not name the task, as for one past its exit's unhash)

        # --- the context task x is current on CPU c: check the CPU's chain
        if seen:
            q = chain[c]
            if q >= 0 and q != x:
                gaps[c] += 1
                qs = slot_of[q] if 0 <= q < n_map else -1
                if qs >= 0 or xs >= 0:
                    gaps_traced += 1
                # q was running here but its switch-out was lost: last proof is cpu_last[c]
                if qs >= 0 and st[qs] == S_RUNNING and st_cpu[qs] == c and not dead[qs]:
                    m = _settle(out, m, qs, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start)
                    at = max(cpu_last[c], st_start[qs])
                    repairs[qs] += 1
                    uncertain[qs] += t - at
                    if at > st_start[qs]:
                        m = emit_row(out, m, qs, st_start[qs], at, S_RUNNING, c, 0, -1, st_rep[qs])
                        st_start[qs] = at
                    st[qs] = S_SLEEP  # reason unknown
                    st_cpu[qs] = -1
                    st_addr[qs] = 0
                    st_rep[qs] = 1
            chain[c] = x

        # --- and if x is traced, it is RUNNING on c now
        if xs >= 0 and st[xs] >= 0 and not dead[xs]:
            was = st[xs]
            if was != S_RUNNING:
                lo = st_start[xs]
                if cvalid and cpu_last[c] > lo:
                    lo = cpu_last[c]
                if lo > t:
                    lo = t
                if was == S_RUNNABLE and st_cpu[xs] == c:
                    # woken for (or moved to) this CPU: it ran as soon as the CPU was free
                    at = max(lo, st_hint[xs])
                elif was == S_UNKNOWN:
                    at = lo  # first sight of a thread that existed before the recording
                elif was == S_SYNC_WAIT:
                    at = t  # a futex waiter's first act after its wakeup is leaving the futex call
                else:
                    at = lo + (t - lo) // 2  # no evidence either way: the middle halves the worst case
                if k == K_STAT_RUNTIME and a0[i] == x and was != S_UNKNOWN:
                    # the kernel's report says how long x has run since it was switched in
                    at = min(max(t - a1[i], lo), t)
                    repairs[xs] += 1
                    settled += 1
                    if at > st_start[xs]:
                        m = emit_row(out, m, xs, st_start[xs], at, was, st_cpu[xs], st_addr[xs], -1, st_rep[xs])
                        st_start[xs] = at
                elif was != S_UNKNOWN:
                    repairs[xs] += 1
                    pend[xs] = True
                    p_state[xs] = was
                    p_start[xs] = st_start[xs]
                    p_cpu[xs] = st_cpu[xs]
                    p_addr[xs] = st_addr[xs]
                    p_rep[xs] = st_rep[xs]
                    p_lo[xs] = lo
                    p_hi[xs] = t
                    p_unc[xs] = max(at - lo, t - at)
                    uncertain[xs] += p_unc[xs]
                    if at > st_start[xs]:
                        st_start[xs] = at
                elif at > st_start[xs]:
                    m = emit_row(out, m, xs, st_start[xs], at, was, st_cpu[xs], st_addr[xs], -1, st_rep[xs])
                    st_start[xs] = at
                st[xs] = S_RUNNING
                st_cpu[xs] = c
                st_addr[xs] = 0
                st_rep[xs] = 1 if was != S_UNKNOWN else 0
            elif cvalid and st_cpu[xs] != c:
                # running, but now on another CPU: a switch-out/in pair was lost
                m = _settle(out, m, xs, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start)
                double_running += 1
                if t > st_start[xs]:
                    m = emit_row(out, m, xs, st_start[xs], t, S_RUNNING, st_cpu[xs], 0, -1, st_rep[xs])
                    st_start[xs] = t
                st_cpu[xs] = c
                st_rep[xs] = 1

        if k == K_SWITCH:  # SWITCH: x (== prev) leaves, next enters
            nx = a1[i]
            ps = a2[i]
            # The kernel switches at the clock it read on entering schedule(), just before it
            # charged prev (prev's sched_stat_runtime); the switch tracepoint fires microseconds
            # later. Run delay and CPU time are counted to that instant, so use it.
            ts = t
            if cvalid and rt_tid[c] == x and rt_at[c] == cpu_last[c] and t - rt_at[c] <= _SCHED_SLACK_NS:
                ts = rt_at[c]
            if xs >= 0 and st[xs] == S_RUNNING and not dead[xs]:
                m = _settle(out, m, xs, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start)
                if ts > st_start[xs]:
                    m = emit_row(out, m, xs, st_start[xs], ts, S_RUNNING, st_cpu[xs], 0, -1, st_rep[xs])
                st_start[xs] = max(ts, st_start[xs])
                st_rep[xs] = 0
                st_addr[xs] = 0
                if (ps & PREV_STATE_DEAD) != 0:  # X or Z: the task is gone
                    dead[xs] = True
                    end_time[xs] = t
                    st[xs] = -1
                elif ps == 0:
                    st[xs] = S_RUNNABLE  # preempted: still runnable
                    st_cpu[xs] = c
                    st_hint[xs] = ts
                elif in_futex[xs]:
                    st[xs] = S_SYNC_WAIT
                    st_cpu[xs] = -1
                    st_addr[xs] = futex_addr[xs]
                elif (ps & PREV_STATE_UNINTERRUPTIBLE) != 0:
                    st[xs] = S_IO_WAIT
                    st_cpu[xs] = -1
                else:
                    st[xs] = S_SLEEP
                    st_cpu[xs] = -1
            ns = slot_of[nx] if 0 <= nx < n_map else -1
            if ns >= 0 and st[ns] >= 0 and not dead[ns]:
                if st[ns] == S_RUNNING:
                    if st_cpu[ns] != c:
                        m = _settle(out, m, ns, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start)
                        double_running += 1
                        if t > st_start[ns]:
                            m = emit_row(out, m, ns, st_start[ns], t, S_RUNNING, st_cpu[ns], 0, -1, st_rep[ns])
                            st_start[ns] = t
                        st_cpu[ns] = c
                else:
                    if st[ns] != S_RUNNABLE and st[ns] != S_UNKNOWN:
                        missing_wakeups += 1
                    tn = max(ts, st_start[ns])
                    if tn > st_start[ns]:
                        m = emit_row(out, m, ns, st_start[ns], tn, st[ns], st_cpu[ns], st_addr[ns], -1, st_rep[ns])
                        st_start[ns] = tn
                    st[ns] = S_RUNNING
                    st_cpu[ns] = c
                    st_addr[ns] = 0
                    st_rep[ns] = 0
            if cvalid:
                chain[c] = nx
        elif k == K_WAKEUP or k == K_WAKEUP_NEW:  # WAKEUP(_NEW)
            w = a0[i]
            ws = slot_of[w] if 0 <= w < n_map else -1
            if ws >= 0 and st[ws] >= S_SYNC_WAIT and not dead[ws]:
                # blocked -> RUNNABLE; a wakeup of a running or runnable task changes nothing
                if t > st_start[ws]:
                    m = emit_row(out, m, ws, st_start[ws], t, st[ws], st_cpu[ws], st_addr[ws], x, st_rep[ws])
                    st_start[ws] = t
                st[ws] = S_RUNNABLE
                st_cpu[ws] = a1[i]
                st_hint[ws] = t
                st_addr[ws] = 0
                st_rep[ws] = 0
            elif k == K_WAKEUP_NEW and ws >= 0 and st[ws] == S_RUNNABLE and not dead[ws] and t > st_start[ws]:
                # The kernel queues a new task at this wakeup, not at its fork: a parent preempted
                # between the two (milliseconds with more threads than CPUs) left a child that was
                # not yet runnable, and its run delay counts from here. The only WAKEUP_NEW a task
                # gets comes before it first runs, so a RUNNABLE child here is still the fork's.
                st_start[ws] = t
                st_cpu[ws] = a1[i]
                st_hint[ws] = t
        elif k == K_FORK:  # FORK: the child is runnable at its wakeup (WAKEUP_NEW), else at once
            ch = a1[i]
            cs = slot_of[ch] if 0 <= ch < n_map else -1
            if cs >= 0 and st[cs] < 0 and not dead[cs]:
                st[cs] = S_RUNNABLE
                st_start[cs] = t
                st_hint[cs] = t
                st_cpu[cs] = c
                st_rep[cs] = 0
        elif k == K_EXIT:  # EXIT
            e = a0[i]
            es = slot_of[e] if 0 <= e < n_map else -1
            if es >= 0:
                exiting[es] = True
                exit_time[es] = t
        elif k == K_FUTEX_ENTER:  # FUTEX_ENTER: only the blocking operations make a SYNC_WAIT
            if xs >= 0:
                op = a1[i] & 0x7F
                if op < 63 and ((wait_ops_mask >> op) & 1) == 1:
                    in_futex[xs] = True
                    futex_addr[xs] = a0[i]
        elif k == K_FUTEX_WAITV:  # FUTEX_WAITV
            if xs >= 0:
                in_futex[xs] = True
                futex_addr[xs] = a0[i]
        elif k == K_FUTEX_EXIT:  # FUTEX_EXIT
            if xs >= 0:
                in_futex[xs] = False
        elif k == K_STAT_RUNTIME:  # STAT_RUNTIME: the kernel charged `runtime` ns to the task
            if cvalid:
                rt_at[c] = t
                rt_tid[c] = a0[i] if a0[i] == x else -1
            rs = slot_of[a0[i]] if 0 <= a0[i] < n_map else -1
            if rs >= 0 and t > win_start:
                kernel_rt[rs] += min(a1[i], t - win_start)  # only the part inside the window
            if rs >= 0 and rs == xs and pend[xs]:
                # first report since a repaired switch-in: it happened `runtime` ns ago
                uncertain[xs] -= p_unc[xs]
                st_start[xs] = min(max(t - a1[i], p_lo[xs]), p_hi[xs])
                m = _settle(out, m, xs, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start)
                settled += 1
        elif k == K_MIGRATE:  # MIGRATE: a runnable task moved to another CPU's queue
            ms = slot_of[a0[i]] if 0 <= a0[i] < n_map else -1
            if ms >= 0 and st[ms] == S_RUNNABLE:
                st_cpu[ms] = a2[i]
                st_hint[ms] = t

        if seen:
            cpu_last[c] = t
        i += 1

    cnt[0], cnt[1], cnt[2], cnt[3] = settled, gaps_traced, missing_wakeups, double_running
    return m, i


@numba.njit(cache=True)
def _walk_end(t_last, n_slots, carry):
    """Close what is still open at the last event (`t_last`); the rows of those intervals."""
    (st, st_start, st_cpu, st_addr, st_rep, st_hint, kernel_rt, futex_addr, in_futex, exiting, exit_time, dead, end_time,
     uncertain, repairs, pend, p_state, p_start, p_cpu, p_addr, p_rep, p_lo, p_hi, p_unc, chain, cpu_last, rt_at,
     rt_tid, gaps, cnt) = carry
    out = new_rows(2 * n_slots + 1)
    m = 0
    for s in range(n_slots):
        m = _settle(out, m, s, pend, p_state, p_start, p_cpu, p_addr, p_rep, st_start)
        if st[s] >= 0 and not dead[s]:
            end = t_last
            if exiting[s]:
                end = max(exit_time[s], st_start[s])
                dead[s] = True
            if end > st_start[s]:
                m = emit_row(out, m, s, st_start[s], end, st[s], st_cpu[s], st_addr[s], -1, st_rep[s])
            end_time[s] = max(end, st_start[s])
    return rows_cut(out, 0, m)


def kernel_runtime_check(states: StateTable, tids: np.ndarray, kernel_rt: np.ndarray, available: bool) -> dict:
    """Compare each thread's RUNNING time with the kernel's own runtime accounting
    (`runtime_verdict` of `thread_running`)."""
    if not available:
        return {"available": False}
    return runtime_verdict(tids, thread_running(states, tids), kernel_rt, available)


def thread_running(states: StateTable, tids: np.ndarray) -> np.ndarray:
    """RUNNING ns of each of `tids` (sorted) in a thread-sorted table; tables of disjoint threads
    give parts that add up."""
    run, ok = _running_sums(states.tid, states.start_ns, states.end_ns, states.state, np.asarray(tids, np.int64),
                            int(State.RUNNING))
    if not ok:  # a tid sorting after every one of tids: NumPy says what is wrong
        run = np.zeros(len(tids), np.int64)
        m = states.state == int(State.RUNNING)
        np.add.at(run, np.searchsorted(tids, states.tid[m]), states.duration_ns[m])
    return run


def runtime_verdict(tids: np.ndarray, run: np.ndarray, kernel_rt: np.ndarray, available: bool) -> dict:
    """Each thread's RUNNING time (`run`) against the kernel's own runtime accounting.

    sched_stat_runtime reports every runtime increment the scheduler charges to a task, so its
    sum over the trace is the kernel's truth for that thread (what /proc/<tid>/schedstat shows),
    available even for threads that exited during the recording. A thread whose RUNNING time
    differs by more than 2% (and more than 1 ms) is listed. Steal time in a VM is excluded from
    the kernel's figure but not from wall-clock RUNNING, so small positive differences remain.
    """
    if not available:
        return {"available": False}
    diff = run - kernel_rt
    bad = (np.abs(diff) > RUNNING_TOL * np.maximum(kernel_rt, 1)) & (np.abs(diff) > ABS_TOL_NS) & (kernel_rt > 0)
    rel = np.where(kernel_rt > 0, diff / np.maximum(kernel_rt, 1), 0.0)
    return {
        "available": True,
        "per_thread": {str(int(t)): [int(r), int(k)] for t, r, k in zip(tids, run, kernel_rt, strict=True) if k or r},
        "max_abs_rel_diff": float(np.max(np.abs(rel))) if len(rel) else 0.0,
        "disagreeing": [[int(t), int(r), int(k), float(x)] for t, r, k, x, b in zip(tids, run, kernel_rt, rel, bad,
                                                                                      strict=True) if b],
    }


@numba.njit(cache=True)
def _running_sums(tid, start, end, state, tids, running):
    """`np.add.at(run, np.searchsorted(tids, tid[m]), (end - start)[m])` over the rows m in state
    `running`, with no copy of those rows (+0.5 GB for 37.5 M states); False where a row's position
    is past the end of tids (the statement raises)."""
    run = np.zeros(tids.shape[0], np.int64)
    ok = True
    last = -1  # the row whose tid's position `lo` is (rows come thread by thread)
    lo = 0
    for i in range(tid.shape[0]):
        if state[i] == running:
            v = tid[i]
            if last < 0 or tid[last] != v:
                lo, hi = 0, tids.shape[0]
                while lo < hi:  # np.searchsorted's position (side "left")
                    mid = (lo + hi) // 2
                    if tids[mid] < v:
                        lo = mid + 1
                    else:
                        hi = mid
                last = i
            if lo < tids.shape[0]:
                run[lo] += end[i] - start[i]
            else:
                ok = False
    return run, ok


def _per_thread(states: StateTable):
    """Each thread's rows of a (tid, start)-sorted table, as (tid, its own table)."""
    bounds = np.flatnonzero(np.r_[True, states.tid[1:] != states.tid[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        th = states.take(np.arange(lo, hi))
        yield int(th.tid[0]), th


def _cut(th: StateTable, *at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One thread's rows cut also at the instants `at` (those inside its life): the segments'
    starts and ends, and the row each segment lies in."""
    cuts = unique_sorted(np.concatenate([th.start_ns, th.end_ns, *at]))
    cuts = cuts[(cuts >= th.start_ns[0]) & (cuts <= th.end_ns[-1])]
    seg_a, seg_b = cuts[:-1], cuts[1:]
    keep = seg_b > seg_a
    seg_a, seg_b = seg_a[keep], seg_b[keep]
    return seg_a, seg_b, np.searchsorted(th.start_ns, seg_a, side="right") - 1


def reconcile_running(states: StateTable, events: RawEvents, t0: int, t1: int, index: EventIndex | None = None,
                      open_end: int | None = None, workers: int | None = None) -> tuple[StateTable, dict]:
    """Make RUNNING agree with the scheduler's own runtime reports.

    Each sched_stat_runtime report (task p was charged d ns at time t) proves p was on a CPU
    during [t - d, t]; the reports of one task tile its running time, and their union matched
    each thread's CLOCK_THREAD_CPUTIME_ID within 1% here where switch events alone were off by
    up to 16% (the kernel drops some switches). So: time a report covers becomes RUNNING; time
    the switches call RUNNING but no report covers (a switch lost in a pair, a repair placed too
    early, or the hypervisor running another guest: reports count task time, not wall time)
    returns to the state the thread was in before that stretch. Changed intervals are marked
    repaired. Threads with no reports (real-time tasks, recordings without the tracepoint) keep
    their switch-based states.

    One exception: such a stretch, at least 100 us long, inside a run whose own switches were both
    seen, on a CPU where no other task left any event meanwhile, and not after the thread entered a
    futex wait (then it slept). No other task ran there, so the thread was never
    queued: it was current while the hypervisor ran something else (steal, which a VM's kernel
    charges neither as CPU time nor as run delay; 21 ms of one producer/consumer thread in one
    recording here). It becomes UNKNOWN, not RUNNABLE.

    At the trace's end (`open_end`, when given: the build passes its window's end), a thread still
    running keeps that run's RUNNING after its last report: the report that charges it comes after
    the trace (an `import --between` part ends inside runs; the scheduler charges a running task at
    its next tick or switch-out, up to 10 ms later).

    Returns the new table, its adjacent rows joined (`builder._merge_adjacent`: done as the rows are
    written, no second table), and, per tid, [ns added to RUNNING, ns removed]; the ns of those
    stolen stretches; the ns kept RUNNING at the end unreported. Two steps (`_reconcile_rows`, then
    `_reconcile_steals`), so that a caller can free `states` between them. Threads are cut on
    `workers` threads at once (default: one per CPU for tables of 2^16 rows or more).
    """
    index = index if index is not None else EventIndex(events.sorted())
    cut = _reconcile_rows(states, index, open_end=open_end, workers=workers)
    if cut is None:
        return _merge_adjacent(states), {}, {}, {}
    return _reconcile_steals(cut, index)[:4]


def _reconcile_rows(states: StateTable, index: EventIndex, release: int = 0, open_end: int | None = None,
                    workers: int | None = None):
    """`reconcile_running`'s new rows, each stretch that may have been stolen written as not
    stolen and left for `_reconcile_steals` to decide; None if no runtime report counts. With
    `release` > 0 (the caller drops `states` afterwards, unless None is returned), `states`' memory
    is given back as the pass reads it, every `release` rows (`give_back`), so the new table adds
    little above the old one (it added all of it: +1.5 GB for 37.5 M rows)."""
    events = index.events
    return _reconcile_rows_of(states, index.rows(Kind.STAT_RUNTIME), events.time, events.arg0, events.arg1, release,
                              open_end, workers)


def _reconcile_rows_of(states: StateTable, rep: np.ndarray, e_time: np.ndarray, e_arg0: np.ndarray, e_arg1: np.ndarray,
                       release: int = 0, open_end: int | None = None, workers: int | None = None):
    """`_reconcile_rows` given the runtime reports: rows `rep` (time order) of the columns time,
    tid (arg0) and runtime (arg1), which need hold no other event. Threads are cut on `workers`
    threads at once (default: one per CPU this process may use, for tables of 2^16 rows or more),
    each writing its own part of the output: the same rows as one after the other."""
    if len(rep) == 0 or len(states) == 0 or not np.any(e_arg1[rep] > 0):
        return None
    bounds = _thread_bounds(states.tid)
    th_tid = states.tid[bounds[:-1]].astype(np.int64)
    if release > 0:
        give_back(states.tid, 0, len(states))  # read only by `_thread_bounds`
    br, r_off = _reports_by_thread(th_tid, rep, e_arg0, e_arg1)
    off = _cut_room(bounds, r_off)
    out = new_rows(max(int(off[-1]), 1))
    sums = np.zeros((4, len(th_tid)), np.int64)
    m_end = off[:-1] + 1
    cols = (states.start_ns, states.end_ns, states.state, states.repaired, states.cpu, states.addr.view(np.int64),
            states.waker)
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if len(states) + len(br) >= 1 << 16 else 1
    groups = balanced(np.diff(bounds) + np.diff(r_off), workers)
    end = _NO_END if open_end is None else int(open_end)

    def cut(k: int) -> None:
        _cut_threads(groups[k], *cols, bounds, th_tid, br, r_off, _STEAL_MIN_NS, e_time, e_arg1, release, end, out, off,
                     m_end, sums, len(groups) == 1)

    on_threads(len(groups), cut)
    if release > 0:  # the pages each thread shared with the next
        for col in cols:
            give_back(col, 0, len(col))
    m = int(m_end[-1]) if len(groups) == 1 else _cut_compact(out, off, m_end, release)
    return out, m, sums, th_tid


def _reconcile_steals(cut, index: EventIndex) -> tuple[StateTable, dict, dict, dict, tuple]:
    """Finish `_reconcile_rows`' table: the stretches the CPU's events show nobody else used
    (answered by one sweep over the time-sorted events, `cpu_sweeps.witness_sweep`:
    no by-CPU buckets, 4 bytes an event) become UNKNOWN, and the rows are joined where those
    decisions let them. Returns the table; per tid, [ns added, dropped], ns stolen, ns kept
    RUNNING at the end unreported; and the table's writable columns with their room to spare
    (`attribute_futex_wakers`' `room`)."""
    ev = index.events
    return _reconcile_steals_by(cut, lambda *q: witness_sweep(ev.time, ev.cpu, ev.kind, ev.arg0, ev.arg1, ev.tid,
                                                               _WAIT_OPS_MASK, *q))


def steal_questions(cut) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stretches `_reconcile_rows` left to ask about, as `cpu_sweeps.witness_start` takes them:
    (cpu, start, end, tid)."""
    rows, m = cut[0], cut[1]
    q_row = _asked(rows, m)
    return rows[4][q_row], rows[1][q_row], rows[2][q_row], rows[0][q_row]


def _reconcile_steals_by(cut, shows) -> tuple[StateTable, dict, dict, dict, tuple]:
    """`_reconcile_steals` with `shows(cpu, start, end, tid)` answering `steal_questions`."""
    rows, m, sums, th_tid = cut
    q_row = _asked(rows, m)
    if len(q_row):
        shown = shows(rows[4][q_row], rows[1][q_row], rows[2][q_row], rows[0][q_row])
        m = _settle_steals(rows, m, q_row, ~shown, np.searchsorted(th_tid, rows[0][q_row]), sums)
    changed = {str(int(th_tid[j])): [int(sums[0, j]), int(sums[1, j])]
               for j in np.flatnonzero((sums[0] > 0) | (sums[1] > 0))}
    stolen = {str(int(th_tid[j])): int(sums[2, j]) for j in np.flatnonzero(sums[2] > 0)}
    unreported = {str(int(th_tid[j])): int(sums[3, j]) for j in np.flatnonzero(sums[3] > 0)}
    return state_table(rows_cut(rows, 0, m)), changed, stolen, unreported, rows


@numba.njit(cache=True)
def _settle_steals(rows, m, q_row, stolen, q_th, sums):
    """The stolen stretches (rows q_row, of threads q_th) UNKNOWN, every stretch asked about with
    no CPU or waker and open to joins again (`_reconcile_cut` kept them apart), and the first m
    rows joined in place; how many remain."""
    for q in range(q_row.shape[0]):
        r = q_row[q]
        rows[4][r] = -1
        rows[6][r] = -1
        if stolen[q]:
            rows[3][r] = S_UNKNOWN
            sums[2, q_th[q]] += rows[2][r] - rows[1][r]
    w = 0
    for i in range(m):
        w = put_row(rows, w, rows[0][i], rows[1][i], rows[2][i], rows[3][i], rows[4][i], rows[5][i], rows[6][i],
                    rows[7][i])
    return w


@numba.njit(cache=True)
def _thread_bounds(tid):
    """Where each thread's rows begin in a thread-sorted table, and its length."""
    n = tid.shape[0]
    k = 1
    for i in range(1, n):
        k += tid[i] != tid[i - 1]
    out = np.empty(k + 1, np.int64)
    out[0] = 0
    m = 1
    for i in range(1, n):
        if tid[i] != tid[i - 1]:
            out[m] = i
            m += 1
    out[k] = n
    return out


@numba.njit(cache=True, inline="always")
def _next_cut(xa, xb, xc, xd, ia, ib, ic, id_):
    """The least head of four sorted arrays (from positions ia..id_): which one (-1: all done)."""
    w = -1
    c = 0
    if ia < xa.shape[0]:
        w, c = 0, xa[ia]
    if ib < xb.shape[0] and (w < 0 or xb[ib] < c):
        w, c = 1, xb[ib]
    if ic < xc.shape[0] and (w < 0 or xc[ic] < c):
        w, c = 2, xc[ic]
    if id_ < xd.shape[0] and (w < 0 or xd[id_] < c):
        w, c = 3, xd[id_]
    return w, c


@numba.njit(cache=True)
def _reports_by_thread(th_tid, rep, e_arg0, e_arg1):
    """The runtime reports' rows (`rep`, time order) that count (charging > 0 ns, of a thread in
    `th_tid`), bucketed by thread in one pass (a stable counting sort): the rows, and where each
    thread's begin (its own stay in time order)."""
    n_th = th_tid.shape[0]
    r_th = np.full(rep.shape[0], -1, np.int32)
    r_off = np.zeros(n_th + 1, np.int64)
    last_tid = -1
    last_j = -2  # none looked up yet
    for i in range(rep.shape[0]):
        r = rep[i]
        if e_arg1[r] <= 0:
            continue
        if last_j == -2 or e_arg0[r] != last_tid:
            last_tid = e_arg0[r]
            last_j = find_sorted(th_tid, last_tid)
        r_th[i] = last_j
        if last_j >= 0:
            r_off[last_j + 1] += 1
    for j in range(n_th):
        r_off[j + 1] += r_off[j]
    fill = r_off[:-1].copy()
    br = np.empty(r_off[n_th], rep.dtype)
    for i in range(rep.shape[0]):
        j = r_th[i]
        if j >= 0:
            br[fill[j]] = rep[i]
            fill[j] += 1
    return br, r_off


@numba.njit(cache=True)
def _cut_room(bounds, r_off):
    """Where each thread's part of `_cut_threads`' output begins, and their end: a row that no row
    joins (`put_row` reads the row before the first), then room for both bounds of each of its rows
    and both edges of each of its reports (its rows alone when it has none)."""
    n_th = bounds.shape[0] - 1
    off = np.zeros(n_th + 1, np.int64)
    for j in range(n_th):
        n = bounds[j + 1] - bounds[j]
        if r_off[j + 1] > r_off[j]:
            n = 2 * n + 2 * (r_off[j + 1] - r_off[j])
        off[j + 1] = off[j] + 1 + n
    return off


@numba.njit(cache=True, nogil=True)
def _cut_threads(js, start, end, state, repaired, cpu, addr, waker, bounds, th_tid, br, r_off, steal_min, e_time, e_arg1,
                 release, open_end, out, off, m_end, sums, contiguous):
    """`_cut_thread` of the threads `js`, each writing its own rows of `out` (after row off[j], which
    it marks as no thread's) and its own column of `sums`: threads apart from each other, so groups
    of them run at once. `contiguous` (`js` all threads, in order): each thread's rows right after
    the one before's, from row 0 (nothing to move together afterwards)."""
    m = 0
    for q in range(js.shape[0]):
        j = js[q]
        if not contiguous:
            m = off[j]
            out[0][m] = -1
            m += 1
        m = _cut_thread(j, start, end, state, repaired, cpu, addr, waker, bounds, th_tid, br, r_off, steal_min, e_time,
                        e_arg1, release, open_end, out, m, sums)
        m_end[j] = m


@numba.njit(cache=True)
def _cut_thread(j, start, end, state, repaired, cpu, addr, waker, bounds, th_tid, br, r_off, steal_min, e_time, e_arg1,
                release, open_end, out, m, sums):
    """The pass of `reconcile_running` over thread j (rows bounds[j]..bounds[j + 1] of the thread-sorted
    input, reports br[r_off[j]:r_off[j + 1]]): it is cut at its rows' bounds and at the edges of the
    union of its reports (clipped to its life); a thread without reports keeps its rows. A segment
    becomes RUNNING where a report covers it (add); stops being RUNNING where none does (drop),
    taking the state before its RUNNING stretch (UNKNOWN if none), or UNKNOWN where it is long
    enough, unrepaired, on a CPU, and the CPU's events show nothing else ran there (stolen: asked by
    `_reconcile_steals` afterwards; the row is written as not stolen, with waker `_ASK`, so that no
    row joins it, and the CPU to ask about). A thread still running at `open_end` (its last row
    RUNNING, reaching it) keeps that run's RUNNING after its last report: the report that would
    cover it falls after the trace. Rows are written from out row m, adjacent ones joined
    (`put_row`); returns the row after its last. sums[:, j]: the ns added, dropped, stolen (by
    `_settle_steals`) and kept unreported at the end. Only the thread's own reports are sorted, and
    its cuts are read from the four sorted lists they come from as they merge (no array of them).
    With `release`, the thread's input rows are given back (every `release` rows if > 0) once read
    for the last time (a row read later, the state of the last stretch that was not RUNNING, is
    kept in a variable): only pages wholly its own, as other threads' rows may be read meanwhile."""
    lo = bounds[j]
    hi = bounds[j + 1]
    ra = r_off[j]
    rb = r_off[j + 1]
    done = lo  # rows before this are given back (with `release`)
    if rb == ra:  # no reports: the thread's rows as they are
        for r in range(lo, hi):
            if release > 0 and r - done >= release:
                done = _cut_given_back(start, end, state, repaired, cpu, addr, waker, done, r)
            m = put_row(out, m, th_tid[j], start[r], end[r], state[r], cpu[r], addr[r], waker[r], repaired[r])
        if release > 0:
            _cut_given_back(start, end, state, repaired, cpu, addr, waker, done, hi)
        return m
    life0 = start[lo]
    life1 = end[hi - 1]
    # the union of the thread's reports ([time - runtime, time]), clipped to its life
    sa = np.empty(rb - ra, np.int64)
    sb = np.empty(rb - ra, np.int64)
    k = 0
    for i in range(ra, rb):
        a = min(max(e_time[br[i]] - e_arg1[br[i]], life0), life1)
        b = min(max(e_time[br[i]], life0), life1)
        if b > a:
            sa[k] = a
            sb[k] = b
            k += 1
    # the reports' starts are mostly in order already (their ends are): sort only if not
    o = np.arange(k) if is_sorted(sa[:k]) else np.argsort(sa[:k], kind="mergesort")
    ua = np.empty(k, np.int64)
    ub = np.empty(k, np.int64)
    n_sp = 0
    for q in range(k):
        a = sa[o[q]]
        b = sb[o[q]]
        if n_sp > 0 and a <= ub[n_sp - 1]:
            if b > ub[n_sp - 1]:
                ub[n_sp - 1] = b
        else:
            ua[n_sp] = a
            ub[n_sp] = b
            n_sp += 1
    # a run still open at the trace's end: RUNNING after the last report stays (`keep_from`)
    keep_from = life1 + 1
    if end[hi - 1] >= open_end and state[hi - 1] == S_RUNNING:
        r = hi - 1
        while r > lo and state[r - 1] == S_RUNNING and end[r - 1] == start[r]:
            r -= 1
        keep_from = max(start[r], ub[n_sp - 1]) if n_sp > 0 else start[r]
    # cuts: the rows' bounds and the spans' edges inside the thread's life, in order: each of
    # the four lists is sorted (rows tile the thread's time, spans are disjoint) unless a row
    # reaches over the next ones; then their one sorted array
    xa, xb, xc, xd = start[lo:hi], end[lo:hi], ua[:n_sp], ub[:n_sp]
    merged = False
    if not (is_sorted(xa) and is_sorted(xb)):
        xa = np.concatenate((start[lo:hi], end[lo:hi], ua[:n_sp], ub[:n_sp]))
        xa.sort()
        xb, xc, xd = xa[:0], xa[:0], xa[:0]
        merged = True
    ia = ib = ic = id_ = 0
    p = lo  # the row the segment lies in: the last starting at or before it
    nonrun_state = -1  # the state of the last row before it that is not RUNNING (-1: none)
    if state[lo] != S_RUNNING:
        nonrun_state = state[lo]
    sp = -1  # the last span starting at or before the segment
    prev = -1
    have = False
    while True:
        w, c = _next_cut(xa, xb, xc, xd, ia, ib, ic, id_)
        if w < 0:
            break
        if w == 0:
            ia += 1
        elif w == 1:
            ib += 1
        elif w == 2:
            ic += 1
        else:
            id_ += 1
        if c < life0 or c > life1 or (have and c == prev):
            continue
        if have:
            a = prev
            while p + 1 < hi and start[p + 1] <= a:
                p += 1
                if state[p] != S_RUNNING:
                    nonrun_state = state[p]
            if release > 0 and p - done >= release:  # rows before p, lo + ia and lo + ib are read no more
                done = _cut_given_back(start, end, state, repaired, cpu, addr, waker, done,
                                       p if merged else min(p, lo + ia, lo + ib))
            while sp + 1 < n_sp and ua[sp + 1] <= a:
                sp += 1
            running = state[p] == S_RUNNING
            covered = sp >= 0 and a < ub[sp]
            if running and not covered and a >= keep_from:
                covered = True
                sums[3, j] += c - a
            if covered != running:  # changed: no CPU, address or waker; repaired
                if covered:  # add
                    new_state = S_RUNNING
                    sums[0, j] += c - a
                else:  # drop
                    new_state = nonrun_state if nonrun_state >= 0 else S_UNKNOWN
                    sums[1, j] += c - a
                if not covered and not repaired[p] and cpu[p] >= 0 and c - a >= steal_min:  # stolen?
                    m = emit_row(out, m, th_tid[j], a, c, new_state, cpu[p], 0, _ASK, True)
                else:
                    m = put_row(out, m, th_tid[j], a, c, new_state, -1, 0, -1, True)
            else:
                m = put_row(out, m, th_tid[j], a, c, state[p], cpu[p], addr[p], waker[p], repaired[p])
        prev = c
        have = True
    if release > 0:
        _cut_given_back(start, end, state, repaired, cpu, addr, waker, done, hi)
    return m


@numba.njit(cache=True)
def _cut_compact(out, off, m_end, release):
    """The threads' rows of `_cut_threads` moved together (each thread wrote from off[j] + 1 to
    m_end[j]); how many there are. With `release` > 0, a thread's rows are given back as they are
    moved (those past where its rows end up) and the rows past the last one afterwards: the moved
    rows fill pages of a thread before it that its rows did not need, and would otherwise add to
    the pages they were written in (+84 MB at 10^7 events)."""
    w = 0
    for j in range(off.shape[0] - 1):
        a = off[j] + 1
        n = m_end[j] - a
        if w != a:
            done = max(a, w + n)  # rows from here on are not written again
            for i in range(n):  # forward: w < a, so a row is read before it can be overwritten
                emit_row(out, w + i, out[0][a + i], out[1][a + i], out[2][a + i], out[3][a + i], out[4][a + i],
                         out[5][a + i], out[6][a + i], out[7][a + i])
                if release > 0 and a + i + 1 - done >= release:
                    _give_back_rows(out, done, a + i + 1, True)
                    done = a + i + 1
        w += n
    if release > 0:
        _give_back_rows(out, w, out[0].shape[0], True)
    return w


@numba.njit(cache=True)
def _cut_given_back(start, end, state, repaired, cpu, addr, waker, lo, hi):
    """`give_back_within` rows lo..hi of `_cut_thread`'s input columns; hi (from where the next call
    starts)."""
    if hi > lo:
        give_back_within(start, lo, hi)
        give_back_within(end, lo, hi)
        give_back_within(state, lo, hi)
        give_back_within(repaired, lo, hi)
        give_back_within(cpu, lo, hi)
        give_back_within(addr, lo, hi)
        give_back_within(waker, lo, hi)
        lo = hi
    return lo


@numba.njit(cache=True)
def _asked(rows, m):
    """The rows `_reconcile_cut` left to ask about (waker `_ASK`)."""
    n = 0
    for i in range(m):
        n += rows[6][i] == _ASK
    out = np.empty(n, np.int64)
    n = 0
    for i in range(m):
        if rows[6][i] == _ASK:
            out[n] = i
            n += 1
    return out


def reconcile_runnable(states: StateTable, run_delay: RawEvents,
                       piece_rows: int | None = None, release: bool = False) -> tuple[StateTable, dict]:
    """Size every run-queue wait by the kernel's own run delay (eBPF traces).

    The eBPF collector reads, at each switch-out of a task, its cumulative run delay and its
    number of arrivals on a CPU (`sched_info.run_delay`, `pcount`: schedstat's second and third
    figures). Between two switch-outs with one arrival the difference is exactly the wait that
    ended at the switch-in between them, on the scheduler's own clock. The trace's tracepoint
    instants differ from that clock by the switch's own work (2-5 µs per switch out of idle,
    which has no runtime report to anchor it), which over a producer/consumer's ~1 200 waits put
    +1.2 to +2.8 ms into a thread's RUNNABLE. So the off-CPU gap [end of the previous run, start
    of this run] is re-cut: its last `delta` ns are RUNNABLE, and the RUNNABLE before that takes
    the gap's blocked state (the wait it came out of). A gap with no blocked state (a preemption)
    stays RUNNABLE: the kernel queues a preempted task from its switch-out, so a smaller figure
    there is the two clocks' offset. A gap shorter than `delta` is RUNNABLE whole and the excess
    is counted. The run after such a gap, up to the next report, is one the thread never left, so a
    RUNNABLE inside it (time no runtime report charged: steal, interrupts) becomes UNKNOWN. Spans
    with more than one arrival (a switch-in no tracepoint reported) are left as they are.

    Returns the new table and, per tid, [ns made RUNNABLE, ns made not RUNNABLE, ns unplaced].
    Each thread is re-cut `piece_rows` rows at a time (default `RECONCILE_PIECE_ROWS`): memory
    follows a piece, not the thread, besides the table and the one returned. With `release` (for a
    caller that drops `states` afterwards), the pages of `states` are given back as its rows are
    copied, so that the table and its copy are not both whole at once.
    """
    if len(run_delay) == 0 or len(states) == 0:
        return states, {}
    piece_rows = RECONCILE_PIECE_ROWS if piece_rows is None else piece_rows
    RUN = int(State.RUNNING)
    changed: dict[str, list[int]] = {}
    reports = _ReportsByThread(run_delay)
    plan, pairs = [], 0  # per thread: its rows and its reports' range (a gap needs two reports)
    bounds = np.flatnonzero(np.r_[True, states.tid[1:] != states.tid[:-1], True])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        a, b = reports.of(int(states.tid[lo]))
        plan.append((lo, hi, a, b))
        pairs += max(b - a - 1, 0)
    # a cut adds a row at most, and each gap is a pair of successive reports: rows never written are
    # never touched, so sizing by pairs costs address space only
    out = {k: np.empty(len(states) + pairs, v.dtype) for k, v in states.columns().items()}
    m, given = 0, 0

    def read_up_to(row):  # rows of `states` before `row` are read no more
        nonlocal given
        if release and row - given >= RELEASE_EVERY:
            for v in states.columns().values():
                give_back(v, given, row)
            given = row
    for lo, hi, a, b in plan:
        tid = int(states.tid[lo])
        skip, born, unmade, unplaced = _first_wait(_rows_view(states, lo, hi), reports, a, b)
        first_row, lo = m, lo + skip
        th = _rows_view(states, lo, hi)
        run = np.flatnonzero(th.state == RUN) if b - a >= 2 else np.zeros(0, np.int64)
        made = 0
        if len(run) == 0:
            for k, v in states.columns().items():
                out[k][m:m + hi - lo] = v[lo:hi]
            m += hi - lo
            read_up_to(hi)
        else:
            runs = (th, run, th.start_ns[run])
            t, d, p = reports.time[a:b], reports.delay[a:b], reports.count[a:b]
            for p_lo, p_hi in _pieces(th, piece_rows):
                # a piece's gaps start within its rows (`_pieces`: none spans two pieces); it reads its own
                # rows and the RUNNING row after it (where its last gap's run begins)
                lo_ns, hi_ns = int(th.start_ns[p_lo]), int(th.end_ns[p_hi - 1])
                gaps = _run_delay_gaps(runs, t, d, p, lo_ns, hi_ns)
                current = _current_runs(runs, t, p, lo_ns, hi_ns)
                m, piece_made, piece_unmade = _recut_piece(th, p_lo, p_hi, gaps, current, runs, tid, out, m)
                made, unmade, unplaced = made + piece_made, unmade + piece_unmade, unplaced + gaps[3]
                read_up_to(lo + p_hi)
        if born is not None:  # (the first row is never re-cut: a gap begins at the end of a run)
            out["start_ns"][first_row] = born
        if made or unmade or unplaced:
            changed[str(tid)] = [made, unmade, unplaced]
    return StateTable(**{k: v[:m] for k, v in out.items()}), changed


def _first_wait(th: StateTable, reports: _ReportsByThread, a: int, b: int) -> tuple[int, int | None, int, int]:
    """A thread born in the trace has run delay 0 after 0 arrivals, so its first report, if it
    counts one arrival, sizes the wait from its wakeup to its first run. That wait is where its life
    begins: a longer RUNNABLE start (the kernel queued it later on its clock, as when the CPU it was
    queued on was idle) is cut off. Returns the leading rows to drop, the new start of the first row
    kept (None: unchanged), the ns cut off and the ns of wait that did not fit."""
    if b <= a or not len(th) or th.state[0] != State.RUNNABLE or reports.count[a] != 1:
        return 0, None, 0, 0
    # the first row not RUNNABLE, begun by the first switch-out, begins the first run (RUNNING, or
    # a stretch of it judged stolen)
    other = th.state[:int(np.searchsorted(th.start_ns, reports.time[a], "right"))] != State.RUNNABLE
    r0 = int(np.argmax(other)) if other.any() else -1
    if r0 < 0 or th.state[r0] not in (State.RUNNING, State.UNKNOWN):
        return 0, None, 0, 0
    first_in, delay = int(th.start_ns[r0]), int(reports.delay[a])
    wait = first_in - int(th.start_ns[0])
    if delay >= wait:
        return 0, None, 0, delay - wait
    cut = first_in - delay
    skip = int(np.searchsorted(th.end_ns[:r0], cut, "right"))  # rows wholly before the cut
    return skip, cut, wait - delay, 0


class _ReportsByThread:
    """Run-delay reports grouped by thread, each thread's in time order: views of the reports when
    they come so (the eBPF collector's, read back a batch of threads at a time), else a sorted copy."""

    def __init__(self, run_delay: RawEvents):
        tid, t, d, p = run_delay.arg0, run_delay.time, run_delay.arg1, run_delay.arg2
        first = _run_firsts(tid)
        keys = tid[first]
        rising = t[1:] >= t[:-1]
        rising[first[1:] - 1] = True  # (a thread's first report may be earlier than the one before it)
        if not (rising.all() and len(np.unique(keys)) == len(keys)):  # not each thread's in one run, in time order
            order = np.lexsort((t, tid))
            tid, t, d, p = tid[order], t[order], d[order], p[order]
            first = _run_firsts(tid)
            keys = tid[first]
        del rising
        self.time, self.delay, self.count = t, d, p
        order = np.argsort(keys, kind="stable")
        self.keys, self.lo, self.hi = keys[order], first[order], np.r_[first[1:], len(tid)][order]

    def of(self, tid: int) -> tuple[int, int]:
        """The range of the thread's reports ((0, 0) if none)."""
        k = int(np.searchsorted(self.keys, tid))
        if k == len(self.keys) or self.keys[k] != tid:
            return 0, 0
        return int(self.lo[k]), int(self.hi[k])


def _run_firsts(x: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins."""
    return np.flatnonzero(np.r_[True, x[1:] != x[:-1]]) if len(x) else np.zeros(0, np.int64)


RECONCILE_PIECE_ROWS = 1 << 18  # rows of one thread re-cut at a time by `reconcile_runnable` (~250 B each)


def _rows_view(states: StateTable, lo: int, hi: int) -> StateTable:
    return StateTable(**{k: v[lo:hi] for k, v in states.columns().items()})


def _run_delay_gaps(runs, t: np.ndarray, d: np.ndarray, p: np.ndarray, lo_ns: int, hi_ns: int):
    """The gaps the kernel sized (from the end of a run to the start of the next, with one arrival
    between its two reports) that start in [lo_ns, hi_ns), of one thread with RUNNING rows `runs`
    (the thread, their rows, their starts) and reports t, d, p in time order: their starts, ends,
    where their wait begins, and the ns of wait that did not fit (int). Reads only the reports of
    those gaps."""
    th, run, rs = runs
    # a gap starts at the end e of the RUNNING row its first report ends (the last starting before it),
    # so e >= lo_ns for reports after the start of the first RUNNING row ending at lo_ns or later, and
    # e < hi_ns for reports up to the start of the first ending at hi_ns or later (a thread's rows
    # follow each other: their ends are in order)
    j_lo, j_hi = np.searchsorted(run, np.searchsorted(th.end_ns, [lo_ns, hi_ns], "left"), "left")
    k_lo = int(np.searchsorted(t, rs[j_lo], "right")) if j_lo < len(rs) else len(t)
    k_hi = int(np.searchsorted(t, rs[j_hi], "right")) if j_hi < len(rs) else len(t)
    t, d, p = t[k_lo:k_hi + 1], d[k_lo:k_hi + 1], p[k_lo:k_hi + 1]  # (and the report that ends each gap)
    ie, e, s_in, one = _report_pairs(runs, t, p)
    delta = np.diff(d)
    ok = one & (ie[:-1] >= 0) & (s_in >= e[:-1]) & (delta >= 0) & (e[:-1] >= lo_ns) & (e[:-1] < hi_ns)
    ga, gb, dl = e[:-1][ok], s_in[ok], delta[ok]
    w = np.maximum(gb - dl, ga)
    return ga, gb, w, int(np.maximum(dl - (gb - ga), 0).sum())


def _current_runs(runs, t: np.ndarray, p: np.ndarray, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """[start, end] of each run ended by a report one arrival after the report before it, that
    overlaps [lo_ns, hi_ns): the thread stayed on its CPU from that switch-in to that switch-out,
    so nothing inside is a run-queue wait (a RUNNABLE there is time no runtime report charged:
    steal or interrupts)."""
    k_lo = max(int(np.searchsorted(t, lo_ns, "right")) - 1, 0)  # the switch-out before the piece
    k_hi = int(np.searchsorted(t, hi_ns, "right"))  # and the first after it
    _, e, a, one = _report_pairs(runs, t[k_lo:k_hi + 1], p[k_lo:k_hi + 1])
    b = e[1:]
    ok = one & (b > lo_ns) & (a < hi_ns)
    return a[ok], b[ok]


def _report_pairs(runs, t: np.ndarray, p: np.ndarray):
    """Of a thread's successive switch-out reports (times t, arrival counts p): the RUNNING row each
    ends (-1: none) and its end, the start of the run after each report but the last, and whether
    each pair counts one arrival with that run ending at the second report. The run's first RUNNING
    row is found from the switch-out, not from the row it ends: a streamed piece may not hold the
    run before it (no RUNNING row starts between the two, so both give the same row)."""
    th, run, rs = runs
    ie = np.searchsorted(rs, t, "left") - 1
    e = th.end_ns[run[np.maximum(ie, 0)]]
    isx = np.searchsorted(rs, t[:-1], "left")
    one = (ie[1:] >= 0) & (np.diff(p) == 1) & (isx <= ie[1:])
    return ie, e, rs[np.minimum(isx, len(rs) - 1)], one


def run_starts(th: StateTable) -> np.ndarray:
    """The rows (after the first) of one thread that begin a RUNNING row where the row before ends:
    no run-delay gap spans one (`_run_delay_gaps`: a gap ends at the first RUNNING row after it)."""
    return np.flatnonzero((th.state[1:] == State.RUNNING) & (th.start_ns[1:] == th.end_ns[:-1])) + 1


def _pieces(th: StateTable, rows: int) -> list[tuple[int, int]]:
    """The thread's rows in ranges of about `rows`, each starting at a RUNNING row that starts where
    the row before it ends: no gap `_run_delay_gaps` finds spans two ranges (a gap ends at the start
    of the first RUNNING row after it), so each range is re-cut alone."""
    starts = run_starts(th)
    out, lo = [], 0
    while True:
        k = int(np.searchsorted(starts, lo + max(rows, 1), "left"))
        if k == len(starts):
            out.append((lo, len(th)))
            return out
        out.append((lo, int(starts[k])))
        lo = int(starts[k])


def _recut_piece(th: StateTable, lo: int, hi: int, gaps, current, runs, tid: int, out: dict,
                 m: int) -> tuple[int, int, int]:
    """Rows lo..hi of one thread re-cut at the waits of its gaps (those starting in them), their
    RUNNABLE inside the runs `current` made UNKNOWN, written to `out` from row m: (the next row, ns
    made RUNNABLE, ns made not RUNNABLE)."""
    RUN, RQ = int(State.RUNNING), int(State.RUNNABLE)
    ga, gb, w, _ = gaps
    _, run, rs = runs
    piece = _rows_view(th, lo, hi)
    seg_a, seg_b, row = _cut(piece, w)
    old = piece.state[row].astype(np.int64)
    g = np.searchsorted(ga, seg_a, side="right") - 1
    gi = np.maximum(g, 0)
    in_gap = (g >= 0) & (seg_a >= ga[gi]) & (seg_b <= gb[gi]) if len(ga) else np.zeros(len(seg_a), bool)
    late = in_gap & (seg_a >= w[gi]) if len(ga) else in_gap  # the kernel's wait
    early = in_gap & ~late
    # each gap's blocked state: its first row neither RUNNABLE nor RUNNING (none: RUNNABLE)
    blocked = in_gap & (old != RQ) & (old != RUN)
    fb_state = np.full(max(len(ga), 1), RQ, np.int64)
    fb_addr = np.zeros(max(len(ga), 1), np.uint64)
    gb_idx, first = np.unique(g[blocked], return_index=True)
    seg_blocked = np.flatnonzero(blocked)
    fb_state[gb_idx] = old[seg_blocked[first]]
    fb_addr[gb_idx] = piece.addr[row[seg_blocked[first]]]
    # the waker belongs to the end of the blocked stretch: its last early segment
    gap_waker = np.full(max(len(ga), 1), -1, np.int64)
    rev_g, rev_first = np.unique(g[blocked][::-1], return_index=True)
    gap_waker[rev_g] = piece.waker[row[seg_blocked[::-1][rev_first]]]
    state = np.where(late, RQ, np.where(early & (old == RQ), fb_state[gi], old))
    ca, cb = current  # RUNNABLE inside a run the thread never left: uncharged time while current
    c = np.searchsorted(ca, seg_a, side="right") - 1
    ci = np.maximum(c, 0)
    uncharged = ((c >= 0) & (seg_a >= ca[ci]) & (seg_b <= cb[ci]) & (old == RQ)) if len(ca) else np.zeros(len(seg_a), bool)
    state = np.where(uncharged, int(State.UNKNOWN), state)
    next_run_cpu = th.cpu[run[np.minimum(np.searchsorted(rs, seg_b, "left"), len(run) - 1)]]
    mod = (in_gap | uncharged) & (state != old)
    n = len(seg_a)
    out["tid"][m:m + n] = tid
    out["start_ns"][m:m + n] = seg_a
    out["end_ns"][m:m + n] = seg_b
    out["state"][m:m + n] = state
    out["cpu"][m:m + n] = np.where(late & mod, next_run_cpu, np.where(mod, -1, piece.cpu[row]))
    out["addr"][m:m + n] = np.where(early & mod, fb_addr[gi], np.where(mod, 0, piece.addr[row])).astype(np.uint64)
    last_early = early & ~np.r_[early[1:] & (g[1:] == g[:-1]), False]
    out["waker"][m:m + n] = np.where(last_early, gap_waker[gi], np.where(in_gap, -1, piece.waker[row]))
    out["repaired"][m:m + n] = piece.repaired[row]
    dur = seg_b - seg_a
    return m + n, int(dur[mod & late].sum()), int(dur[mod & (early | uncharged)].sum())


def _merge_adjacent(s: StateTable, release: bool = False) -> StateTable:
    """Join consecutive rows of one thread that differ only in where a dropped event split them.
    Compiled: one pass counts the joins, one writes the joined rows (none: `s` itself). With
    `release` (for a caller that drops `s` afterwards), the pages of `s` are given back as they are
    read."""
    if len(s) < 2:
        return s
    addr = s.addr.view(np.int64)
    n_out = _merged_count(s.tid, s.start_ns, s.end_ns, s.state, s.cpu, addr, s.waker, s.repaired)
    if n_out == len(s):
        return s
    return state_table(_merged_rows(s.tid, s.start_ns, s.end_ns, s.state, s.cpu, addr, s.waker, s.repaired, n_out,
                                    RELEASE_EVERY if release else 0))


@numba.njit(cache=True, inline="always")
def _continues(i, tid, start, end, state, cpu, addr, waker, repaired):
    """Row i continues row i - 1: same thread and state, no waker between them (branch-free)."""
    return ((tid[i] == tid[i - 1]) & (state[i] == state[i - 1]) & (cpu[i] == cpu[i - 1]) & (addr[i] == addr[i - 1])
            & (repaired[i] == repaired[i - 1]) & (waker[i - 1] == -1) & (start[i] == end[i - 1]))


@numba.njit(cache=True)
def _merged_count(tid, start, end, state, cpu, addr, waker, repaired):
    n = 1
    for i in range(1, tid.shape[0]):
        n += 1 - _continues(i, tid, start, end, state, cpu, addr, waker, repaired)
    return n


def first_run_apart(s: StateTable) -> int:
    """The first of `run_starts` that `_merge_adjacent` would not join to the row before (the last
    row if none): rows from there on are re-cut and joined alone, whatever comes before them."""
    return _first_run_apart(s.tid, s.start_ns, s.end_ns, s.state, s.cpu, s.addr.view(np.int64), s.waker, s.repaired,
                            int(State.RUNNING))


@numba.njit(cache=True)
def _first_run_apart(tid, start, end, state, cpu, addr, waker, repaired, s_running):
    for i in range(1, tid.shape[0]):
        if (state[i] == s_running and start[i] == end[i - 1]
                and not _continues(i, tid, start, end, state, cpu, addr, waker, repaired)):
            return i
    return tid.shape[0] - 1


@numba.njit(cache=True)
def _merged_rows(tid, start, end, state, cpu, addr, waker, repaired, n_out, release):
    """Each run of joined rows as its first row, with the last one's end and waker (`put_row`); the
    source's pages given back every `release` rows read (0: never)."""
    out = new_rows(n_out)
    m = 0
    n = tid.shape[0]
    done = 0
    for i in range(n):
        m = put_row(out, m, tid[i], start[i], end[i], state[i], cpu[i], addr[i], waker[i], repaired[i])
        if release > 0 and i + 1 - done >= release:
            _give_back_rows((tid, start, end, state, cpu, addr, waker, repaired), done, i + 1, False)
            done = i + 1
    return out


def list_processes(events: RawEvents) -> list[dict]:
    """The processes in a system-wide recording: pid, latest name, threads seen, events, for
    choosing what to import."""
    known = (events.pid > 0) & (events.tid > 0)
    if not np.any(known):
        return []
    pids, tids = events.pid[known], events.tid[known]
    out = []
    names = {}
    sw = np.flatnonzero((events.kind == Kind.SWITCH) & known)
    for i in sw[::-1]:  # latest name of each thread group leader
        if events.arg0[i] == events.pid[i] and int(events.pid[i]) not in names:
            names[int(events.pid[i])] = events.comm(events.comm0[i])
    for pid in np.unique(pids):
        mine = pids == pid
        out.append({"pid": int(pid), "name": names.get(int(pid), ""), "threads": int(len(np.unique(tids[mine]))),
                    "events": int(mine.sum())})
    return sorted(out, key=lambda r: -r["events"])


def _thread_names(events: RawEvents, tids: np.ndarray, end_of: dict[int, int],
                  index: EventIndex | None = None) -> NameTable:
    """Name history of each traced thread, from every event that states a task's comm. One
    compiled pass over the naming events keeps each thread's changes of name (`_name_changes`);
    statements at one instant keep the order of the kinds below, as the sort by (tid, time) of
    their concatenation kept it."""
    index = index if index is not None else EventIndex(events.sorted())
    events = index.events
    tids = np.asarray(tids, np.int64)
    if len(tids) == 0 or int(tids.min()) < 0:
        return _thread_names_sorted(events, tids)
    slot_of = np.full(int(tids.max()) + 1, -1, np.int32)  # int32 as the walk's: one compiled name scan
    slot_of[tids] = np.arange(len(tids))
    slot, t, c = _name_changes(events.time, events.kind, events.arg0, events.arg1, events.comm0, events.comm1,
                               naming_kinds(), slot_of)
    return NameTable(tid=tids[slot], time_ns=t, name=[events.comms[i] for i in c])


def naming_kinds() -> np.ndarray:
    """The kinds of event that state a task's comm (`_name_statement`), as a table by kind."""
    naming = np.zeros(256, np.bool_)
    naming[[Kind.SWITCH, Kind.FORK, Kind.RENAME, Kind.TASK_COMM, Kind.WAKEUP, Kind.WAKEUP_NEW, Kind.STAT_RUNTIME,
            Kind.MIGRATE]] = True
    return naming


def _thread_names_sorted(events: RawEvents, tids: np.ndarray) -> NameTable:
    """`_thread_names` by masks and one sort, for thread ids no table can index."""
    k = events.kind
    parts_tid, parts_t, parts_c = [], [], []
    for mask, who, which in (
        (k == Kind.SWITCH, events.arg0, events.comm0),
        (k == Kind.SWITCH, events.arg1, events.comm1),
        (k == Kind.FORK, events.arg1, events.comm0),
        (k == Kind.RENAME, events.arg0, events.comm0),
        (k == Kind.TASK_COMM, events.arg0, events.comm0),
        ((k == Kind.WAKEUP) | (k == Kind.WAKEUP_NEW) | (k == Kind.STAT_RUNTIME) | (k == Kind.MIGRATE), events.arg0,
         events.comm0),
    ):
        parts_tid.append(who[mask])
        parts_t.append(events.time[mask])
        parts_c.append(which[mask])
    tid = np.concatenate(parts_tid)
    t = np.concatenate(parts_t)
    c = np.concatenate(parts_c)
    keep = member(tid, tids) & (c >= 0)
    tid, t, c = tid[keep], t[keep], c[keep]
    order = np.lexsort((t, tid))
    tid, t, c = tid[order], t[order], c[order]
    change = np.r_[True, (tid[1:] != tid[:-1]) | (c[1:] != c[:-1])] if len(tid) else np.zeros(0, bool)
    names = [events.comms[i] for i in c[change]]
    return NameTable(tid=tid[change], time_ns=t[change], name=names)


@numba.njit(cache=True, inline="always")
def _name_statement(kind, arg0, arg1, comm0, comm1, r, second):
    """The task and comm an event names (its `second` statement: a switch names prev, then next),
    and the rank of that statement's kind; rank -1 when there is none."""
    k = kind[r]
    if k == K_SWITCH:
        if second:
            return arg1[r], comm1[r], 1
        return arg0[r], comm0[r], 0
    if second:
        return -1, -1, -1
    if k == K_FORK:
        return arg1[r], comm0[r], 2
    if k == K_RENAME:
        return arg0[r], comm0[r], 3
    if k == K_TASK_COMM:
        return arg0[r], comm0[r], 4
    return arg0[r], comm0[r], 5


def _name_changes(time, kind, arg0, arg1, comm0, comm1, naming, slot_of):
    """Per thread slot, in time order (ties by the statement's kind rank, then event order), the
    statements whose comm differs from the thread's previous one: (slot, time, comm index). One
    pass over the events of the kinds `naming` marks (`_name_scan`); the statements of one instant
    are held until the time moves on. No list of the events or of every statement (+0.8 GB on
    10^8 events: nearly all name a traced thread); the changes, few, are bucketed by slot at the end.
    The same as `_names_start`, `_names_chunk` over consecutive pieces of the events, `_names_end`."""
    carry = _names_start(slot_of)
    carry = _names_chunk(time, kind, arg0, arg1, comm0, comm1, naming, slot_of, carry)
    return _names_end(carry)


@numba.njit(cache=True)
def _names_start(slot_of):
    """`_names_chunk`'s state before the first event: the comm of each thread's previous statement
    (-1: none yet), the open instant's statements (slot, comm, rank), the changes so far (slot,
    time, comm; few), and [statements held, their instant, changes]."""
    n_slots = 0
    for v in slot_of:
        if v + 1 > n_slots:
            n_slots = v + 1
    last_c = np.full(n_slots, -1, np.int64)
    held = np.empty((64, 3), np.int64)
    out = np.empty((1024, 3), np.int64)
    return last_c, held, out, np.zeros(3, np.int64)


@numba.njit(cache=True, nogil=True)
def _names_chunk(time, kind, arg0, arg1, comm0, comm1, naming, slot_of, carry):
    """The next time-sorted events from `carry`: the carry after them. The last instant's
    statements stay held (the next piece may go on at that instant); a buffer that grows is
    replaced, so the caller takes the carry returned."""
    last_c, held, out, st = carry
    n_map = slot_of.shape[0]
    r, q, q_t, m = np.int64(0), st[0], st[1], st[2]  # (a literal 0 would compile the scan twice)
    while True:
        r, q, q_t, m = _name_scan(time, kind, arg0, arg1, comm0, comm1, naming, slot_of, n_map, last_c, held, out, r,
                                  q, q_t, m)
        if r > kind.shape[0]:
            break
        # stopped for room: the buffers grow outside the loop (a replaced array slows it 2x)
        if q + 2 > held.shape[0]:
            held = _grown(held, q, 2 * held.shape[0])
        if m + q > out.shape[0]:
            out = _grown(out, m, 2 * (m + q))
    st[0], st[1], st[2] = q, q_t, m
    return last_c, held, out, st


@numba.njit(cache=True, nogil=True)
def _names_end(carry):
    """The last instant's statements settled, the changes bucketed by slot, each thread's in the
    order found (a stable counting sort): (slot, time, comm index)."""
    last_c, held, out, st = carry
    q, q_t, m = st[0], st[1], st[2]
    if m + q > out.shape[0]:
        out = _grown(out, m, m + q)
    m = _name_instant(last_c, held, out, q, q_t, m)
    n_slots = last_c.shape[0]
    off = np.zeros(n_slots + 1, np.int64)
    for a in range(m):
        off[out[a, 0] + 1] += 1
    for k in range(n_slots):
        off[k + 1] += off[k]
    o_slot = np.empty(m, np.int32)
    o_t = np.empty(m, np.int64)
    o_c = np.empty(m, np.int32)
    fill = off[:-1].copy()
    for a in range(m):
        j = fill[out[a, 0]]
        fill[out[a, 0]] += 1
        o_slot[j] = out[a, 0]
        o_t[j] = out[a, 1]
        o_c[j] = out[a, 2]
    return o_slot, o_t, o_c


@numba.njit(cache=True, inline="always")
def _name_instant(last_c, held, out, q, q_t, m):
    """The q statements `held` at instant q_t, in (slot, rank) order, written to `out` from m on
    where they change their thread's comm (room for q): the next position."""
    for a in range(1, q):  # a stable insertion sort (a few statements)
        s_, c_, k_ = held[a, 0], held[a, 1], held[a, 2]
        b = a - 1
        while b >= 0 and (held[b, 0] > s_ or (held[b, 0] == s_ and held[b, 2] > k_)):
            held[b + 1, 0] = held[b, 0]
            held[b + 1, 1] = held[b, 1]
            held[b + 1, 2] = held[b, 2]
            b -= 1
        held[b + 1, 0] = s_
        held[b + 1, 1] = c_
        held[b + 1, 2] = k_
    for a in range(q):
        s_ = held[a, 0]
        if held[a, 1] != last_c[s_]:
            out[m, 0] = s_
            out[m, 1] = q_t
            out[m, 2] = held[a, 1]
            m += 1
            last_c[s_] = held[a, 1]
    return m


@numba.njit(cache=True)
def _name_scan(time, kind, arg0, arg1, comm0, comm1, naming, slot_of, n_map, last_c, held, out, r, q, q_t, m):
    """`_names_chunk` from event r, `held` holding q statements of the instant q_t and `out` m
    changes, until the events end (then r = n + 1; the instant still held) or a buffer has no room
    for the next step (then r is the event to go on from): (r, q, q_t, m)."""
    n = kind.shape[0]
    while r < n:
        if not naming[kind[r]]:
            r += 1
            continue
        if q > 0 and time[r] != q_t:  # the instant is over: its statements in (slot, rank) order
            if m + q > out.shape[0]:
                break
            m = _name_instant(last_c, held, out, q, q_t, m)
            q = 0
        if q + 2 > held.shape[0]:
            break
        for second in (False, True):
            who, c, rank = _name_statement(kind, arg0, arg1, comm0, comm1, r, second)
            if rank >= 0 and c >= 0 and 0 <= who < n_map and slot_of[who] >= 0:
                held[q, 0] = slot_of[who]
                held[q, 1] = c
                held[q, 2] = rank
                q_t = time[r]
                q += 1
        r += 1
    if r == n:
        r += 1
    return r, q, q_t, m


@numba.njit(cache=True)
def _grown(a, m, n):
    """The first m rows of `a` (a table of 3 columns) in room for n."""
    out = np.empty((n, 3), a.dtype)
    out[:m] = a[:m]
    return out


def build_trace(
    events: RawEvents,
    *,
    root_pids: list[int] | None = None,
    comm: str | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    meta: dict | None = None,
    role_rules=None,
    root_known: bool = False,
    known_names: dict[int, str] | None = None,
) -> Trace:
    """Per-thread states of the process tree(s) chosen by `root_pids` or `comm`.

    Parameters
    ----------
    events : RawEvents
        From any tokenizer; sorted here if needed.
    root_pids : list of int, optional
        Process ids whose trees are traced (threads and child processes).
    comm : str, optional
        Alternatively, trace every process with this name.
    start_ns, end_ns : int, optional
        Window of the trace; default from the first to the last event. Intervals are clipped;
        threads alive at the last event stay in their state until `end_ns` when it is later.
    meta : dict, optional
        Facts about the run (command, cores, ...) merged into the Trace metadata.
    role_rules : RoleRules or str, optional
        Thread-role rules; defaults to the built-in presets.
    known_names : dict, optional
        tid -> name observed outside the events (e.g. /proc at attach time), used for threads
        no event names.
    root_known : bool
        The root processes' first threads are known to start at `start_ns` (the recorder
        starts the trace at the command's exec), rather than having existed before.
    """
    events = events.sorted()
    meta = dict(meta or {})
    run_delay = RawEvents.empty()
    index = EventIndex(events)
    if index.count(Kind.RUN_DELAY):  # the kernel's own run-queue account (eBPF), not a state change
        run_delay, events = events.take(index.rows(Kind.RUN_DELAY)), events.take(np.flatnonzero(events.kind != Kind.RUN_DELAY))
        index = EventIndex(events)
    if len(events) == 0:
        raise UserError("the recording holds no events; was the program too short, or were the tracepoints missing?")
    if int(events.cpu.max()) >= MAX_CPUS:
        wild = np.flatnonzero(events.cpu >= MAX_CPUS)
        raise UserError(f"event {int(wild[0])} (at {int(events.time[wild[0]])} ns) names CPU {int(events.cpu[wild[0]])}, "
                        f"beyond the {MAX_CPUS} any Linux machine has: the recording is corrupt")
    facts = EventFacts(comm).add(events)
    tids, parents, slot_of, born_at = traced_slots(facts, root_pids, comm)
    n_cpus = int(max(events.cpu.max(initial=0) + 1, 1))
    win_start = int(events.time[0]) - 1 if start_ns is None else int(start_ns)
    rows, tail, carry = _walk_parts(events.time, events.cpu, events.tid, events.kind, events.arg0, events.arg1, events.arg2,
                                    slot_of, born_at, len(tids), n_cpus, _WAIT_OPS_MASK, win_start, end_ns)
    dead, end_time = carry[11], carry[12]
    t_first, t_last = int(events.time[0]), int(events.time[-1])
    t0 = t_first if start_ns is None else int(start_ns)
    t1 = t_last if end_ns is None else int(end_ns)
    if end_ns is None and np.all(dead):
        t1 = int(end_time.max())
    if t1 <= t0:
        raise UserError("the chosen time window is empty")
    aside = Aside(tids, {"names": lambda present: _thread_names(events, present, {}, index),
                         "spans": lambda present: switch_spans(events, present, t0, t1) if index.count(Kind.SWITCH) else None})
    # clipped to the window, in thread then time order
    *cols, in_order = _walk_states(rows, tail, t0, t1, tids, RELEASE_EVERY)  # gives the rows back as it copies them
    del rows, tail
    if not in_order:
        order = np.lexsort((cols[1], cols[0]))
        cols = [c[order] for c in cols]
    states = state_table(cols)
    del cols  # each pass below holds one table besides its output, not this one too
    # reconcile_running, giving the walk's table back as it goes
    cut = _reconcile_rows(states, index, release=RELEASE_EVERY, open_end=t1)
    room = None  # the reconciled table's columns with their room to spare: the futex split is written over them
    if cut is None:
        states, reconciled, stolen, unreported = _merge_adjacent(states), {}, {}, {}
    else:
        del states
        states, reconciled, stolen, unreported, room = _reconcile_steals(cut, index)
        del cut
    pids = _thread_pids(events, tids, slot_of, index)
    # joined as they are split where no run-delay pass comes between (the join below then finds none)
    states, futex_wakers, runnable_from_wakes = attribute_futex_wakers(states, events, tids, pids, index,
                                                                       join=len(run_delay) == 0, room=room)
    del room
    states, runnable_reconciled = reconcile_runnable(states, run_delay, release=True)
    states = _merge_adjacent(states, release=True)
    walked = Walked(facts, tids, parents, slot_of, born_at, t0, t1, carry)
    states, exit_wakers_n = walked.with_exit_wakers(states, pids)
    return finish_trace(
        states, walked, pids=pids, reconciled=reconciled, stolen=stolen, unreported=unreported, futex_wakers=futex_wakers,
        exit_wakers=exit_wakers_n,
        runnable_from_wakes=runnable_from_wakes, runnable_reconciled=runnable_reconciled,
        names_of=lambda present: aside.get("names", present), spans_of=lambda present: aside.get("spans", present),
        samples_of=lambda present: _samples(events, present, t0, t1, index),
        stats=events.stats, n_events=len(events), root_pids=root_pids, root_known=root_known, known_names=known_names,
        meta=meta, role_rules=role_rules)


def traced_slots(facts: EventFacts, root_pids, comm) -> tuple[np.ndarray, dict, np.ndarray, np.ndarray]:
    """The traced threads (sorted), their creators, each tid's slot (-1: not traced) and each
    slot's birth (its first FORK; -1: none seen); a user's error if there are none."""
    tids, parents = facts.traced(root_pids, comm)
    if len(tids) == 0:
        raise UserError("none of the chosen process's threads appear in the recording")
    if int(tids.max()) > PID_MAX_LIMIT:
        raise UserError(f"the recording names thread id {int(tids.max())}, beyond Linux's limit of {PID_MAX_LIMIT}: "
                        "it is corrupt")
    slot_of = np.full(int(tids.max()) + 1, -1, np.int32)
    slot_of[tids] = np.arange(len(tids), dtype=np.int32)
    return tids, parents, slot_of, born_times(facts.forks, tids, slot_of)


class Walked:
    """What the walk left for the trace's threads, meta and warnings besides its rows."""

    def __init__(self, facts: EventFacts, tids, parents, slot_of, born_at, t0: int, t1: int, carry):
        self.facts, self.tids, self.parents, self.slot_of, self.born_at = facts, tids, parents, slot_of, born_at
        self.t0, self.t1 = t0, t1
        (_, self.dead, self.end_time, self.gaps, self.gaps_traced, self.missing_wakeups, self.double_running,
         self.uncertain, self.repairs, self.kernel_rt, self.settled) = _walk_result(None, carry)
        self.exiting, self.exit_time = carry[9], carry[10]

    def exits(self, pids: np.ndarray) -> tuple[np.ndarray, ...]:
        """The threads' exits inside the recording, as `exit_wakers.exit_wakers` takes them."""
        return exits(self.tids, pids, self.dead & (self.end_time <= self.t1), self.end_time, self.exiting,
                     self.exit_time, parent_pids(self.tids, pids, self.parents))

    def with_exit_wakers(self, states: StateTable, pids: np.ndarray, ex=None) -> tuple[StateTable, int]:
        """`states` (final rows) with the exiting thread as the waker of each wait an exit ended."""
        tids = self.tids
        return exit_wakers(states, self.exits(pids) if ex is None else ex, lambda t: pids[np.searchsorted(tids, t)])


class Aside:
    """What the finished trace needs of the events and the traced threads alone (their names, their
    switch spans: `work[name](tids)`), done on a second thread while the state passes run, where the
    process may use more than one CPU: the passes release the GIL, so on 2 cores they take no wall
    time of their own. Asked for other threads than `tids` (a window none of some threads' states
    reach), it is done again for those."""

    def __init__(self, tids: np.ndarray, work: dict):
        self.tids, self.work, self.done = np.asarray(tids), work, {}
        self.thread = None
        if len(os.sched_getaffinity(0)) > 1:
            self.thread = threading.Thread(target=self._run, name="scalestack-aside", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        for name, fn in self.work.items():
            try:
                self.done[name] = (fn(self.tids), None)
            except BaseException as exc:  # raised in the caller's thread by `get`
                self.done[name] = (None, exc)

    def get(self, name: str, present: np.ndarray):
        if self.thread is not None:
            self.thread.join()
        if name not in self.done or not np.array_equal(present, self.tids):
            return self.work[name](present)
        value, exc = self.done.pop(name)
        if exc is not None:
            raise exc
        return value


def finish_trace(states: StateTable, walked: Walked, *, names_of, spans_of, samples_of, role_rules, **given) -> Trace:
    """The Trace of the final states: its threads, names, switch spans and samples (`*_of(present)`:
    of the threads with states), warnings and meta (`finish_threads`, which takes `given`). Shared
    by the builder of events in memory and the one of a recording read in windows
    (`trace.streaming`)."""
    present, first_idx = unique_first(states.tid)
    last_idx = np.r_[first_idx[1:] - 1, len(states) - 1] if len(first_idx) else first_idx
    names = names_of(present)
    threads, meta = finish_threads(present, states.start_ns[first_idx], states.end_ns[last_idx],
                                   thread_running(states, walked.tids), walked, names=names, **given)
    spans = spans_of(present)
    span_table = SwitchSpanTable.empty() if spans is None else spans.table()
    meta["switch_spans_rebuilt"] = {} if spans is None else {str(t): k for t, k in spans.gaps().items()}
    del spans  # its int64 tids (the table has its own int32 ones): 8 bytes a span
    trace = Trace(threads=threads, states=states, names=names, meta=meta,
                  samples=samples_of(present), switch_spans=span_table)
    return trace.with_roles(role_rules)


def finish_threads(present: np.ndarray, th_start: np.ndarray, th_end: np.ndarray, running: np.ndarray, walked: Walked,
                   *, names: NameTable, pids, reconciled, stolen, unreported, futex_wakers, exit_wakers, runnable_from_wakes,
                   runnable_reconciled,
                   stats: dict, n_events: int, root_pids, root_known, known_names, meta: dict) -> tuple[ThreadTable, dict]:
    """The thread table and meta of the threads with states (`present`, sorted; each one's first
    start and last end, and `running`: RUNNING ns of each of `walked.tids`), which need not be held
    at once: the states' only part in them."""
    w = walked
    facts, tids, parents, slot_of, born_at, t0, t1 = w.facts, w.tids, w.parents, w.slot_of, w.born_at, w.t0, w.t1
    dead, end_time, gaps, gaps_traced, uncertain, repairs = w.dead, w.end_time, w.gaps, w.gaps_traced, w.uncertain, w.repairs
    kernel_rt = w.kernel_rt
    slots = slot_of[present]
    start_known = (born_at[slots] >= t0) & (born_at[slots] >= 0)
    if root_known:
        start_known |= np.isin(present, [int(p) for p in (root_pids or [])])
    exited = dead[slots] & (end_time[slots] <= t1)
    # latest name per thread (at or before the window end)
    latest = {}
    for t_, n_, tm in zip(names.tid.tolist(), names.name.tolist(), names.time_ns.tolist(), strict=True):
        if tm <= t1 or t_ not in latest:
            latest[t_] = n_
    for t_, n_ in (known_names or {}).items():
        latest.setdefault(int(t_), n_)
    roots = sorted(int(p) for p in (root_pids or []))
    threads = ThreadTable(
        tid=present.astype(np.int32),
        pid=pids[slots].astype(np.int32),
        ppid=np.array([parents.get(int(t), -1) for t in present], dtype=np.int32),
        name=[latest.get(int(t), "") for t in present],
        role=[""] * len(present),
        start_ns=th_start,
        end_ns=th_end,
        start_known=start_known,
        exited=exited,
    )
    warnings = list(meta.get("warnings", []))
    no_groups = facts.no_groups
    if no_groups and not root_known:  # a recorded command's tree is complete by fork lineage alone
        warnings.append(
            "the input does not say which process each thread belongs to (no pid column): threads are followed "
            "from the chosen process through fork only, so threads it had before the recording are missed; "
            "produce the text with `perf script -F comm,pid,tid,cpu,time,event,trace --ns`"
        )
    n_gaps = int(gaps.sum())
    # a thread whose RUNNING came from the kernel's runtime reports is not uncertain by the repairs
    from_kernel = facts.reported_runtime(tids)
    total_unc = int(uncertain[~from_kernel].sum())
    if gaps_traced and total_unc > max(1_000_000, 0.01 * float((th_end - th_start).sum())):
        warnings.append(
            f"the kernel dropped scheduler events of the traced threads ({int(gaps_traced)} gaps); "
            f"{int(repairs.sum())} intervals were repaired, together uncertain by up to {total_unc / 1e6:.1f} ms "
            "(see `scalestack info`; `--collector tracefs` may lose fewer)"
        )
    lost = int(stats.get("lost_events", 0) or 0)
    if lost:
        warnings.append(f"the kernel lost {lost} events (ring buffer full); enlarge it with --mmap-size (perf) or use the ebpf collector")
    # RUNNING a run still open at the end has after its last report is not charged yet: not compared
    open_tail = np.array([unreported.get(str(t), 0) for t in tids.tolist()], np.int64)
    check = runtime_verdict(tids, running - open_tail, kernel_rt, "sched:sched_stat_runtime" in str(meta.get("tracepoints", "")) or
                            facts.count(Kind.STAT_RUNTIME) > 0)
    if check.get("disagreeing"):
        worst = max(check["disagreeing"], key=lambda r: abs(r[3]))
        warnings.append(
            f"{len(check['disagreeing'])} threads' RUNNING time differs from the kernel's own runtime accounting by "
            f"more than 2% (worst: tid {worst[0]}, {worst[1] / 1e6:.2f} ms recorded vs {worst[2] / 1e6:.2f} ms)"
        )
    unc = {str(t): int(u) for t, u, k in zip(tids.tolist(), uncertain.tolist(), from_kernel.tolist(), strict=True)
           if u and not k}
    rep = {str(t): int(r) for t, r in zip(tids.tolist(), repairs.tolist(), strict=True) if r}
    meta.update(
        start_ns=t0,
        end_ns=t1,
        root_tid=roots[0] if roots else int(present[0]) if len(present) else -1,
        lost_events=lost,
        chain_gaps=n_gaps,
        chain_gaps_traced=int(gaps_traced),
        chain_gaps_per_cpu=[int(g) for g in gaps],
        missing_wakeups=int(w.missing_wakeups),
        double_running=int(w.double_running),
        repaired_intervals=rep,
        repairs_settled_by_runtime=int(w.settled),
        running_reconciled_ns=reconciled,
        running_unreported_ns=unreported,
        runnable_reconciled_ns=runnable_reconciled,
        steal_ns=stolen,
        repair_uncertainty_ns=unc,
        n_events=n_events,
        kernel_runtime_check=check,
        wakers_from_futex_calls=futex_wakers,
        wakers_from_exits=exit_wakers,
        runnable_from_futex_calls=runnable_from_wakes,
        warnings=warnings,
    )
    for key in ("lost_samples", "unknown_events", "skipped_lines", "partial_record_bytes"):
        if key in stats:
            meta[key] = stats[key]
    return threads, meta




def _by_thread_then_start(slot: np.ndarray, start: np.ndarray, n_slots: int) -> np.ndarray:
    """The order of `np.lexsort((start, slot))`: the walk emits each thread's rows almost always in
    time order, so a counting sort by thread (slots follow the sorted tids) is enough unless some
    thread's rows are out of order, when the full sort is used."""
    return order_by_key_then(slot, n_slots, start)


def _thread_pids(events: RawEvents, tids: np.ndarray, slot_of: np.ndarray, index: EventIndex) -> np.ndarray:
    """Thread-group id of each of `tids` (-1 where nothing says): the pid of its first event that
    has one, else its first side-band record (PERF_RECORD_COMM/FORK). One compiled pass, which
    stops once every thread has its first event."""
    return _first_pids(events.tid, events.pid, events.arg0, events.arg1, index.rows(Kind.TASK_COMM, Kind.TASK_FORK),
                       slot_of, len(tids))


def _first_pids(tid, pid, arg0, arg1, side_band, slot_of, n_slots):
    """`_thread_pids` over all events (`side_band`: the rows of their side-band records, in time
    order): `_pids_start`, one `_pids_chunk`; the answer is the carry's first array."""
    carry = _pids_start(n_slots)
    _pids_chunk(tid, pid, arg0, arg1, side_band, slot_of, carry)
    return carry[0]


def _pids_start(n_slots):
    """`_pids_chunk`'s state before the first event: each slot's pid so far (-1: none), whether a
    side-band record gave it one, whether an event of its own did, and [slots left without one]."""
    return (np.full(n_slots, -1, np.int64), np.zeros(n_slots, np.bool_), np.zeros(n_slots, np.bool_),
            np.full(1, n_slots, np.int64))


@numba.njit(cache=True)
def _pids_chunk(tid, pid, arg0, arg1, side_band, slot_of, carry):
    """The next time-sorted events into `carry` (updated in place); `side_band`: the rows of
    their side-band records, relative to these events, in time order. A thread's first own event
    with a pid wins over every side-band record, earlier or later; else its first side-band record.
    Nothing to do once every thread has its own event's pid."""
    out, by_band, by_own, left = carry
    if left[0] == 0:
        return
    n_map = slot_of.shape[0]
    for r in side_band:  # time order: the first record wins
        a = arg0[r]
        if 0 <= a < n_map and slot_of[a] >= 0 and not by_band[slot_of[a]]:
            by_band[slot_of[a]] = True
            if not by_own[slot_of[a]]:
                out[slot_of[a]] = arg1[r]
    n_left = left[0]
    for i in range(tid.shape[0]):
        if n_left == 0:
            break
        x = tid[i]
        if pid[i] > 0 and 0 <= x < n_map and slot_of[x] >= 0 and not by_own[slot_of[x]]:
            out[slot_of[x]] = pid[i]
            by_own[slot_of[x]] = True
            n_left -= 1
    left[0] = n_left


def _samples(events: RawEvents, tids: np.ndarray, t0: int, t1: int, index: EventIndex) -> SampleTable:
    """The traced threads' cpu-clock samples inside the window."""
    idx = index.rows(Kind.SAMPLE)
    idx = idx[member(events.tid[idx], tids) & (events.time[idx] >= t0) & (events.time[idx] < t1)]
    if len(idx) == 0:
        return SampleTable.empty()
    comms = np.array(events.comms + ["[unknown]"], dtype=object)
    sym = events.comm0[idx]
    dso = events.comm1[idx]
    return SampleTable(
        tid=events.tid[idx], time_ns=events.time[idx], cpu=events.cpu[idx], ip=events.arg0[idx].view(np.uint64),
        offset=events.arg1[idx], symbol=comms[np.where(sym >= 0, sym, -1)], binary=comms[np.where(dso >= 0, dso, -1)],
    )
