"""The sweeps of `cpu_sweeps` answer the builder's per-CPU questions as today's bucket searches do
(`cpu_buckets.CpuWitness.shows`, `cpu_buckets.cpu_busy`): random events cut into random chunks,
random questions, the same answers bit for bit; and at the edges (a question's instant on an
event's, several events at one instant on one CPU, CPUs without events or beyond them)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.builder import _WAIT_OPS_MASK
from scalestack.trace.cpu_sweeps import (
    _cpu_runs,
    _other_after,
    _other_before,
    busy_chunk,
    busy_end,
    busy_start,
    busy_sweep,
    witness_chunk,
    witness_end,
    witness_start,
    witness_sweep,
)
from scalestack.trace.events import Kind, RawEvents

from .cpu_buckets import CpuWitness, cpu_busy
from .test_state_builder import event_streams

TASKS = [0, 7, 100, 101, 102]


@st.composite
def events_on_cpus(draw):
    """`event_streams()` with some events moved to no CPU (-1) or to CPUs 2 and 5, some repeated at
    their instant (several events at one time on one CPU), and futexv waits added."""
    ev = draw(event_streams())
    n = len(ev)
    cpu = ev.cpu.copy()
    moved = draw(st.lists(st.sampled_from([-1, 2, 5]), min_size=n, max_size=n))
    where = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    cpu[np.array(where, bool)] = np.array(moved, np.int32)[np.array(where, bool)]
    kind = ev.kind.copy()
    waitv = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    kind[(np.array(waitv) == 0) & (kind == Kind.FUTEX_ENTER)] = Kind.FUTEX_WAITV
    ev = RawEvents(time=ev.time, cpu=cpu, tid=ev.tid, pid=ev.pid, kind=kind, arg0=ev.arg0, arg1=ev.arg1, arg2=ev.arg2,
                   comm0=ev.comm0, comm1=ev.comm1, comms=ev.comms)
    again = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    return ev.take(np.repeat(np.arange(n), again + 1))  # stays time-sorted


@st.composite
def instants(draw, ev, n):
    """n instants: events' times, one before or after, or anywhere around them."""
    times = ev.time.tolist() or [0]
    near = st.tuples(st.sampled_from(times), st.integers(-1, 1)).map(sum)
    return np.array(draw(st.lists(st.one_of(near, st.integers(min(times) - 3, max(times) + 3)), min_size=n,
                                  max_size=n)), np.int64)


@st.composite
def cuts(draw, n):
    """Chunk bounds over n events: random, repeated (empty chunks) allowed."""
    return [0, *sorted(draw(st.lists(st.integers(0, n), max_size=6))), n]


def columns(ev):
    return ev.time, ev.cpu, ev.kind, ev.arg0, ev.arg1, ev.tid


def witness_in_chunks(ev, bounds, cpu, a, b, tid):
    carry = witness_start(cpu, a, b, tid, _WAIT_OPS_MASK)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        witness_chunk(*(c[lo:hi] for c in columns(ev)), carry)
    return witness_end(carry)


def busy_in_chunks(ev, bounds, cpu, at, until, waiter):
    carry = busy_start(cpu, at, until, waiter)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        busy_chunk(*(c[lo:hi] for c in columns(ev)), carry)
    return busy_end(carry)


@settings(max_examples=150, deadline=None)
@given(events_on_cpus(), st.data())
def test_witness_sweep_in_any_chunks_is_the_bucket_search(ev, data):
    n_q = data.draw(st.integers(0, 12))
    cpu = np.array(data.draw(st.lists(st.integers(-1, 6), min_size=n_q, max_size=n_q)), np.int64)
    a = data.draw(instants(ev, n_q))
    b = np.maximum(a, data.draw(instants(ev, n_q))) + np.array(data.draw(
        st.lists(st.integers(0, 1), min_size=n_q, max_size=n_q)), np.int64)
    tid = np.array(data.draw(st.lists(st.sampled_from(TASKS), min_size=n_q, max_size=n_q)), np.int64)
    want = CpuWitness(ev).shows(cpu, a, b, tid)
    got = witness_in_chunks(ev, data.draw(cuts(len(ev))), cpu, a, b, tid)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(witness_sweep(*columns(ev), _WAIT_OPS_MASK, cpu, a, b, tid), want)


@settings(max_examples=150, deadline=None)
@given(events_on_cpus(), st.data())
def test_busy_sweep_in_any_chunks_is_the_bucket_search(ev, data):
    n_q = data.draw(st.integers(0, 12))
    cpu = np.array(data.draw(st.lists(st.integers(-1, 6), min_size=n_q, max_size=n_q)), np.int64)
    at = data.draw(instants(ev, n_q))
    until = data.draw(instants(ev, n_q))  # before the call too: nothing lies between
    waiter = np.array(data.draw(st.lists(st.sampled_from(TASKS), min_size=n_q, max_size=n_q)), np.int64)
    want = cpu_busy(ev, cpu, at, until, waiter)
    got = busy_in_chunks(ev, data.draw(cuts(len(ev))), cpu, at, until, waiter)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(busy_sweep(*columns(ev), cpu, at, until, waiter), want)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from([1, 2, 3])), max_size=20),
       st.integers(-1, 10), st.sampled_from([1, 2, 3]))
def test_a_cpus_runs_tell_whether_another_context_came_after_any_instant(steps, lo, x):
    """The carry of CPUs 0..2 (`_cpu_runs`) kept by `_other_before` over time-ordered events, then
    `_other_after` on each: what a scan of all their events says."""
    last_t, last_x, other_t = _cpu_runs(3)
    t, log = 0, []
    for dt, c, ctx in steps:
        t += dt
        other_t[c] = _other_before(last_t[c], last_x[c], other_t[c], ctx)
        last_t[c], last_x[c] = t, ctx
        log.append((t, c, ctx))
    for c in range(3):
        want = any(tc == c and tt > lo and tx != x for tt, tc, tx in log)
        assert _other_after(last_t[c], last_x[c], other_t[c], lo, x) == want


def rows(*evs):
    return RawEvents.from_rows([(t, c, tid, 100, int(k), a0, a1, 0, -1, -1) for t, c, tid, k, a0, a1 in evs], comms=[])


def test_witness_at_the_edges():
    """CPU 0: thread 100's wakeup at 5, 101's wakeup and 100's futex wait at 10 (one instant), 101's
    event at 20; CPU 1 has no events; CPU 9 is beyond them all."""
    ev = rows((5, 0, 100, Kind.WAKEUP, 102, 0), (10, 0, 101, Kind.WAKEUP, 102, 0),
              (10, 0, 100, Kind.FUTEX_ENTER, 0xA0, 128), (20, 0, 101, Kind.WAKEUP, 100, 0))
    cpu = np.array([0, 0, 0, 0, 0, 0, 1, 9, -1])
    a = np.array([5, 10, 0, 10, 0, 11, 0, 0, 0])
    b = np.array([10, 20, 10, 21, 5, 20, 99, 99, 99])
    tid = np.array([100] * 9)
    # (5, 10): nothing inside, last before 10 is 100's wakeup; (10, 20): 100's wait at 10 is the last
    # before 20; (0, 10): 100's own wakeup only; (10, 21): 101's at 20; (0, 5): nothing before 5
    want = [False, True, False, True, False, True, False, False, False]
    assert CpuWitness(ev).shows(cpu, a, b, tid).tolist() == want
    for bounds in ([0, 4], [0, 1, 2, 3, 4], [0, 2, 2, 4], [0, 0, 4, 4]):
        assert witness_in_chunks(ev, bounds, cpu, a, b, tid).tolist() == want


def test_busy_at_the_edges():
    """CPU 0 switches to 101 at 10 and to idle at 10 again, then idle's and 100's events at 15 and
    102's at 20; CPU 1 has no events; CPU 9 is beyond them."""
    ev = rows((10, 0, 0, Kind.SWITCH, 0, 101), (10, 0, 101, Kind.SWITCH, 101, 0), (15, 0, 0, Kind.WAKEUP, 100, 0),
              (15, 0, 100, Kind.FUTEX_ENTER, 0xA0, 1), (20, 0, 102, Kind.WAKEUP, 100, 0))
    cpu = np.array([0, 0, 0, 0, 0, 1, 9, 0])
    at = np.array([9, 10, 10, 10, 20, 0, 0, 25])
    until = np.array([10, 15, 20, 21, 30, 99, 99, 0])
    waiter = np.array([100] * 8)
    # (9, 10): switch to 101 not yet, nothing before 10; (10, 15): the last switch at 10 went idle; (10, 20):
    # 0's and 100's own events only; (10, 21): 102's at 20; (20, 30): 102's at 20 is not after the call
    want = [False, False, False, True, False, False, False, False]
    assert cpu_busy(ev, cpu, at, until, waiter).tolist() == want
    for bounds in ([0, 5], [0, 1, 2, 3, 4, 5], [0, 3, 3, 5], [0, 0, 5, 5]):
        assert busy_in_chunks(ev, bounds, cpu, at, until, waiter).tolist() == want


def test_no_events_or_no_questions():
    ev, none = RawEvents.empty(), np.zeros(0, np.int64)
    one = np.array([0])
    assert witness_sweep(*columns(ev), _WAIT_OPS_MASK, one, one, one + 1, one).tolist() == [False]
    assert busy_sweep(*columns(ev), one, one, one + 1, one).tolist() == [False]
    ev = rows((1, 0, 7, Kind.WAKEUP, 100, 0))
    assert witness_sweep(*columns(ev), _WAIT_OPS_MASK, none, none, none, none).tolist() == []
    assert busy_sweep(*columns(ev), none, none, none, none).tolist() == []


def test_a_run_delay_record_on_the_cpu_is_not_another_task_running_there():
    """The eBPF collector's run-delay record is written by a switch's handler in the context of the
    task switching out: read among the events, it shows no task running on the CPU (the windowed
    builder's sweeps read it there)."""
    switch_to_idle = (10, 0, 5, 5, int(Kind.SWITCH), 5, 0, 1, -1, -1)
    run_delay = (30, 0, 9, 9, int(Kind.RUN_DELAY), 9, 1000, 3, -1, -1)
    question = (np.array([0]), np.array([20]), np.array([40]), np.array([7]))
    for rows in ([switch_to_idle], [switch_to_idle, run_delay]):
        ev = RawEvents.from_rows(rows)
        assert not busy_sweep(ev.time, ev.cpu, ev.kind, ev.arg0, ev.arg1, ev.tid, *question)[0], rows


def test_a_cpu_sample_does_not_change_the_answers():
    """A cpu-clock sample of another task on the CPU (`record --sample`, a perf.data with samples)
    is left out of both sweeps: the states are the same whether the samples were read or not
    (without perf, a perf.data's samples are not)."""
    switch_to_idle = (10, 0, 5, 5, int(Kind.SWITCH), 5, 0, 1, -1, -1)
    sample = (30, 0, 9, 9, int(Kind.SAMPLE), 0x1000, 0, 0, -1, -1)
    busy_q = (np.array([0]), np.array([20]), np.array([40]), np.array([7]))
    asked = (np.array([0]), np.array([20]), np.array([40]), np.array([7]))  # (cpu, a, b, tid)
    for rows in ([switch_to_idle], [switch_to_idle, sample]):
        ev = RawEvents.from_rows(rows)
        assert not busy_sweep(ev.time, ev.cpu, ev.kind, ev.arg0, ev.arg1, ev.tid, *busy_q)[0], rows
        assert not witness_sweep(ev.time, ev.cpu, ev.kind, ev.arg0, ev.arg1, ev.tid, _WAIT_OPS_MASK, *asked)[0], rows
