"""RUNNING spans at the scheduler's switch instants, for criticality.

Criticality (thesis §3.2) divides wall-clock time among the threads on a CPU at each instant, and
"on a CPU" is the time between a thread's switch-in and its switch-out: what the in-kernel
aggregator measures (`collect/aggregator.py`) and what an independent switch trace gives. The state
builder's RUNNING intervals are instead the union of the kernel's runtime reports
(`sched_stat_runtime`: "d ns charged at t", laid out as [t - d, t]), which makes Run_j the
kernel's own charge but misplaces the slices in time: d is measured on the run queue's task clock
(which leaves out IRQ and steal time and lags the event's timestamp), so on a program whose
threads run in slices of a few µs the laid-out spans of two threads overlap where the switches
say they did not. Measured here on the contended-mutex program (4 threads, 2 vCPUs): C_j from
those spans 17-24% below the switch-instant figure for every worker, with only 2-4 chain gaps
per thread, while Run_j agreed within 1%.

So C_j is computed from switch instants, and the runtime reports only repair what the switch
stream lost (perf drops some switches without a LOST record, shared/DESIGN.md):

* a switch-out with no switch-in seen since the thread's last switch-out: the span starts at
  the switch-out minus the runtime reported since then (no earlier than that last switch-out
  or the CPU's previous switch);
* a switch-in while the thread was already in: the earlier span ends at its switch-in plus the
  runtime reported since (no later than the new switch-in);
* runtime reports while the thread was believed off-CPU, then a switch-in: a whole slice was
  lost; it is laid out ending at the last such report.

Run_j stays the kernel's charge (the state builder's RUNNING), as in the aggregator.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from scalestack.trace import SwitchSpanTable
from scalestack.trace.events import Kind, RawEvents, context_of, shows_no_cpu_state
from scalestack.trace.rows import RELEASE_EVERY, give_back

# event kinds as compile-time constants of the compiled walk (numba freezes globals)
K_SWITCH, K_STAT_RUNTIME = int(Kind.SWITCH), int(Kind.STAT_RUNTIME)


@dataclasses.dataclass(frozen=True)
class SwitchSpans:
    """Per-thread RUNNING spans [start, end) at switch instants; `repaired` marks the spans a
    lost switch made us rebuild from the runtime reports. Counts are per tid in `tids` order."""

    tid: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    repaired: np.ndarray
    tids: np.ndarray
    complete: np.ndarray  # spans with both switches seen
    lost_in: np.ndarray  # switch-outs without their switch-in
    lost_out: np.ndarray  # switch-ins of a thread already in
    lost_whole: np.ndarray  # slices seen only in runtime reports

    def table(self):
        """The spans as the Trace stores them."""
        return SwitchSpanTable(tid=np.asarray(self.tid, np.int32), start_ns=self.start_ns, end_ns=self.end_ns,
                               repaired=self.repaired)

    def gaps(self) -> dict[int, int]:
        """tid -> spans rebuilt from runtime reports (threads with none are left out)."""
        n = self.lost_in + self.lost_out + self.lost_whole
        return {int(t): int(k) for t, k in zip(self.tids, n, strict=True) if k}


@numba.njit(cache=True, inline="always")
def _put(out, m, s, a, b, rep):
    """Write span m (slot, start, end, repaired) of `out` if it is not empty; the next position."""
    if b > a:
        out[0][m] = s
        out[1][m] = a
        out[2][m] = b
        out[3][m] = rep
        m += 1
    return m


@numba.njit(cache=True, inline="always")
def _clip(x, lo, hi):
    return lo if x < lo else hi if x > hi else x


def _spans(time, cpu, kind, tid, a0, a1, slot_of, n_slots, n_cpus, t_end):
    """One pass over time-sorted events: the spans (columns slot, start, end, repaired) and the
    counts per slot [complete, lost_in, lost_out, lost_whole]. The same as `_spans_start`, then
    `_spans_chunk` over consecutive pieces of the events, then `_spans_end`; here one piece, its
    spans and the end's written into one block (no copy of the spans to join them)."""
    carry = _spans_start(n_slots, n_cpus)
    out = _spans_out(time.shape[0], n_slots)  # a fresh start leaves room for the end's spans too
    m = _spans_chunk(time, cpu, kind, tid, a0, a1, slot_of, n_slots, n_cpus, carry, out, 0)
    m = _spans_end(t_end, n_slots, carry, out, m)
    return (out[0][:m], out[1][:m], out[2][:m], out[3][:m]), carry[-1]


def _spans_out(n, n_slots):
    """Room for the spans of n events from any carry, or of n events from the start and the end's:
    each event opens at most two spans (a switch: prev's lost switch-in, next's switch-in) or one
    and a runtime report (a later whole slice), and the carry brings at most a span and a report
    per slot. Pages never written are never committed."""
    cap = 2 * n + 2 * n_slots + 4
    return np.empty(cap, np.int32), np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.bool_)


def _spans_start(n_slots, n_cpus):
    """`_spans_chunk`'s state before the first event, O(threads + CPUs). Per thread slot: `in_t` >= 0
    while on a CPU since a seen switch-in; -2 while on a CPU whose switch-in was lost (start
    bounded by [p_lo, p_hi]); -1 off-CPU. Per CPU: the traced slot believed on it and its previous
    event's time. Last: the counts per slot [complete, lost_in, lost_out, lost_whole]."""
    in_t = np.full(n_slots, -1, np.int64)
    in_cpu = np.full(n_slots, -1, np.int64)
    p_lo = np.zeros(n_slots, np.int64)
    p_hi = np.zeros(n_slots, np.int64)
    last_out = np.full(n_slots, -1, np.int64)
    last_own = np.full(n_slots, -1, np.int64)  # last event in the thread's context
    rt = np.zeros(n_slots, np.int64)  # runtime reported since the last switch (in or out)
    rt_last = np.full(n_slots, -1, np.int64)
    cur = np.full(n_cpus, -1, np.int64)  # traced slot believed on each CPU
    cpu_last = np.full(n_cpus, -1, np.int64)  # the CPU's previous event
    counts = np.zeros((n_slots, 4), np.int64)  # complete, lost_in, lost_out, lost_whole
    return in_t, in_cpu, p_lo, p_hi, last_out, last_own, rt, rt_last, cur, cpu_last, counts


@numba.njit(cache=True, nogil=True)
def _spans_chunk(time, cpu, kind, tid, a0, a1, slot_of, n_slots, n_cpus, carry, out, m):
    """The next time-sorted events from the state in `carry` (updated in place), the spans they
    end written into `out` (`_spans_out` of their number) from m on: the next position. Every
    event proves its context task is current on its CPU."""
    in_t, in_cpu, p_lo, p_hi, last_out, last_own, rt, rt_last, cur, cpu_last, counts = carry
    n = time.shape[0]
    n_map = slot_of.shape[0]
    for i in range(n):
        k = kind[i]
        if shows_no_cpu_state(k):
            continue
        t = time[i]
        c = cpu[i]
        cvalid = 0 <= c < n_cpus
        x = context_of(kind, a0, tid, i)  # sched_switch fires in prev's context
        xs = slot_of[x] if 0 <= x < n_map else -1
        # another task is current where a traced thread was: its switch-out was lost
        if cvalid and x >= 0 and cur[c] >= 0 and cur[c] != xs:
            q = cur[c]
            if in_t[q] == -2:
                b = last_own[q]
                m = _put(out, m, q, _clip(b - rt[q], p_lo[q], p_hi[q]), b, 1)
            else:
                m = _put(out, m, q, in_t[q], _clip(in_t[q] + rt[q], last_own[q], t), 1)
            counts[q, 2] += 1
            in_t[q] = -1
            last_out[q] = last_own[q]
            rt[q] = 0
            rt_last[q] = -1
            cur[c] = -1
        # a traced thread acting on a CPU where it was not known to run: its switch-in was lost
        if xs >= 0 and (in_t[xs] == -1 or in_cpu[xs] != c):
            if in_t[xs] != -1:  # believed on another CPU: it left that one unseen
                if in_t[xs] == -2:
                    b = last_own[xs]
                    m = _put(out, m, xs, _clip(b - rt[xs], p_lo[xs], p_hi[xs]), b, 1)
                else:
                    m = _put(out, m, xs, in_t[xs], _clip(in_t[xs] + rt[xs], last_own[xs], t), 1)
                counts[xs, 2] += 1
                if 0 <= in_cpu[xs] < n_cpus and cur[in_cpu[xs]] == xs:
                    cur[in_cpu[xs]] = -1
                last_out[xs] = last_own[xs]
                rt[xs] = 0
            lo = last_out[xs]
            if cvalid and cpu_last[c] > lo:
                lo = cpu_last[c]
            if lo > t:
                lo = t
            in_t[xs] = -2
            in_cpu[xs] = c
            p_lo[xs] = lo
            p_hi[xs] = t
            if cvalid:
                cur[c] = xs
        if xs >= 0:
            last_own[xs] = t
        if k == K_STAT_RUNTIME:  # after the context checks: a report belongs to the slice it ends
            rs = slot_of[a0[i]] if 0 <= a0[i] < n_map else -1
            if rs >= 0 and a1[i] > 0:
                rt[rs] += a1[i]
                rt_last[rs] = t
        if k == K_SWITCH:
            if xs >= 0:  # x is prev: it leaves
                if in_t[xs] >= 0:
                    m = _put(out, m, xs, in_t[xs], t, 0)
                    counts[xs, 0] += 1
                else:
                    m = _put(out, m, xs, _clip(t - rt[xs], p_lo[xs], p_hi[xs]), t, 1)
                    counts[xs, 1] += 1
                in_t[xs] = -1
                last_out[xs] = t
                rt[xs] = 0
                rt_last[xs] = -1
            if cvalid:
                cur[c] = -1
            ns = slot_of[a1[i]] if 0 <= a1[i] < n_map else -1
            if ns >= 0:
                if in_t[ns] != -1:  # already on a CPU: its switch-out was lost
                    if in_t[ns] == -2:
                        b = last_own[ns]
                        m = _put(out, m, ns, _clip(b - rt[ns], p_lo[ns], p_hi[ns]), b, 1)
                    else:
                        m = _put(out, m, ns, in_t[ns], _clip(in_t[ns] + rt[ns], last_own[ns], t), 1)
                    counts[ns, 2] += 1
                    if 0 <= in_cpu[ns] < n_cpus and cur[in_cpu[ns]] == ns:
                        cur[in_cpu[ns]] = -1
                elif rt[ns] > 0 and rt_last[ns] >= 0:
                    # a whole slice, both switches lost, seen only in its runtime reports
                    start = rt_last[ns] - rt[ns]
                    if start < last_out[ns]:
                        start = last_out[ns]
                    m = _put(out, m, ns, start, rt_last[ns], 1)
                    counts[ns, 3] += 1
                in_t[ns] = t
                in_cpu[ns] = c
                last_own[ns] = t
                rt[ns] = 0
                rt_last[ns] = -1
                if cvalid:
                    cur[c] = ns
        if cvalid:
            cpu_last[c] = t
    return m


@numba.njit(cache=True, nogil=True)
def _spans_end(t_end, n_slots, carry, out, m):
    """Close at `t_end` the spans still open in `carry`, written into `out` from m on (room for
    one a slot): the next position."""
    in_t, in_cpu, p_lo, p_hi, last_out, last_own, rt, rt_last, cur, cpu_last, counts = carry
    for s in range(n_slots):
        if in_t[s] >= 0:
            m = _put(out, m, s, in_t[s], t_end, 0)
        elif in_t[s] == -2:
            m = _put(out, m, s, _clip(last_own[s] - rt[s], p_lo[s], p_hi[s]), t_end, 1)
    return m


def switch_spans(events: RawEvents, tids: np.ndarray, t0: int | None = None, t1: int | None = None) -> SwitchSpans:
    """RUNNING spans of the threads `tids` at switch instants, clipped to [t0, t1).

    `events` needs sched_switch; with sched_stat_runtime, spans whose switch was lost are rebuilt
    (without it they are dropped, as an independent switch trace would drop them)."""
    events = events.sorted()
    tids = np.unique(np.asarray(tids, dtype=np.int64))
    time = events.time
    t0 = int(time[0]) if t0 is None and len(time) else int(t0 or 0)
    t1 = int(time[-1]) if t1 is None and len(time) else int(t1 or 0)
    slot_of = np.full(int(tids.max(initial=0)) + 1, -1, np.int32)  # int32 as the streaming builder's: one compile
    slot_of[tids] = np.arange(len(tids))
    n_cpus = int(events.cpu.max(initial=0)) + 1
    out, counts = _spans(time, events.cpu, events.kind, events.tid, events.arg0, events.arg1, slot_of, len(tids), n_cpus,
                         t1)
    tid, a, b, rep, in_order = _clipped_by_thread(out, t0, t1, tids, RELEASE_EVERY)
    del out  # given back as it was read
    if not in_order:  # some thread's spans out of start order: sort them (stable, as a lexsort of all was)
        order = np.lexsort((a, tid))
        tid, a, b, rep = tid[order], a[order], b[order], rep[order]
    return SwitchSpans(tid=tid, start_ns=a, end_ns=b, repaired=rep, tids=tids, complete=counts[:, 0],
                       lost_in=counts[:, 1], lost_out=counts[:, 2], lost_whole=counts[:, 3])


@numba.njit(cache=True, nogil=True)
def _clipped_by_thread(out, t0, t1, tids, release):
    """`_spans`' spans (columns slot, start, end, repaired) clipped to [t0, t1), those left empty
    dropped, in thread order (a stable counting sort by slot: each thread's spans in the order
    written), as columns: tid (`tids[slot]`, int32 as the table stores it), start, end, repaired;
    and whether each thread's starts are in order (else the caller sorts). With `release` > 0,
    `out` is given back every `release` spans read (`give_back`: the caller drops it): the NumPy
    statements this replaces held five copies of the spans at once (+1.3 GB for 12.5 M spans)."""
    o_slot, o_start, o_end, o_rep = out
    n = o_slot.shape[0]
    n_slots = tids.shape[0]
    off = np.zeros(n_slots + 1, np.int64)
    for i in range(n):
        if min(o_end[i], t1) > max(o_start[i], t0):
            off[o_slot[i] + 1] += 1
    for k in range(n_slots):
        off[k + 1] += off[k]
    tid = np.empty(off[n_slots], np.int32)
    start = np.empty(off[n_slots], np.int64)
    end = np.empty(off[n_slots], np.int64)
    rep = np.empty(off[n_slots], np.bool_)
    fill = off[:-1].copy()
    done = 0
    for i in range(n + 1):
        if release > 0 and (i - done == release or i == n):
            give_back(o_slot, done, i)
            give_back(o_start, done, i)
            give_back(o_end, done, i)
            give_back(o_rep, done, i)
            done = i
        if i == n:
            break
        a = max(o_start[i], t0)
        b = min(o_end[i], t1)
        if b > a:
            s = o_slot[i]
            j = fill[s]
            fill[s] += 1
            tid[j] = tids[s]
            start[j] = a
            end[j] = b
            rep[j] = o_rep[i]
    in_order = True
    for k in range(n_slots):
        for j in range(off[k] + 1, off[k + 1]):
            if start[j] < start[j - 1]:
                in_order = False
    return tid, start, end, rep, in_order
