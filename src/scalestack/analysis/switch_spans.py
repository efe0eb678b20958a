"""RUNNING spans at the scheduler's switch instants, for criticality.

Criticality (thesis §3.2) divides wall-clock time among the threads on a CPU at each instant, and
"on a CPU" is the time between a thread's switch-in and its switch-out: what the in-kernel
aggregator measures (`collect/ebpf.py`) and what an independent switch trace gives. The state
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

from scalestack.events import Kind, RawEvents

assert (Kind.SWITCH, Kind.STAT_RUNTIME) == (1, 15)


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

    def gaps(self) -> dict[int, int]:
        """tid -> spans rebuilt from runtime reports (threads with none are left out)."""
        n = self.lost_in + self.lost_out + self.lost_whole
        return {int(t): int(k) for t, k in zip(self.tids, n, strict=True) if k}


@numba.njit(cache=True)
def _spans(time, cpu, kind, a0, a1, slot_of, n_slots, n_cpus, t_end):
    n = time.shape[0]
    out = np.empty((n + 2 * n_slots + 4, 4), np.int64)  # slot, start, end, repaired
    m = 0
    in_t = np.full(n_slots, -1, np.int64)
    in_cpu = np.full(n_slots, -1, np.int64)
    last_out = np.full(n_slots, -1, np.int64)
    rt = np.zeros(n_slots, np.int64)  # runtime reported since the last switch (in or out)
    rt_last = np.full(n_slots, -1, np.int64)  # time of the last such report
    cpu_last = np.full(n_cpus, -1, np.int64)
    counts = np.zeros((n_slots, 4), np.int64)  # complete, lost_in, lost_out, lost_whole
    n_map = slot_of.shape[0]
    for i in range(n):
        k = kind[i]
        t = time[i]
        if k == 15:
            s = slot_of[a0[i]] if 0 <= a0[i] < n_map else -1
            if s >= 0 and a1[i] > 0:
                rt[s] += a1[i]
                rt_last[s] = t
            continue
        if k != 1:
            continue
        c = cpu[i]
        cvalid = 0 <= c < n_cpus
        ps = slot_of[a0[i]] if 0 <= a0[i] < n_map else -1
        ns = slot_of[a1[i]] if 0 <= a1[i] < n_map else -1
        if ps >= 0:
            if in_t[ps] >= 0 and in_cpu[ps] == c:
                out[m, 0], out[m, 1], out[m, 2], out[m, 3] = ps, in_t[ps], t, 0
                m += 1
                counts[ps, 0] += 1
            else:
                # the switch-in was lost (or the thread moved CPU through a lost out/in pair)
                lo = last_out[ps]
                if in_t[ps] >= 0 and in_t[ps] > lo:
                    lo = in_t[ps]
                if cvalid and cpu_last[c] > lo:
                    lo = cpu_last[c]
                start = t - rt[ps]
                if start < lo:
                    start = lo
                if start < t:
                    out[m, 0], out[m, 1], out[m, 2], out[m, 3] = ps, start, t, 1
                    m += 1
                counts[ps, 1] += 1
            in_t[ps] = -1
            last_out[ps] = t
            rt[ps] = 0
            rt_last[ps] = -1
        if ns >= 0:
            if in_t[ns] >= 0:
                # the switch-out was lost: the slice ran for the runtime reported since its switch-in
                end = in_t[ns] + rt[ns]
                if end > t:
                    end = t
                if end > in_t[ns]:
                    out[m, 0], out[m, 1], out[m, 2], out[m, 3] = ns, in_t[ns], end, 1
                    m += 1
                counts[ns, 2] += 1
            elif rt[ns] > 0 and rt_last[ns] >= 0:
                # a whole slice, both switches lost, seen only in its runtime reports
                start = rt_last[ns] - rt[ns]
                if start < last_out[ns]:
                    start = last_out[ns]
                if rt_last[ns] > start:
                    out[m, 0], out[m, 1], out[m, 2], out[m, 3] = ns, start, rt_last[ns], 1
                    m += 1
                counts[ns, 3] += 1
            in_t[ns] = t
            in_cpu[ns] = c
            rt[ns] = 0
            rt_last[ns] = -1
        if cvalid:
            cpu_last[c] = t
    for s in range(n_slots):
        if in_t[s] >= 0 and t_end > in_t[s]:
            out[m, 0], out[m, 1], out[m, 2], out[m, 3] = s, in_t[s], t_end, 0
            m += 1
    return out[:m], counts


def switch_spans(events: RawEvents, tids: np.ndarray, t0: int | None = None, t1: int | None = None) -> SwitchSpans:
    """RUNNING spans of the threads `tids` at switch instants, clipped to [t0, t1).

    `events` needs sched_switch; with sched_stat_runtime, spans whose switch was lost are rebuilt
    (without it they are dropped, as an independent switch trace would drop them)."""
    events = events.sorted()
    tids = np.unique(np.asarray(tids, dtype=np.int64))
    keep = (events.kind == Kind.SWITCH) | (events.kind == Kind.STAT_RUNTIME)
    time, cpu, kind = events.time[keep], events.cpu[keep].astype(np.int64), events.kind[keep].astype(np.int64)
    a0, a1 = events.arg0[keep].astype(np.int64), events.arg1[keep].astype(np.int64)
    t0 = int(time[0]) if t0 is None and len(time) else int(t0 or 0)
    t1 = int(time[-1]) if t1 is None and len(time) else int(t1 or 0)
    slot_of = np.full(int(tids.max(initial=0)) + 1, -1, np.int64)
    slot_of[tids] = np.arange(len(tids))
    n_cpus = int(cpu.max(initial=0)) + 1
    out, counts = _spans(time, cpu, kind, a0, a1, slot_of, len(tids), n_cpus, t1)
    a, b = np.maximum(out[:, 1], t0), np.minimum(out[:, 2], t1)
    ok = b > a
    order = np.lexsort((a[ok], out[ok, 0]))
    return SwitchSpans(tid=tids[out[ok, 0]][order], start_ns=a[ok][order], end_ns=b[ok][order],
                       repaired=out[ok, 3][order].astype(bool), tids=tids, complete=counts[:, 0],
                       lost_in=counts[:, 1], lost_out=counts[:, 2], lost_whole=counts[:, 3])


def criticality_from_spans(trace, spans: SwitchSpans):
    """The trace's criticality stack with C_j from switch-instant spans and Run_j (and the
    thread table) from the trace: the quantities the eBPF aggregator keeps."""
    from scalestack.analysis.criticality import CriticalityResult, timeline
    from scalestack.trace import State

    t0, t1 = trace.start_ns, trace.end_ns
    known = np.isin(spans.tid, trace.threads.tid)
    a, b = np.clip(spans.start_ns[known], t0, t1), np.clip(spans.end_ns[known], t0, t1)
    ok = b > a
    a, b = a[ok], b[ok]
    rows = trace.thread_index(spans.tid[known][ok]) if len(a) else np.zeros(0, np.int64)
    tl, where = timeline(a, b, t0, t1)
    n, m = len(trace.threads), len(a)
    crit = np.bincount(rows, weights=tl.F[where[1:2 * m:2]] - tl.F[where[0:2 * m:2]], minlength=n).astype(float)
    s = trace.states
    run_mask = s.state == int(State.RUNNING)
    run = np.bincount(trace.thread_index(s.tid[run_mask]), weights=s.duration_ns[run_mask].astype(float), minlength=n) \
        if np.any(run_mask) else np.zeros(n)
    idle = float(tl.idle_cum[where[2 * m + 1]] - tl.idle_cum[where[2 * m]])
    return CriticalityResult(tids=trace.threads.tid.copy(), names=trace.threads.name.copy(),
                             roles=trace.threads.role.copy(), criticality_ns=crit, running_ns=run, idle_ns=idle,
                             span_ns=int(t1 - t0), active="running", t0_ns=int(t0))
