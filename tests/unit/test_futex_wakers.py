"""Wakers of futex waits that the kernel delivered from the idle task, taken from the futex calls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace import State
from scalestack.trace.builder import build_trace
from scalestack.trace.events import Kind
from tests.unit.test_state_builder import S_BIT, X_BIT, ev

DATA = Path(__file__).resolve().parents[1] / "data"
ADDR = 0xABC
LATE = 1_000_000


def _stream(wake_rows):
    """main (100) waits on ADDR from 21 to 50; the wakeup fires in the idle task's context (tid 0)."""
    rows = [
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (10, 0, 100, Kind.FORK, 100, 101, 0),
        (11, 0, 100, Kind.WAKEUP_NEW, 101, 1, 0),
        (12, 1, 0, Kind.SWITCH, 0, 101, 0),
        (20, 0, 100, Kind.FUTEX_ENTER, ADDR, 128, 0),   # FUTEX_WAIT | FUTEX_PRIVATE_FLAG
        (21, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        (50, 0, 0, Kind.WAKEUP, 100, 0, 0),             # delivered by cpu 0's idle task
        (52, 0, 0, Kind.SWITCH, 0, 100, 0),
        (53, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        # the threads exit a millisecond later: a wait that ends within `exit_wakers.SLACK_NS` of
        # another thread's exit is taken as ended by it (a join, a kill)
        (LATE + 60, 1, 101, Kind.EXIT, 101, 0, 0),
        (LATE + 61, 1, 101, Kind.SWITCH, 101, 0, X_BIT),
        (LATE + 70, 0, 100, Kind.EXIT, 100, 0, 0),
        (LATE + 71, 0, 100, Kind.SWITCH, 100, 0, 32),
    ]
    return ev(sorted(rows + wake_rows, key=lambda r: r[0]))


def _waker(trace):
    s = trace.states
    return int(s.waker[(s.tid == 100) & (s.state == State.SYNC_WAIT)][0])


def test_wake_call_during_the_wait_names_the_waker():
    tr = build_trace(_stream([(45, 1, 101, Kind.FUTEX_ENTER, ADDR, 129, 0)]), root_pids=[100])  # FUTEX_WAKE|PRIVATE
    assert _waker(tr) == 101
    assert tr.meta["wakers_from_futex_calls"] == 1


@pytest.mark.parametrize("row", [
    (15, 1, 101, Kind.FUTEX_ENTER, ADDR, 1, 0),        # before the wait began
    (55, 1, 101, Kind.FUTEX_ENTER, ADDR, 1, 0),        # after it ended
    (45, 1, 101, Kind.FUTEX_ENTER, ADDR + 4, 1, 0),    # another address
    (45, 1, 101, Kind.FUTEX_ENTER, ADDR, 0, 0),        # a wait, not a wake
])
def test_unrelated_futex_calls_are_not_wakers(row):
    tr = build_trace(_stream([row]), root_pids=[100])
    assert _waker(tr) not in (100, 101)
    assert tr.meta["wakers_from_futex_calls"] == 0


def test_the_last_wake_before_the_end_wins():
    rows = [(30, 1, 101, Kind.FUTEX_ENTER, ADDR, 1, 0), (46, 1, 101, Kind.FUTEX_ENTER, ADDR, 5, 0)]
    assert _waker(build_trace(_stream(rows), root_pids=[100])) == 101


def test_real_barrier_recording_gets_every_waker():
    """The committed barrier recording: 4 of its 5 futex waits were woken from the idle task."""
    events = read_perf_data(DATA / "barrier.perf.data")
    tr = build_trace(events, comm="bi")
    s = tr.states
    waits = np.flatnonzero(s.state == State.SYNC_WAIT)
    assert tr.meta["wakers_from_futex_calls"] == 4
    assert np.isin(s.waker[waits], tr.threads.tid).all()
    wake = (events.kind == Kind.FUTEX_ENTER) & ((events.arg1 & 0x7F) == 1)
    for i in waits[s.addr[waits] != s.addr[waits[0]]]:  # the barrier waits (the first one is main's join)
        calls = wake & (events.tid == s.waker[i]) & (events.arg0.view(np.uint64) == s.addr[i])
        t = events.time[calls]
        assert s.waker[i] != s.tid[i]
        assert np.any((t >= s.start_ns[i]) & (t <= s.end_ns[i])), "the named waker issued a FUTEX_WAKE during the wait"
