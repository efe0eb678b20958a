"""The compiled `cpu_busy` (the futex wakers' bucket search, tests/unit/cpu_buckets.py) against its NumPy statement, on random events and
questions: the same answer to every question."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.events import Kind, RawEvents

from .cpu_buckets import cpu_busy as _cpu_busy
from .cpu_buckets import gallop_after as _gallop_after


def reference(events: RawEvents, cpu: np.ndarray, at: np.ndarray, until: np.ndarray,
              waiter: np.ndarray) -> np.ndarray:
    """Whether each CPU ran a task other than the waiter between the wake call and the waiter's run:
    by its last switch before the call (it was running something then), or by any event in the
    context of another task on that CPU before the run began (it started something else first, so
    the waiter queued behind it; the switch out of idle is the event this VM loses most)."""
    sw = np.flatnonzero(events.kind == Kind.SWITCH)
    busy_at = np.zeros(len(cpu), bool)
    lo = int(min(events.time.min(), at.min()))
    span = int(max(events.time.max(), until.max()) - lo) + 2
    q = cpu * span + (at - lo)
    if len(sw):
        key = events.cpu[sw].astype(np.int64) * span + (events.time[sw] - lo)
        order = np.argsort(key, kind="stable")
        key = key[order]
        k = np.searchsorted(key, q, side="right") - 1
        ok = (k >= 0) & (cpu >= 0)
        k = np.maximum(k, 0)
        same_cpu = events.cpu[sw[order[k]]] == cpu
        nxt = events.arg1[sw[order[k]]]
        busy_at = ok & same_cpu & (nxt != 0) & (nxt != waiter)  # the waiter itself, still switching out, is not busy
    # another task's event on the CPU inside (at, until): all events there minus the waiter's own,
    # each counted with one searchsorted over keys built from time ranks (no overflow)
    ctx = events.context_tid()
    own = (ctx > 0) & (events.cpu >= 0)
    if not np.any(own):
        return busy_at
    t_all = np.sort(events.time[own])
    m = len(t_all) + 2
    e_cpu, e_ctx = events.cpu[own].astype(np.int64), ctx[own]
    e_rank = np.searchsorted(t_all, events.time[own], side="left")
    r_at = np.searchsorted(t_all, at, side="right")  # first rank strictly after the wake call
    r_until = np.searchsorted(t_all, until, side="left")  # first rank at or after the run's start
    n_cpu = int(max(e_cpu.max(), cpu.max(initial=0))) + 1
    by_cpu = np.sort(e_cpu * m + e_rank)
    n_in = np.searchsorted(by_cpu, cpu * m + r_until) - np.searchsorted(by_cpu, cpu * m + r_at)
    by_ctx = np.sort((e_ctx * n_cpu + e_cpu) * m + e_rank)
    base = (waiter.astype(np.int64) * n_cpu + cpu) * m
    n_own = np.searchsorted(by_ctx, base + r_until) - np.searchsorted(by_ctx, base + r_at)
    return busy_at | ((cpu >= 0) & (n_in > n_own))


@st.composite
def scenario(draw):
    rows = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from([Kind.SWITCH, Kind.SWITCH, Kind.WAKEUP, Kind.FUTEX_ENTER]))
        ctx = draw(st.sampled_from([0, 100, 101, 102]))
        nxt = draw(st.sampled_from([0, 100, 101, 102])) if kind == Kind.SWITCH else 0
        rows.append((draw(st.integers(0, 40)), draw(st.integers(-1, 2)), ctx, 100, int(kind), ctx, nxt, 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    n_q = draw(st.integers(1, 8))
    cpu = np.array(draw(st.lists(st.integers(-1, 3), min_size=n_q, max_size=n_q)))
    at = np.array(draw(st.lists(st.integers(0, 40), min_size=n_q, max_size=n_q)))
    length = np.array(draw(st.lists(st.integers(0, 20), min_size=n_q, max_size=n_q)))
    waiter = np.array(draw(st.lists(st.sampled_from([100, 101, 102]), min_size=n_q, max_size=n_q)))
    return RawEvents.from_rows(rows, comms=[]), cpu, at, at + length, waiter


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_compiled_cpu_busy_matches_numpy_statement(case):
    events, cpu, at, until, waiter = case
    np.testing.assert_array_equal(_cpu_busy(events, cpu, at, until, waiter), reference(events, cpu, at, until, waiter))


def test_worked_example():
    """CPU 0 switches to 101 at 5; the waiter 100 is woken at 10 and runs at 20: busy (101 holds it).
    CPU 1 went idle at 5, then 102 logs an event at 15: busy. CPU 1 asked from 16 to 20: idle."""
    ev = RawEvents.from_rows([(5, 0, 0, 0, int(Kind.SWITCH), 0, 101, 0, -1, -1),
                              (5, 1, 102, 100, int(Kind.SWITCH), 102, 0, 0, -1, -1),
                              (15, 1, 102, 100, int(Kind.FUTEX_ENTER), 0, 0, 0, -1, -1)], comms=[])
    got = _cpu_busy(ev, np.array([0, 1, 1]), np.array([10, 10, 16]), np.array([20, 20, 20]), np.array([100] * 3))
    assert got.tolist() == [True, True, False]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=40), st.integers(0, 40), st.integers(0, 40), st.integers(-1, 32))
def test_search_from_a_hint_is_the_binary_search(times, lo, hint, t):
    """`_gallop_after` finds, from any starting position, what np.searchsorted(..., side='right') finds."""
    time = np.array(sorted(times), np.int64)
    order = np.arange(len(time))
    lo = min(lo, len(time))
    want = lo + int(np.searchsorted(time[lo:], t, side="right"))
    assert _gallop_after(time, order, lo, len(time), t, hint) == want
