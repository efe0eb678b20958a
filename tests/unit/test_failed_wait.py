"""Which futex waits failed (futex wakers): the compiled sweep for each wait's own FUTEX_EXIT
against a plain loop over the events, on random event streams and waits."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.futex_wakers import _failed_carry, _failed_chunk, _failed_end, _slots

KINDS = [Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV, Kind.SWITCH]


def failed_start(tid, start) -> tuple:
    """The sweep's carry for the waits (thread, start), as the builder makes it of its waits."""
    return _failed_carry(*_slots(tid), np.asarray(start, np.int64))


def failed_wait(events: RawEvents, tid: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The sweep over time-sorted events read as one chunk."""
    carry = failed_start(tid, start)
    _failed_chunk(events.time, events.tid, events.kind, events.arg0, carry)
    return _failed_end(carry)


def reference(events: RawEvents, tid: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The thread's first futex event after the start is an exit, and that exit returned < 0."""
    out = np.zeros(len(tid), bool)
    futex = (events.kind == Kind.FUTEX_ENTER) | (events.kind == Kind.FUTEX_EXIT) | (events.kind == Kind.FUTEX_WAITV)
    for q in range(len(tid)):
        mine = np.flatnonzero(futex & (events.tid == tid[q]) & (events.time > start[q]))
        if len(mine) == 0:
            continue
        t0 = events.time[mine[0]]
        first = mine[events.time[mine] == t0]  # same instant: an exit counts as first
        exits = first[events.kind[first] == Kind.FUTEX_EXIT]
        if len(exits):
            out[q] = events.arg0[exits[0]] < 0
    return out


@st.composite
def scenario(draw):
    rows = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(KINDS))
        tid = draw(st.sampled_from([100, 101, 102]))
        ret = draw(st.sampled_from([0, 1, -110, -4, -11])) if kind == Kind.FUTEX_EXIT else 0xABC
        rows.append((draw(st.integers(0, 40)), 0, tid, 100, int(kind), ret, 0, 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    n_q = draw(st.integers(1, 8))
    tid = np.array(draw(st.lists(st.sampled_from([100, 101, 102, 103]), min_size=n_q, max_size=n_q)))
    start = np.array(draw(st.lists(st.integers(-1, 41), min_size=n_q, max_size=n_q)), np.int64)
    return RawEvents.from_rows(rows, comms=[]), tid, start


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_failed_wait_matches_a_loop(case):
    events, tid, start = case
    np.testing.assert_array_equal(failed_wait(events, tid, start), reference(events, tid, start))


def test_worked_example():
    """100's wait from 5 ended -ETIMEDOUT at 9; 101's exit at 9 returned 0; 102 entered another call
    at 7 before its exit at 8 (the wait's own exit lost): not known to have failed."""
    rows = [(7, 0, 102, 100, int(Kind.FUTEX_ENTER), 0xABC, 1, 0, -1, -1),
            (8, 0, 102, 100, int(Kind.FUTEX_EXIT), -110, 0, 0, -1, -1),
            (9, 0, 100, 100, int(Kind.FUTEX_EXIT), -110, 0, 0, -1, -1),
            (9, 1, 101, 100, int(Kind.FUTEX_EXIT), 0, 0, 0, -1, -1)]
    got = failed_wait(RawEvents.from_rows(rows, comms=[]), np.array([100, 101, 102, 100]), np.array([5, 5, 5, 9]))
    assert got.tolist() == [True, False, False, False]
