"""The compiled matching of futex waits with wake calls (futex wakers) against its NumPy statement,
on random waits and futex calls: the same waits explained, by the same callers, at the same times."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace import State, StateTable
from scalestack.trace.events import FUTEX_CMD_MASK, Kind, RawEvents
from scalestack.trace.futex_wakers import FUTEX_WAKE_OPS, _wake_calls
from scalestack.trace.lookup import EventIndex

from .test_failed_wait import reference as failed_reference


def reference(states: StateTable, waits: np.ndarray, events: RawEvents, tids: np.ndarray, pids: np.ndarray):
    """Per wait, the last wake-type futex call by a traced thread on its address at or before its
    end (one sort of the calls by address and time rank), kept if made since the waiter's own last
    futex call (or its start), by another thread of the same process where both are known, unless the
    wait's own futex call failed."""
    st_ = states
    wk = (events.kind == Kind.FUTEX_ENTER) & np.isin(events.arg1 & FUTEX_CMD_MASK, FUTEX_WAKE_OPS) \
        & np.isin(events.tid, tids)
    if not np.any(wk):
        return waits[:0], waits[:0], waits[:0]
    w_addr = events.arg0[wk].view(np.uint64)
    w_time = events.time[wk].astype(np.int64)
    w_tid = events.tid[wk].astype(np.int64)
    w_pid = events.pid[wk].astype(np.int64)
    addrs, w_aid = np.unique(w_addr, return_inverse=True)
    times = np.sort(w_time)
    m = len(times) + 1
    w_key = w_aid.astype(np.int64) * m + np.searchsorted(times, w_time, side="left")
    order = np.argsort(w_key, kind="stable")
    keys = w_key[order]
    q_addr = st_.addr[waits]
    a_pos = np.minimum(np.searchsorted(addrs, q_addr), len(addrs) - 1)
    has_addr = addrs[a_pos] == q_addr
    q_key = a_pos.astype(np.int64) * m + np.searchsorted(times, st_.end_ns[waits], side="right")
    k = np.searchsorted(keys, q_key, side="left") - 1
    ok = has_addr & (k >= 0)
    j = order[np.maximum(k, 0)]
    # the waiter's last futex call at or before the wait's start
    fe = events.kind == Kind.FUTEX_ENTER
    start = st_.start_ns[waits]
    entry = start.copy()
    for i, (t, s) in enumerate(zip(st_.tid[waits], start, strict=True)):
        mine = events.time[fe & (events.tid == t) & (events.time <= s)]
        if len(mine):
            entry[i] = mine[-1]
    since = np.minimum(entry, start)
    ok &= (w_aid[j] == a_pos) & (w_time[j] >= since) & (w_tid[j] != st_.tid[waits])
    waiter_pid = pids[np.searchsorted(tids, st_.tid[waits])]
    known = (waiter_pid > 0) & (w_pid[j] > 0)
    ok &= ~known | (waiter_pid == w_pid[j])
    cand = waits[ok]  # and not a wait whose own call failed (test_failed_wait.py checks that search)
    ok[ok] = ~failed_reference(events.sorted(), st_.tid[cand], st_.start_ns[cand])
    return waits[ok], w_tid[j[ok]], w_time[j[ok]]


ADDRS = [0x1000, 0x1008, 0x7FFF_FFFF_F000, 1 << 63]


@st.composite
def scenario(draw):
    tids = np.array([100, 101, 102])
    pids = np.array(draw(st.lists(st.sampled_from([-1, 100, 200]), min_size=3, max_size=3)))
    rows = []
    for _ in range(draw(st.integers(0, 30))):
        tid = draw(st.sampled_from([100, 101, 102, 103]))  # 103 is not traced
        op = draw(st.sampled_from([0, 1, 3, 4, 5, 6, 7, 9, 10, 12, 128, 129, 2, 127]))
        addr = draw(st.sampled_from(ADDRS))
        rows.append((draw(st.integers(0, 50)), 0, tid, draw(st.sampled_from([-1, 100, 200])),
                     int(draw(st.sampled_from([Kind.FUTEX_ENTER] * 4 + [Kind.FUTEX_EXIT, Kind.SWITCH]))),
                     np.uint64(addr).view(np.int64) if addr >= 1 << 63 else addr, op, 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    n = draw(st.integers(1, 8))
    cols = {"tid": [], "start_ns": [], "end_ns": [], "state": [], "cpu": [], "addr": [], "waker": [], "repaired": []}
    for _ in range(n):
        a = draw(st.integers(0, 50))
        cols["tid"].append(draw(st.sampled_from([100, 101, 102])))
        cols["start_ns"].append(a)
        cols["end_ns"].append(a + draw(st.integers(0, 20)))
        cols["state"].append(int(State.SYNC_WAIT))
        cols["cpu"].append(-1)
        cols["addr"].append(draw(st.sampled_from(ADDRS + [0x2000])))
        cols["waker"].append(-1)
        cols["repaired"].append(False)
    ev = RawEvents.from_rows(rows) if rows else RawEvents.empty()
    return StateTable(**cols), ev, tids, pids


@settings(max_examples=400, deadline=None)
@given(scenario(), st.sampled_from([1, 2]))
def test_compiled_matching_is_the_numpy_statement(case, workers):
    """On one thread, and with the wake calls and the failed calls swept on two at once."""
    states, events, tids, pids = case
    waits = np.arange(len(states))
    got = _wake_calls(states, waits, EventIndex(events), tids, pids, workers=workers)
    want = reference(states, waits, events, tids, pids)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_worked_example():
    """100 waits on 0x1000 over [10, 30] after its futex call at 8. 101 wakes 0x1000 at 5 (before
    the call: too early), at 20 and at 25 (the last one wins), and 0x1008 at 28 (another address);
    102 waits on 0x1008 over [9, 40] and 101's call at 28 explains it; the call at 45 is too late."""
    rows = [(5, 0, 101, -1, int(Kind.FUTEX_ENTER), 0x1000, 1, 0, -1, -1),
            (8, 0, 100, -1, int(Kind.FUTEX_ENTER), 0x1000, 0, 0, -1, -1),
            (20, 0, 101, -1, int(Kind.FUTEX_ENTER), 0x1000, 129, 0, -1, -1),
            (25, 1, 101, -1, int(Kind.FUTEX_ENTER), 0x1000, 1, 0, -1, -1),
            (28, 1, 101, -1, int(Kind.FUTEX_ENTER), 0x1008, 1, 0, -1, -1),
            (45, 1, 101, -1, int(Kind.FUTEX_ENTER), 0x1008, 1, 0, -1, -1)]
    states = StateTable(tid=[100, 102], start_ns=[10, 9], end_ns=[30, 40], state=[int(State.SYNC_WAIT)] * 2,
                        cpu=[-1, -1], addr=[0x1000, 0x1008], waker=[-1, -1], repaired=[False, False])
    waits, who, when = _wake_calls(states, np.arange(2), EventIndex(RawEvents.from_rows(rows)),
                                   np.array([100, 101, 102]), np.array([-1, -1, -1]))
    assert waits.tolist() == [0, 1] and who.tolist() == [101, 101] and when.tolist() == [25, 28]


def test_many_addresses_grow_the_table():
    """3000 addresses (the address table starts with 1024 slots and grows while the calls are read)."""
    rng = np.random.default_rng(7)
    n = 6000
    addr = 0x10000 + 8 * rng.integers(0, 3000, n)
    rows = [(t, 0, int(rng.choice([101, 102])), -1, int(Kind.FUTEX_ENTER), int(a), 1, 0, -1, -1)
            for t, a in enumerate(addr.tolist())]
    ev = RawEvents.from_rows(rows)
    k = 500
    w_addr = 0x10000 + 8 * rng.integers(0, 3100, k)  # some never woken
    start = np.sort(rng.integers(0, n, k))
    states = StateTable(tid=np.full(k, 100), start_ns=start, end_ns=start + rng.integers(1, 400, k),
                        state=np.full(k, int(State.SYNC_WAIT)), cpu=np.full(k, -1), addr=w_addr,
                        waker=np.full(k, -1), repaired=np.zeros(k, bool))
    tids, pids = np.array([100, 101, 102]), np.array([-1, -1, -1])
    want = reference(states, np.arange(k), ev, tids, pids)
    assert len(want[0]) > 20
    for workers in (1, 2):
        got = _wake_calls(states, np.arange(k), EventIndex(ev), tids, pids, workers=workers)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
