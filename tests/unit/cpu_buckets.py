"""The by-CPU bucket search the state builder's CPU questions used before their time sweeps
(`trace.cpu_sweeps`): each CPU's events bucketed once, each question a binary search in its
CPU's bucket. Kept here as the reference the sweeps are tested against (and tested itself against
the NumPy statements it replaced)."""

from __future__ import annotations

import numba
import numpy as np

from scalestack.trace.builder import _WAIT_OPS_MASK
from scalestack.trace.events import Kind, RawEvents, context_of
from scalestack.trace.lookup import EventIndex

K_FUTEX_ENTER, K_FUTEX_WAITV = int(Kind.FUTEX_ENTER), int(Kind.FUTEX_WAITV)
K_SWITCH, K_RUN_DELAY = int(Kind.SWITCH), int(Kind.RUN_DELAY)


def cpu_buckets(events: RawEvents):
    """Each CPU's events, and its switches, in time order: (offsets, rows, switch offsets, switch
    rows); CPU c's rows are rows[offsets[c]:offsets[c + 1]]. Events without a CPU are left out."""
    like = np.zeros(0, np.int32 if len(events) < 2**31 - 1 else np.int64)
    return _cpu_buckets_compiled(events.cpu, events.kind, int(Kind.SWITCH), like)


@numba.njit(cache=True)
def _cpu_buckets_compiled(ecpu, kind, k_switch, like):
    n = ecpu.shape[0]
    n_cpu = 1
    for i in range(n):
        if ecpu[i] + 1 > n_cpu:
            n_cpu = ecpu[i] + 1
    off = np.zeros(n_cpu + 1, np.int64)
    s_off = np.zeros(n_cpu + 1, np.int64)
    for i in range(n):
        if ecpu[i] >= 0:
            off[ecpu[i] + 1] += 1
            if kind[i] == k_switch:
                s_off[ecpu[i] + 1] += 1
    for c in range(n_cpu):
        off[c + 1] += off[c]
        s_off[c + 1] += s_off[c]
    idx = np.empty(off[n_cpu], like.dtype)
    s_idx = np.empty(s_off[n_cpu], like.dtype)
    fill = off[:-1].copy()
    s_fill = s_off[:-1].copy()
    for i in range(n):
        c = ecpu[i]
        if c >= 0:
            idx[fill[c]] = i
            fill[c] += 1
            if kind[i] == k_switch:
                s_idx[s_fill[c]] = i
                s_fill[c] += 1
    return off, idx, s_off, s_idx


class CpuWitness:
    """Whether anything but the thread itself shows on a CPU during a stretch: an event there
    showing another task (a switch: the task it switches to; a run-delay record: none), or the thread's own last event before the stretch's end entering a
    futex wait (it went to sleep; its switch out was lost). Reads the events' by-CPU buckets of
    the events (time-sorted); `reconcile_running` asks the same question of the stretches its
    compiled pass lists, by a sweep over the events instead (`cpu_sweeps.witness_sweep`, the same
    answers)."""

    def __init__(self, events: RawEvents, index: EventIndex | None = None):
        self.index = index if index is not None else EventIndex(events.sorted())

    def shows(self, cpu: np.ndarray, a: np.ndarray, b: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """For each stretch [a, b) of thread `tid` on `cpu` (arrays of one length)."""
        ev = self.index.events
        off, idx, _, _ = cpu_buckets(ev)
        return _shows(ev.time, ev.kind, ev.arg0, ev.arg1, ev.tid, off, idx, _WAIT_OPS_MASK,
                      np.asarray(cpu, np.int64), np.asarray(a, np.int64), np.asarray(b, np.int64),
                      np.asarray(tid, np.int64))


@numba.njit(cache=True)
def _shows(time, kind, arg0, arg1, etid, off, idx, wait_ops_mask, cpu, a, b, tid):
    """The compiled `CpuWitness.shows`."""
    out = np.zeros(cpu.shape[0], np.bool_)
    for q in range(cpu.shape[0]):
        out[q] = _shows_one(time, kind, arg0, arg1, etid, off, idx, wait_ops_mask, cpu[q], a[q], b[q], tid[q])
    return out


@numba.njit(cache=True)
def _shows_one(time, kind, arg0, arg1, etid, off, idx, wait_ops_mask, c, a, b, tid):
    """One stretch [a, b) of `tid` on CPU c: the CPU's events in (a, b) by binary search in its
    bucket; any showing another task shows (a switch shows the task it switches to; a run-delay
    record shows none and is passed over); the last one before b shows if it is the thread's own
    entry into a futex wait."""
    if c < 0 or c >= off.shape[0] - 1:
        return False
    lo, hi = off[c], off[c + 1]
    j0 = _first_after(time, idx, lo, hi, a)  # the first event after a
    j1 = _first_after(time, idx, lo, hi, b - 1)  # the first at or after b (integer times)
    for k in range(j0, j1):
        r = idx[k]
        if kind[r] == K_RUN_DELAY:
            continue
        if (arg1[r] if kind[r] == K_SWITCH else etid[r]) != tid:
            return True
    j = j1 - 1
    while j >= lo and kind[idx[j]] == K_RUN_DELAY:
        j -= 1
    if j >= lo:
        r = idx[j]
        if kind[r] != K_SWITCH and etid[r] == tid:
            if kind[r] == K_FUTEX_WAITV:
                return True
            if kind[r] == K_FUTEX_ENTER:
                op = arg1[r] & 0x7F
                return op < 63 and ((wait_ops_mask >> op) & 1) == 1
    return False


def cpu_busy(events: RawEvents, cpu: np.ndarray, at: np.ndarray, until: np.ndarray,
              waiter: np.ndarray, index: EventIndex | None = None) -> np.ndarray:
    """Whether each CPU ran a task other than the waiter between the wake call and the waiter's run:
    by its last switch before the call (it was running something then), or by any event in the
    context of another task on that CPU before the run began (it started something else first, so
    the waiter queued behind it; the switch out of idle is the event this VM loses most).
    The events are bucketed by CPU once (no sort); each question is a search in its
    CPU's bucket from the CPU's previous answer. The builder asks by a sweep over the events
    instead (`cpu_sweeps.busy_sweep`, the same answers, no buckets)."""
    index = index if index is not None else EventIndex(events.sorted())
    ev = index.events
    if len(ev) == 0 or len(cpu) == 0:
        return np.zeros(len(cpu), bool)
    off, idx, s_off, s_idx = cpu_buckets(ev)
    return _cpu_busy_compiled(ev.time, ev.kind, ev.arg0, ev.arg1, ev.tid, off, idx, s_off, s_idx, cpu.astype(np.int64),
                              at.astype(np.int64), until.astype(np.int64), waiter.astype(np.int64))


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
def gallop_after(time, order, lo, hi, t, h):
    """`_first_after` searched outward from position h (a previous answer): the questions come in
    runs of increasing time (the waits are in thread and time order), so most answers are near
    the last one and cost a few steps instead of a binary search over the whole bucket."""
    h = min(max(h, lo), hi)
    if h < hi and time[order[h]] <= t:  # the answer is after h
        a = h + 1
        step = 1
        while True:
            b = a + step
            if b >= hi:
                b = hi
                break
            if time[order[b]] > t:
                break
            a = b + 1
            step *= 2
    else:  # at or before h
        b = h
        step = 1
        while True:
            a = b - step
            if a <= lo:
                a = lo
                break
            if time[order[a]] <= t:
                a += 1
                break
            b = a
            step *= 2
    return _first_after(time, order, a, b, t)


@numba.njit(cache=True)
def _cpu_busy_compiled(time, kind, arg0, nxt, etid, off, idx, s_off, s_idx, cpu, at, until, waiter):
    n_cpu = off.shape[0] - 1
    out = np.zeros(cpu.shape[0], np.bool_)
    s_hint = s_off[:-1].copy()  # each CPU's last answers
    e_hint = off[:-1].copy()
    for q in range(cpu.shape[0]):
        c = cpu[q]
        if c < 0 or c >= n_cpu:
            continue
        # the CPU's last switch at or before the call: busy unless it went idle or to the waiter
        lo = gallop_after(time, s_idx, s_off[c], s_off[c + 1], at[q], s_hint[c])
        s_hint[c] = lo
        if lo > s_off[c]:
            j = s_idx[lo - 1]
            if nxt[j] != 0 and nxt[j] != waiter[q]:
                out[q] = True
                continue
        # another task's event on the CPU strictly between the call and the run
        k = gallop_after(time, idx, off[c], off[c + 1], at[q], e_hint[c])
        e_hint[c] = k
        while k < off[c + 1] and time[idx[k]] < until[q]:
            x = context_of(kind, arg0, etid, idx[k])
            if x > 0 and x != waiter[q]:
                out[q] = True
                break
            k += 1
    return out
