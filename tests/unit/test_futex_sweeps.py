"""The futex wakers' two sweeps (the last wake call on each wait's address, whether each wait's own
call failed) carry their state across chunks of time-sorted events: cut anywhere, even inside a run
of events at one instant, they answer as one pass does, holding nothing per event."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.events import FUTEX_CMD_MASK, Kind, RawEvents
from scalestack.trace.futex_wakers import (
    FUTEX_WAKE_OPS,
    _both_sweeps,
    _failed_chunk,
    _failed_end,
    _failed_start_from,
    _last_wakes_chunk,
    _last_wakes_end,
    _last_wakes_start,
)

from .test_failed_wait import failed_start
from .test_failed_wait import reference as failed_reference
from .test_state_builder import event_streams

TIDS = np.array([100, 101, 102])
ADDRS = [0x40, 0x1000, 0x1008, 0x7FFF_FFFF_F000, np.uint64(1 << 63).view(np.int64)]


def pieces(n, cuts):
    bounds = [0, *sorted(cuts), n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def last_wakes(events, waits, cuts=(), tids=TIDS):
    carry = _last_wakes_start(tids, *waits)
    cols = (events.time, events.tid, events.pid, events.kind, events.arg0, events.arg1)
    for a, b in pieces(len(events), cuts):
        carry = _last_wakes_chunk(*(c[a:b] for c in cols), carry)
    return _last_wakes_end(carry), carry


def failed(events, tid, start, cuts=()):
    carry = failed_start(tid, start)
    for a, b in pieces(len(events), cuts):
        _failed_chunk(events.time[a:b], events.tid[a:b], events.kind[a:b], events.arg0[a:b], carry)
    return _failed_end(carry)


def last_wakes_reference(events, waits, tids=TIDS):
    """Per wait, a plain search of the events: the last wake-type futex call by a traced thread on
    its address at or before its end (its time, tid, pid), and its thread's last futex call at or
    before its start (the start if none or later)."""
    q_tid, q_start, q_end, q_addr = waits
    fe = events.kind == Kind.FUTEX_ENTER
    wake = fe & np.isin(events.arg1 & FUTEX_CMD_MASK, FUTEX_WAKE_OPS) & np.isin(events.tid, tids)
    n = len(q_tid)
    found, w_time, w_tid, w_pid, since = (np.zeros(n, bool), *(np.zeros(n, np.int64) for _ in range(3)),
                                          np.asarray(q_start, np.int64).copy())
    for q in range(n):
        mine = np.flatnonzero(wake & (events.arg0 == q_addr[q]) & (events.time <= q_end[q]))
        if len(mine):
            r = mine[-1]
            found[q], w_time[q], w_tid[q], w_pid[q] = True, events.time[r], events.tid[r], events.pid[r]
        calls = events.time[fe & (events.tid == q_tid[q]) & (events.time <= q_start[q])]
        if len(calls):
            since[q] = min(calls[-1], q_start[q])
    return found, w_time, w_tid, w_pid, since


@st.composite
def futex_streams(draw):
    """`event_streams()` with random futex calls and exits mixed in (traced and untraced callers, wake
    and wait operations, several addresses), many at instants shared with other events."""
    events = draw(event_streams())
    t_max = int(events.time.max())
    rows = []
    t, tid = 0, 100
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from([Kind.FUTEX_ENTER] * 3 + [Kind.FUTEX_EXIT, Kind.FUTEX_WAITV]))
        arg0 = draw(st.sampled_from(ADDRS)) if kind != Kind.FUTEX_EXIT else draw(st.sampled_from([0, 1, -110, -4]))
        if draw(st.booleans()):  # else another call at the previous one's instant, often by its thread
            t = draw(st.integers(0, t_max + 2))
        tid = tid if draw(st.booleans()) else draw(st.sampled_from([100, 101, 102, 103]))
        rows.append((t, draw(st.integers(0, 1)), tid, draw(st.sampled_from([-1, 100, 200])), int(kind), int(arg0),
                     draw(st.sampled_from([0, 1, 3, 4, 5, 6, 7, 9, 10, 12, 128, 129, 2, 127])), 0, -1, -1))
    extra = RawEvents.from_rows(rows)
    cols = {k: np.concatenate([getattr(events, k), getattr(extra, k)])
            for k in ("time", "cpu", "tid", "pid", "kind", "arg0", "arg1", "arg2", "comm0", "comm1")}
    merged = RawEvents(**cols, comms=events.comms).sorted()
    n_q = draw(st.integers(0, 10))
    start = np.array(draw(st.lists(st.integers(-1, t_max + 3), min_size=n_q, max_size=n_q)), np.int64)
    waits = (np.array(draw(st.lists(st.sampled_from([100, 101, 102, 103]), min_size=n_q, max_size=n_q)), np.int64),
             start, start + np.array(draw(st.lists(st.integers(0, 30), min_size=n_q, max_size=n_q)), np.int64),
             np.array(draw(st.lists(st.sampled_from(ADDRS + [0x2000]), min_size=n_q, max_size=n_q)), np.int64))
    return merged, waits


def random_cuts(data, time):
    """Up to 6 cuts anywhere, and one inside a run of events at one instant where there is one."""
    n = len(time)
    cuts = data.draw(st.lists(st.integers(0, n), max_size=6))
    ties = np.flatnonzero(time[1:] == time[:-1]) + 1
    if len(ties):
        cuts.append(int(data.draw(st.sampled_from(ties.tolist()))))
    return cuts


@settings(max_examples=150, deadline=None)
@given(futex_streams(), st.data())
def test_last_wakes_cut_anywhere_answer_as_one_pass(case, data):
    events, waits = case
    whole, _ = last_wakes(events, waits)
    parts, _ = last_wakes(events, waits, random_cuts(data, events.time))
    for a, b, c in zip(whole, parts, last_wakes_reference(events, waits), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


@settings(max_examples=150, deadline=None)
@given(futex_streams(), st.data())
def test_failed_waits_cut_anywhere_answer_as_one_pass(case, data):
    events, (tid, start, _, _) = case
    whole = failed(events, tid, start)
    np.testing.assert_array_equal(whole, failed(events, tid, start, random_cuts(data, events.time)))
    np.testing.assert_array_equal(whole, failed_reference(events, tid, start))


@settings(max_examples=100, deadline=None)
@given(futex_streams(), st.data(), st.sampled_from([1, 2]))
def test_both_sweeps_at_once_answer_as_each_alone(case, data, workers):
    """The builder's chunks read by both sweeps together (on two threads with workers=2), the failed
    calls' carry sharing the wake calls' waits: the answers of each sweep run alone."""
    events, waits = case
    cuts = random_cuts(data, events.time)
    carry = _last_wakes_start(TIDS, *waits)
    both = _failed_start_from(carry)
    for a, b in pieces(len(events), cuts):
        carry = _both_sweeps(events.take(np.arange(a, b)), carry, both, workers)
    for x, y in zip(_last_wakes_end(carry), last_wakes(events, waits)[0], strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(_failed_end(both), failed(events, waits[0], waits[1]))


def calls(rows):
    """rows: (time, tid, op or return, address); an op >= 0 with an address is a FUTEX_ENTER, else a FUTEX_EXIT."""
    return RawEvents.from_rows([(t, 0, tid, 100, int(Kind.FUTEX_ENTER if addr else Kind.FUTEX_EXIT),
                                 addr if addr else op, op if addr else 0, 0, -1, -1) for t, tid, op, addr in rows])


def waits_of(*rows):
    return tuple(np.array(c, np.int64) for c in zip(*rows, strict=True))


def test_a_cut_inside_an_instant_waits_for_its_end():
    """100 waits on 0x1000 until 10; 101's wake call at 10 comes after the cut, in the run of events
    at 10 that the previous chunk began: it still counts. 102's wait from 5 failed: its enter at 10
    is before the cut, its exit (-ETIMEDOUT) at the same instant after it."""
    ev = calls([(4, 100, 0, 0x1000), (10, 102, 0, 0x2000), (10, 103, 1, 0x1000), (10, 101, 1, 0x1000),
                (10, 102, -110, 0), (12, 101, 1, 0x1000)])
    w = waits_of((100, 5, 10, 0x1000))
    for cuts in ([], [2], [3], [2, 3, 4], [5]):
        (found, w_time, w_tid, _, since), _ = last_wakes(ev, w, cuts)
        assert found.tolist() == [True] and w_time.tolist() == [10] and w_tid.tolist() == [101]
        assert since.tolist() == [4]
        assert failed(ev, np.array([102, 100]), np.array([5, 5]), cuts).tolist() == [True, False]


def test_no_wake_calls():
    """Only wait calls: no wait is explained; each takes its thread's last call before its start."""
    ev = calls([(1, 100, 0, 0x1000), (3, 101, 128, 0x1000), (5, 100, 0, 0x1008), (9, 100, 0, 0)])
    w = waits_of((100, 4, 20, 0x1000), (101, 2, 20, 0x1000), (100, 6, 7, 0x1008))
    for cuts in ([], [1], [2, 2, 3]):
        (found, w_time, w_tid, w_pid, since), carry = last_wakes(ev, w, cuts)
        assert not found.any() and not w_time.any() and not w_tid.any() and not w_pid.any()
        assert since.tolist() == [1, 2, 5]
        assert carry[-1][2] == 0  # no address taken


def test_a_wait_on_an_address_never_woken():
    ev = calls([(1, 101, 1, 0x1000), (2, 101, 1, 0x1008), (8, 102, 1, 0x1010)])
    w = waits_of((100, 0, 10, 0x2000), (100, 0, 10, 0x1008), (100, 0, 5, 0x1010))
    (found, w_time, w_tid, _, _), _ = last_wakes(ev, w, [1])
    assert found.tolist() == [False, True, False] and w_time.tolist() == [0, 2, 0] and w_tid.tolist() == [0, 101, 0]


def test_many_addresses_grow_the_table_inside_a_chunk():
    """3000 addresses woken in 6000 calls: the table (1024 slots) grows three times, each time in
    the middle of a chunk (at the 562nd, 1264th and 3462nd call; chunks of 700 calls), and the
    answers are those of one pass."""
    rng = np.random.default_rng(7)
    n = 6000
    addr = 0x10000 + 8 * rng.integers(0, 3000, n)
    ev = RawEvents.from_rows([(t // 2, 0, int(rng.choice([101, 102])), 100, int(Kind.FUTEX_ENTER), int(a), 1, 0, -1, -1)
                              for t, a in enumerate(addr.tolist())])
    k = 500
    start = np.sort(rng.integers(0, n // 2, k))
    w = (np.full(k, 100, np.int64), start, start + rng.integers(0, 200, k), 0x10000 + 8 * rng.integers(0, 3100, k))
    whole, carry = last_wakes(ev, w)
    assert len(carry[8]) == 8192 and carry[-1][2] == len(np.unique(addr))
    parts, _ = last_wakes(ev, w, list(range(700, n, 700)))
    want = last_wakes_reference(ev, w)
    assert whole[0].sum() > 100 and not whole[0].all()
    for a, b, c in zip(whole, parts, want, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_the_carry_holds_nothing_per_event():
    """Ten times the calls on the same addresses: the same carry, array for array."""
    rows = [(t, 101 + t % 2, 1, 0x1000 + 8 * (t % 5)) for t in range(100)]
    w = waits_of((100, 10, 50, 0x1000), (100, 60, 90, 0x1010))
    small = last_wakes(calls(rows), w)[1]
    big = last_wakes(calls([(t + 100 * r, tid, op, a) for r in range(10) for t, tid, op, a in rows]), w)[1]
    assert [a.nbytes for a in small] == [a.nbytes for a in big]
    ev = calls(rows)
    carry = failed_start(w[0], w[1])
    before = [a.nbytes for a in carry]
    _failed_chunk(ev.time, ev.tid, ev.kind, ev.arg0, carry)
    assert [a.nbytes for a in carry] == before
