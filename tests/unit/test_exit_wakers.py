"""Waits ended by another thread's exit (a join, a kill) take the exiting thread as their waker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.whatif import whatif
from scalestack.trace import State, StateTable
from scalestack.trace.builder import build_trace
from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.exit_wakers import SLACK_NS, exit_wakers
from tests.unit.test_state_builder import COMMS, S_BIT, X_BIT, ev

TID_WORD = 0x7F00  # the joined thread's tid word (CLONE_CHILD_CLEARTID): only the kernel wakes it
T_EXIT = 5_000_000


def _join(wake_at: int):
    """main (100) starts 101, which computes until T_EXIT; main waits in pthread_join from 20 on.
    The join's wakeup fires at `wake_at` in cpu 0's idle task."""
    rows = [
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (10, 0, 100, Kind.FORK, 100, 101, 0),
        (11, 0, 100, Kind.WAKEUP_NEW, 101, 1, 0),
        (12, 1, 0, Kind.SWITCH, 0, 101, 0),
        (19, 0, 100, Kind.FUTEX_ENTER, TID_WORD, 0, 0),  # FUTEX_WAIT on the tid word
        (20, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        (T_EXIT, 1, 101, Kind.EXIT, 101, 0, 0),
        (wake_at, 0, 0, Kind.WAKEUP, 100, 0, 0),
        (T_EXIT + 40, 1, 101, Kind.SWITCH, 101, 0, X_BIT),
        (wake_at + 5, 0, 0, Kind.SWITCH, 0, 100, 0),
        (wake_at + 6, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (wake_at + 500, 0, 100, Kind.EXIT, 100, 0, 0),
        (wake_at + 501, 0, 100, Kind.SWITCH, 100, 0, X_BIT),
    ]
    return ev(sorted(rows, key=lambda r: r[0]))


def _join_waker(trace) -> int:
    s = trace.states
    return int(s.waker[(s.tid == 100) & (s.state == State.SYNC_WAIT)][-1])


def test_a_join_woken_from_the_idle_task_is_woken_by_the_exiting_thread():
    tr = build_trace(_join(T_EXIT + 30), root_pids=[100])
    assert _join_waker(tr) == 101 and tr.meta["wakers_from_exits"] == 1
    # the replay now follows it: 101 twice as fast ends the join (and the run) about twice as early
    assert whatif(tr, 101, 2.0).replay_speedup == pytest.approx(1.99, abs=0.01)


@pytest.mark.parametrize("wake_at", [T_EXIT - SLACK_NS - 1000, T_EXIT + 40 + SLACK_NS + 1000])
def test_a_wait_ending_far_from_any_exit_keeps_no_waker(wake_at):
    tr = build_trace(_join(wake_at), root_pids=[100])
    assert _join_waker(tr) == 0 and tr.meta["wakers_from_exits"] == 0


def _child_process(wake_at: int, child_pid: int = 200):
    """A shell (100) forks the program (200, a process of its own when `child_pid` is 200), which
    computes until T_EXIT and exits; the shell sleeps in wait4 from 20 on, its wakeup fired at
    `wake_at` in cpu 0's idle task (as perf recorded `sh -c "prog; true"`)."""
    rows = [
        (0, 0, 100, 100, Kind.SWITCH, 0, 100, 0, 2, 0),
        (10, 0, 100, 100, Kind.FORK, 100, 200, 0, 0, 1),
        (11, 0, 100, 100, Kind.WAKEUP_NEW, 200, 1, 0, -1, -1),
        (12, 1, 0, 0, Kind.SWITCH, 0, 200, 0, 2, 1),
        (20, 0, 100, 100, Kind.SWITCH, 100, 0, S_BIT, 0, 2),
        (T_EXIT, 1, 200, child_pid, Kind.EXIT, 200, 0, 0, -1, -1),
        (T_EXIT + 20, 1, 200, child_pid, Kind.SWITCH, 200, 0, X_BIT, 1, 2),
        (wake_at, 0, 0, 0, Kind.WAKEUP, 100, 0, 0, -1, -1),
        (wake_at + 5, 0, 0, 0, Kind.SWITCH, 0, 100, 0, 2, 0),
        (wake_at + 500, 0, 100, 100, Kind.EXIT, 100, 0, 0, -1, -1),
        (wake_at + 501, 0, 100, 100, Kind.SWITCH, 100, 0, X_BIT, 0, 2),
    ]
    return RawEvents.from_rows([(t, c, tid, pid, int(k), *rest) for t, c, tid, pid, k, *rest in sorted(rows)],
                               comms=COMMS)


def test_a_parents_wait_for_its_child_process_is_woken_by_the_childs_exit():
    tr = build_trace(_child_process(T_EXIT + 30), root_pids=[100])
    s = tr.states
    waits = (s.tid == 100) & (s.state == State.SLEEP)
    assert int(s.waker[waits][-1]) == 200 and tr.meta["wakers_from_exits"] == 1
    assert int(tr.threads.ppid[tr.threads.tid == 200][0]) == 100
    # the replay follows it: the program twice as fast ends the shell's wait about twice as early
    assert whatif(tr, 200, 2.0).replay_speedup == pytest.approx(1.99, abs=0.01)


def test_a_wait_far_from_the_childs_exit_keeps_its_waker():
    tr = build_trace(_child_process(T_EXIT + 20 + SLACK_NS + 1000), root_pids=[100])
    s = tr.states
    assert int(s.waker[(s.tid == 100) & (s.state == State.SLEEP)][-1]) == 0 and tr.meta["wakers_from_exits"] == 0


def _rows(rows):
    tid, a, b, state, waker = (np.array(c) for c in zip(*rows, strict=True))
    n = len(tid)
    return StateTable(tid=tid.astype(np.int32), start_ns=a.astype(np.int64), end_ns=b.astype(np.int64),
                      state=state.astype(np.uint8), cpu=np.full(n, -1, np.int16), addr=np.zeros(n, np.uint64),
                      waker=waker.astype(np.int32), repaired=np.zeros(n, bool))


# threads 7 (process 1) and 8 (process 2, a child of process 4) exit at 1.2 ms: waits they ended
# end within 1.0-1.4 ms
EX = (np.array([7, 8]), np.array([1, 2]), np.array([1_200_000, 1_200_000]), np.array([1_200_000, 1_200_000]),
      np.array([-1, 4]))


def test_only_waits_of_the_same_or_the_parent_process_that_began_before_the_exit():
    s = _rows([(1, 0, 1_100_000, int(State.SYNC_WAIT), -1),   # process 1: thread 7's exit
               (2, 0, 1_100_000, int(State.SLEEP), 0),        # process 2: thread 8's
               (3, 0, 1_100_000, int(State.IO_WAIT), 0),      # process 3: no exit there
               (1, 1_300_000, 1_350_000, int(State.SYNC_WAIT), 0),  # began after the exit
               (1, 0, 1_100_000, int(State.RUNNABLE), -1),    # not a wait
               (7, 0, 1_100_000, int(State.SYNC_WAIT), -1),   # the exiting thread's own
               (1, 0, 1_100_000, int(State.SYNC_WAIT), 555),  # the kernel named its waker (untraced)
               (4, 0, 1_100_000, int(State.SLEEP), 0),        # process 4: its child's exit (8)
               (5, 0, 1_100_000, int(State.SLEEP), 0)])       # process 5: no child of its exits
    pids = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 7: 1, 8: 2}
    out, n = exit_wakers(s, EX, lambda t: np.array([pids[int(x)] for x in t]))
    assert out.waker.tolist() == [7, 8, 0, 0, -1, -1, 555, 8, 0] and n == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3_000_000), st.integers(1, 3_000_000),
                          st.sampled_from([int(x) for x in State]), st.sampled_from([-1, 0, 5, 7])),
                min_size=1, max_size=30))
def test_rows_are_decided_one_by_one(rows):
    """Each row's waker depends on that row alone: any split of the table gives the same wakers (a
    trace built in windows, cut anywhere, equals one built whole), and only waits without a known
    waker change, to an exiting thread of their process, or of a child process, whose span holds
    their end."""
    rows = [(t, a, a + d, s, w) for t, a, d, s, w in rows]
    table = _rows(rows)
    pid_of = lambda t: np.select([np.asarray(t) < 2, np.asarray(t) == 3], [1, 4], 2)  # noqa: E731  (4: 2's parent)
    whole, _ = exit_wakers(table, EX, pid_of)
    k = len(rows) // 2
    parts = [exit_wakers(table.take(np.arange(0, k)), EX, pid_of)[0],
             exit_wakers(table.take(np.arange(k, len(rows))), EX, pid_of)[0]]
    assert np.concatenate([p.waker for p in parts]).tolist() == whole.waker.tolist()
    changed = whole.waker != table.waker
    blocked = np.isin(table.state, [State.SYNC_WAIT, State.SLEEP, State.IO_WAIT])
    assert np.all(blocked[changed] & (table.waker[changed] <= 0))
    for i in np.flatnonzero(changed):
        j = int(np.flatnonzero(EX[0] == whole.waker[i])[0])
        assert EX[2][j] - SLACK_NS <= table.end_ns[i] <= EX[3][j] + SLACK_NS
        assert pid_of([table.tid[i]])[0] in (EX[1][j], EX[4][j])
