"""The Trace's RUNNABLE follows the kernel's run delay (sched_info: from the enqueue to the clock
read on entering schedule()), on hand-made event streams with hand-computed states."""

from __future__ import annotations

import pytest

from scalestack.trace.builder import build_trace
from scalestack.trace.events import Kind

from ..unit.test_state_builder import RN, S_BIT, SL, SY, R, ev, intervals


def _switch_after_report(report_at: int, extra: list[tuple] = ()):
    return ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1_000, 0, 100, Kind.FORK, 100, 101, 0),
        (1_001, 0, 100, Kind.WAKEUP_NEW, 101, 0, 0),
        *extra,
        (report_at, 0, 100, Kind.STAT_RUNTIME, 100, report_at, 0),  # main charged up to here
        (53_000, 0, 100, Kind.SWITCH, 100, 101, S_BIT),             # main blocks, worker runs
        (90_000, 0, 101, Kind.SWITCH, 101, 0, S_BIT),
    ])


def _main_and_worker(rows: list[tuple]):
    """main (100) on cpu 0 forks a worker (101) that runs on cpu 1 and ends at 81; `rows` between."""
    return ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (10, 0, 100, Kind.FORK, 100, 101, 0),
        (11, 0, 100, Kind.WAKEUP_NEW, 101, 1, 0),
        (12, 1, 0, Kind.SWITCH, 0, 101, 0),
        *rows,
        (81, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
    ])


def test_a_switch_happens_at_prevs_runtime_report_just_before_it():
    tr = build_trace(_switch_after_report(50_000), root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 50_000, R), (50_000, 90_000, SL)]
    assert intervals(tr, 101) == [(1_001, 50_000, RN), (50_000, 90_000, R)]  # queued at its WAKEUP_NEW


@pytest.mark.parametrize("report_at, extra", [
    (20_000, []),                                          # too long before: not the switch's own
    (50_000, [(51_000, 0, 100, Kind.WAKEUP, 7, 0, 0)]),    # another event between: not the switch's own
])
def test_the_tracepoint_time_stays_without_the_switchs_own_report(report_at, extra):
    e = _switch_after_report(report_at, [])
    if extra:
        e = ev([
            (0, 0, 0, Kind.SWITCH, 0, 100, 0),
            (1_000, 0, 100, Kind.FORK, 100, 101, 0),
            (1_001, 0, 100, Kind.WAKEUP_NEW, 101, 0, 0),
            (report_at, 0, 100, Kind.STAT_RUNTIME, 100, report_at, 0),
            *extra,
            (53_000, 0, 100, Kind.SWITCH, 100, 101, S_BIT),
            (90_000, 0, 101, Kind.SWITCH, 101, 0, S_BIT),
        ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(1_001, 53_000, RN), (53_000, 90_000, R)]


def test_a_lost_wakeup_makes_the_waiter_runnable_from_the_wake_call():
    e = _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),    # main waits (FUTEX_WAIT)
        (21, 0, 100, Kind.SWITCH, 100, 7, S_BIT),      # cpu 0 runs task 7
        (40, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),    # worker: FUTEX_WAKE; the sched_wakeup is lost
        (42, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (60, 0, 7, Kind.SWITCH, 7, 100, S_BIT),         # main runs once cpu 0 is free
        (61, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 21, R), (21, 40, SY), (40, 60, RN), (60, 80, R), (80, 81, SL)]
    s = tr.states
    assert s.waker[(s.tid == 100) & (s.state == SY)].tolist() == [101]
    assert s.repaired[(s.tid == 100) & (s.state == RN)].tolist() == [True]
    assert tr.meta["runnable_from_futex_calls"] == 1 and tr.meta["missing_wakeups"] == 1


def test_a_recorded_wakeup_is_not_moved_to_the_wake_call():
    e = _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),
        (21, 0, 100, Kind.SWITCH, 100, 7, S_BIT),
        (40, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),
        (41, 0, 0, Kind.WAKEUP, 100, 0, 0),             # delivered from idle context: waker tid 0
        (42, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (60, 0, 7, Kind.SWITCH, 7, 100, S_BIT),
        (61, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    assert intervals(tr, 100) == [(0, 21, R), (21, 41, SY), (41, 60, RN), (60, 80, R), (80, 81, SL)]
    assert tr.meta["runnable_from_futex_calls"] == 0


def test_a_lost_wakeup_to_an_idle_cpu_is_not_split():
    """An idle CPU enqueues the woken task itself once the IPI wakes it, and runs it at once."""
    e = _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),
        (21, 0, 100, Kind.SWITCH, 100, 0, S_BIT),      # cpu 0 goes idle
        (40, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),
        (42, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (60, 0, 0, Kind.SWITCH, 0, 100, 0),
        (61, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    assert intervals(tr, 100) == [(0, 21, R), (21, 60, SY), (60, 80, R), (80, 81, SL)]
    assert tr.meta["runnable_from_futex_calls"] == 0


def test_a_lost_wakeup_to_a_cpu_that_starts_another_task_first_is_split():
    """Measured (producer/consumer, tracefs): the wake call found cpu 1 idle, but another task was
    woken onto it just before and ran first for 3.6 ms while the waiter queued behind it; the
    kernel counted that as run delay. Switches out of idle are what this VM loses, so the other
    task shows only by its own events on that CPU."""
    e = _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),
        (21, 0, 100, Kind.SWITCH, 100, 0, S_BIT),      # cpu 0 goes idle
        (40, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),    # the wake call; the sched_wakeup is lost
        (42, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (45, 0, 7, Kind.FUTEX_ENTER, 0xDEF, 1, 0),      # task 7 runs on cpu 0 (its switch in was lost)
        (60, 0, 7, Kind.SWITCH, 7, 100, S_BIT),
        (61, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 21, R), (21, 40, SY), (40, 60, RN), (60, 80, R), (80, 81, SL)]
    assert tr.meta["runnable_from_futex_calls"] == 1


def test_a_wake_call_while_the_waiter_still_switches_out_is_not_split():
    """Measured (tracefs): the wake call came while the waiter's own switch out was under way; the
    waiter is then queued on its CPU's wake list and enqueued only when the IPI lands, so its CPU
    being "busy" with the waiter itself does not start a run delay."""
    e = _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),
        (21, 0, 100, Kind.STAT_RUNTIME, 100, 21, 0),    # the kernel's switch instant
        (22, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),    # the wake call, before the switch event
        (23, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        (24, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (60, 0, 0, Kind.SWITCH, 0, 100, 0),
        (61, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (79, 0, 100, Kind.STAT_RUNTIME, 100, 19, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    assert intervals(tr, 100) == [(0, 21, R), (21, 60, SY), (60, 79, R), (79, 81, SL)]
    assert tr.meta["runnable_from_futex_calls"] == 0


def test_a_wake_call_while_the_waiter_switches_out_then_queues_behind_another_task():
    """Measured (4 threads on 2 cores, perf): the barrier's wake call came between the waiter's futex
    entry and its switch out, its sched_wakeup was lost, and the waiter then queued 1.68 ms behind
    another task woken onto its CPU; the kernel counted that as run delay. The call is matched from
    the waiter's futex entry, and the run delay starts at the switch (the whole wait is RUNNABLE)."""
    e = _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),
        (21, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),    # the wake call, before the switch instant
        (22, 0, 100, Kind.STAT_RUNTIME, 100, 22, 0),    # the kernel's switch instant
        (23, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        (24, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (45, 0, 7, Kind.FUTEX_ENTER, 0xDEF, 1, 0),      # task 7 runs on cpu 0 (its switch in was lost)
        (60, 0, 7, Kind.SWITCH, 7, 100, S_BIT),
        (61, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (79, 0, 100, Kind.STAT_RUNTIME, 100, 19, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 22, R), (22, 60, RN), (60, 79, R), (79, 81, SL)]
    assert tr.meta["runnable_from_futex_calls"] == 1


def _timed_wait(wait_ret: int, waiter_exit: bool = True):
    """Main waits on 0xABC with a timeout while the worker's wake call on that address wakes some
    other waiter; cpu 0 then runs task 7 until main's switch in (its sched_wakeup, from the timer,
    lost), and main's futex call returns `wait_ret`."""
    return _main_and_worker([
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),    # main waits (FUTEX_WAIT, with a timeout)
        (21, 0, 100, Kind.SWITCH, 100, 7, S_BIT),      # cpu 0 runs task 7
        (40, 1, 101, Kind.FUTEX_ENTER, 0xABC, 1, 0),    # worker: FUTEX_WAKE on the same address
        (42, 1, 101, Kind.FUTEX_EXIT, 1, 0, 0),
        (60, 0, 7, Kind.SWITCH, 7, 100, S_BIT),
        *([(61, 0, 100, Kind.FUTEX_EXIT, wait_ret, 0, 0)] if waiter_exit else []),
        (70, 0, 100, Kind.FUTEX_ENTER, 0xABC, 1, 0),    # main's next futex call (a wake)
        (72, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (80, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])


def test_a_timed_out_wait_is_not_ended_by_another_threads_wake_call():
    """Measured (four CPU-bound CPython threads taking turns on the GIL, perf, 10 s): a thread waiting
    for the GIL times out every 5 ms, while the GIL holder's wake calls on the same address wake the
    other waiters; read as this thread's lost wakeup, they made 0.5-0.7 s of each thread's SYNC_WAIT
    RUNNABLE (RUNNABLE +85% against the kernel's run delay; +0.0 to -0.5% without)."""
    tr = build_trace(_timed_wait(-110), root_pids=[100])  # -ETIMEDOUT
    tr.validate()
    assert intervals(tr, 100) == [(0, 21, R), (21, 60, SY), (60, 80, R), (80, 81, SL)]
    s = tr.states
    assert s.waker[(s.tid == 100) & (s.state == SY)].tolist() == [-1]
    assert tr.meta["runnable_from_futex_calls"] == 0 and tr.meta["wakers_from_futex_calls"] == 0


@pytest.mark.parametrize("wait_ret, waiter_exit", [(0, True), (-110, False)])
def test_a_wait_woken_or_of_unknown_outcome_still_takes_the_wake_call(wait_ret, waiter_exit):
    """Returned 0 (woken), or its exit lost (the thread's next futex call comes first): the wake
    call still ends the wait, as for any lost wakeup."""
    tr = build_trace(_timed_wait(wait_ret, waiter_exit), root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 21, R), (21, 40, SY), (40, 60, RN), (60, 80, R), (80, 81, SL)]
    assert tr.meta["runnable_from_futex_calls"] == 1 and tr.meta["wakers_from_futex_calls"] == 1
