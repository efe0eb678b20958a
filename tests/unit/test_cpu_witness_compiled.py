"""The compiled CPU witness of `reconcile_running` (was anything but the thread on the CPU during a
stretch?) against its NumPy statement, on random events and stretches."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.events import FUTEX_CMD_MASK, FUTEX_WAIT_OPS, Kind, RawEvents

from .cpu_buckets import CpuWitness


def reference(events: RawEvents, cpu, a, b, tid):
    """Per stretch: an event on its CPU inside (a, b) showing another task (a switch shows the task it
    switches to; a run-delay record is passed over), or the thread's own last event on the CPU
    before b entering a futex wait."""
    switch = events.kind == Kind.SWITCH
    ctx = np.where(switch, events.arg1, events.tid)
    waits = ((events.kind == Kind.FUTEX_ENTER) & np.isin(events.arg1 & FUTEX_CMD_MASK, FUTEX_WAIT_OPS)) \
        | (events.kind == Kind.FUTEX_WAITV)
    out = np.zeros(len(a), bool)
    for q in range(len(a)):
        on = (events.cpu == cpu[q]) & (events.kind != Kind.RUN_DELAY)
        inside = on & (events.time > a[q]) & (events.time < b[q])
        before = np.flatnonzero(on & (events.time < b[q]))
        slept = len(before) > 0 and ctx[before[-1]] == tid[q] and waits[before[-1]]
        out[q] = bool(np.any(inside & (ctx != tid[q]))) or bool(slept)
    return out


@st.composite
def scenario(draw):
    rows = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from([Kind.SWITCH, Kind.SWITCH, Kind.WAKEUP, Kind.FUTEX_ENTER, Kind.FUTEX_ENTER,
                                     Kind.FUTEX_WAITV, Kind.STAT_RUNTIME, Kind.RUN_DELAY]))
        who = draw(st.sampled_from([0, 100, 101]))
        # a switch's next task; a futex call's operation
        op = draw(st.sampled_from([0, 100, 101])) if kind == Kind.SWITCH else draw(st.sampled_from([0, 1, 128, 129, 9, 13, 127]))
        rows.append((draw(st.integers(0, 40)), draw(st.integers(-1, 2)), who, 1, int(kind), who, op, 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    n_q = draw(st.integers(1, 8))
    cpu = np.array(draw(st.lists(st.integers(0, 3), min_size=n_q, max_size=n_q)))
    a = np.array(draw(st.lists(st.integers(0, 40), min_size=n_q, max_size=n_q)))
    b = a + np.array(draw(st.lists(st.integers(1, 20), min_size=n_q, max_size=n_q)))
    tid = np.array(draw(st.lists(st.sampled_from([100, 101]), min_size=n_q, max_size=n_q)))
    return (RawEvents.from_rows(rows) if rows else RawEvents.empty()), cpu, a, b, tid


@settings(max_examples=400, deadline=None)
@given(scenario())
def test_compiled_witness_is_the_numpy_statement(case):
    ev, cpu, a, b, tid = case
    np.testing.assert_array_equal(CpuWitness(ev).shows(cpu, a, b, tid), reference(ev, cpu, a, b, tid))


def test_worked_example():
    """CPU 0: 100's own events at 5 and 8, 101's at 12. CPU 1: 100 enters a futex wait at 3."""
    ev = RawEvents.from_rows([(3, 1, 100, 1, int(Kind.FUTEX_ENTER), 0xA0, 128, 0, -1, -1),
                              (5, 0, 100, 1, int(Kind.WAKEUP), 101, 1, 0, -1, -1),
                              (8, 0, 100, 1, int(Kind.FUTEX_ENTER), 0xA0, 1, 0, -1, -1),
                              (12, 0, 101, 1, int(Kind.WAKEUP), 100, 0, 0, -1, -1)])
    got = CpuWitness(ev).shows(np.array([0, 0, 1, 1]), np.array([0, 0, 4, 0]), np.array([10, 13, 9, 3]),
                                np.array([100, 100, 100, 100]))
    assert got.tolist() == [False, True, True, False]


def test_worked_example_a_switch_into_the_thread_and_its_run_delay_record_show_nothing_else():
    """CPU 0: 7 switches to 100 at 5 (its run-delay record at 6), 100's own event at 8; then 100
    switches to 7 at 12. A stretch of 100's from 2 shows nothing else before 12; one reaching past
    12 shows 7."""
    ev = RawEvents.from_rows([(5, 0, 7, 1, int(Kind.SWITCH), 7, 100, 1, -1, -1),
                              (6, 0, 7, 1, int(Kind.RUN_DELAY), 7, 500, 3, -1, -1),
                              (8, 0, 100, 1, int(Kind.STAT_RUNTIME), 100, 3, 0, -1, -1),
                              (12, 0, 100, 1, int(Kind.SWITCH), 100, 7, 0, -1, -1)])
    got = CpuWitness(ev).shows(np.array([0, 0]), np.array([2, 2]), np.array([12, 13]), np.array([100, 100]))
    assert got.tolist() == [False, True]
