"""The run-delay reconciliation as it was written first, over each thread's rows whole (NumPy):
the reference `builder.reconcile_runnable`, which re-cuts a thread a piece at a time, must equal."""

from __future__ import annotations

import numpy as np

from scalestack.trace import State, StateTable
from scalestack.trace.builder import _cut, _per_thread
from scalestack.trace.events import RawEvents


def reconcile_runnable_whole(states: StateTable, run_delay: RawEvents) -> tuple[StateTable, dict]:
    """`builder.reconcile_runnable` (see its docstring) with each thread re-cut whole."""
    if len(run_delay) == 0 or len(states) == 0:
        return states, {}
    RUN, RQ = int(State.RUNNING), int(State.RUNNABLE)
    parts: list[StateTable] = []
    changed: dict[str, list[int]] = {}
    order = np.lexsort((run_delay.time, run_delay.arg0))
    rd_tid, rd_t = run_delay.arg0[order], run_delay.time[order]
    rd_d, rd_p = run_delay.arg1[order], run_delay.arg2[order]
    for tid, th in _per_thread(states):
        a, b = np.searchsorted(rd_tid, tid, "left"), np.searchsorted(rd_tid, tid, "right")
        run = np.flatnonzero(th.state == RUN)
        if b - a < 2 or len(run) == 0:
            parts.append(th)
            continue
        t, d, p = rd_t[a:b], rd_d[a:b], rd_p[a:b]
        rs, re_ = th.start_ns[run], th.end_ns[run]
        ie = np.searchsorted(rs, t, "left") - 1  # the RUNNING row each switch-out ends
        e = re_[np.maximum(ie, 0)]
        isx = np.searchsorted(rs, e[:-1], "left")  # this run's first RUNNING row
        ok = (ie[1:] >= 0) & (ie[:-1] >= 0) & (np.diff(p) == 1) & (isx <= ie[1:])
        s_in = rs[np.minimum(isx, len(rs) - 1)]
        delta = np.diff(d)
        ok &= (s_in >= e[:-1]) & (delta >= 0)
        ga, gb, dl = e[:-1][ok], s_in[ok], delta[ok]
        cur = (ie[1:] >= 0) & (ie[:-1] >= 0) & (np.diff(p) == 1) & (isx <= ie[1:]) & (s_in >= e[:-1])
        ca, cb = s_in[cur], e[1:][cur]  # runs the thread never left: RUNNABLE inside is uncharged time
        if len(ga) == 0 and len(ca) == 0:
            parts.append(th)
            continue
        w = np.maximum(gb - dl, ga)
        unplaced = int(np.maximum(dl - (gb - ga), 0).sum())
        seg_a, seg_b, row = _cut(th, w)
        old = th.state[row].astype(np.int64)
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
        fb_addr[gb_idx] = th.addr[row[seg_blocked[first]]]
        # the waker belongs to the end of the blocked stretch: its last early segment
        gap_waker = np.full(max(len(ga), 1), -1, np.int64)
        rev_g, rev_first = np.unique(g[blocked][::-1], return_index=True)
        gap_waker[rev_g] = th.waker[row[seg_blocked[::-1][rev_first]]]
        state = np.where(late, RQ, np.where(early & (old == RQ), fb_state[gi], old))
        uncharged = np.zeros(len(seg_a), bool)
        for a_, b_ in zip(ca.tolist(), cb.tolist(), strict=True):
            uncharged |= (seg_a >= a_) & (seg_b <= b_) & (old == RQ)
        state = np.where(uncharged, int(State.UNKNOWN), state)
        next_run_cpu = th.cpu[run[np.minimum(np.searchsorted(rs, seg_b, "left"), len(run) - 1)]]
        mod = (in_gap | uncharged) & (state != old)
        cpu = np.where(late & mod, next_run_cpu, np.where(mod, -1, th.cpu[row]))
        addr = np.where(early & mod, fb_addr[gi], np.where(mod, 0, th.addr[row])).astype(np.uint64)
        waker = np.where(in_gap, -1, th.waker[row])
        last_early = early & ~np.r_[early[1:] & (g[1:] == g[:-1]), False]
        waker = np.where(last_early, gap_waker[gi], waker)
        dur = seg_b - seg_a
        made = int(dur[mod & late].sum())
        unmade = int(dur[mod & (early | uncharged)].sum())
        if made or unmade or unplaced:
            changed[str(tid)] = [made, unmade, unplaced]
        parts.append(StateTable(
            tid=np.full(len(seg_a), tid, np.int32), start_ns=seg_a, end_ns=seg_b, state=state.astype(np.uint8),
            cpu=cpu, addr=addr, waker=waker, repaired=th.repaired[row],
        ))
    return StateTable.concat(parts), changed
