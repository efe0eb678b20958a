"""Run-queue waits sized by the kernel's own run delay (eBPF traces' RUN_DELAY records)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace import State, StateTable
from scalestack.trace.builder import build_trace, reconcile_runnable
from scalestack.trace.events import Kind, RawEvents, concat_events

from .test_state_builder import ev, fork_wait_exit_rows, intervals

R, RN, SY = int(State.RUNNING), int(State.RUNNABLE), int(State.SYNC_WAIT)


def _program(final_delay: int, final_arrivals: int = 2):
    """`fork_wait_exit_rows` with the kernel's run delay of main read at its switch-outs: 0 (1
    arrival) at 21 and `final_delay` at its end, 71."""
    rows = fork_wait_exit_rows()
    rows.insert(6, (21, 0, 100, Kind.RUN_DELAY, 100, 0, 1))
    rows.append((71, 0, 100, Kind.RUN_DELAY, 100, final_delay, final_arrivals))
    return ev(rows)


def test_the_wait_before_a_switch_in_is_the_kernels_run_delay():
    # the tracepoints say 2 ns of run queue (50 -> 52); the kernel says 5
    tr = build_trace(_program(5), root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 21, R), (21, 47, SY), (47, 52, RN), (52, 71, R)]
    s = tr.states
    wait = (s.tid == 100) & (s.state == SY)
    assert s.addr[wait].tolist() == [0xABC] and s.waker[wait].tolist() == [101]  # still the futex, woken by 101
    assert tr.meta["runnable_reconciled_ns"] == {"100": [3, 0, 0]}
    assert tr.meta["n_events"] == 13  # the RUN_DELAY records are not scheduler events


def test_a_shorter_kernel_wait_gives_the_rest_back_to_the_blocked_state():
    tr = build_trace(_program(1), root_pids=[100])
    assert intervals(tr, 100) == [(0, 21, R), (21, 51, SY), (51, 52, RN), (52, 71, R)]
    assert tr.meta["runnable_reconciled_ns"] == {"100": [0, 1, 0]}


def test_a_wait_longer_than_the_gap_fills_it_and_the_rest_is_counted():
    tr = build_trace(_program(40), root_pids=[100])
    assert intervals(tr, 100) == [(0, 21, R), (21, 52, RN), (52, 71, R)]
    assert tr.meta["runnable_reconciled_ns"] == {"100": [29, 0, 9]}


def test_a_span_with_an_unreported_switch_in_is_left_alone():
    tr = build_trace(_program(5, final_arrivals=3), root_pids=[100])
    assert intervals(tr, 100) == [(0, 21, R), (21, 50, SY), (50, 52, RN), (52, 71, R)]
    assert tr.meta["runnable_reconciled_ns"] == {}


def _child(first_delay: int, arrivals: int = 1):
    """Main (100) forks a worker (101) at 10 and wakes it at 15; the worker runs on cpu 1 from 25
    to its exit at 61, where the kernel reads its run delay `first_delay` after `arrivals`."""
    return ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (10, 0, 100, Kind.FORK, 100, 101, 0),
        (15, 0, 100, Kind.WAKEUP_NEW, 101, 1, 0),
        (25, 1, 0, Kind.SWITCH, 0, 101, 0),
        (60, 1, 101, Kind.EXIT, 101, 0, 0),
        (61, 1, 101, Kind.SWITCH, 101, 0, 16),
        (61, 1, 101, Kind.RUN_DELAY, 101, first_delay, arrivals),
        (70, 0, 100, Kind.EXIT, 100, 0, 0),
        (71, 0, 100, Kind.SWITCH, 100, 0, 32),
    ])


def test_a_new_threads_first_wait_is_its_first_report():
    # queued on an idle vCPU that woke 10 ns later, by the trace; by the kernel's clock, 4 ns:
    # the thread's life begins when the kernel queued it (as a wait after a sleep gives the rest
    # back to the sleep)
    tr = build_trace(_child(4), root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(21, 25, RN), (25, 61, R)]
    assert int(tr.threads.start_ns[tr.threads.tid.tolist().index(101)]) == 21
    assert tr.meta["runnable_reconciled_ns"] == {"101": [0, 6, 0]}
    assert intervals(build_trace(_child(0), root_pids=[100]), 101) == [(25, 61, R)]


def test_a_first_wait_longer_than_the_trace_says_is_counted_not_moved():
    tr = build_trace(_child(12), root_pids=[100])
    assert intervals(tr, 101) == [(15, 25, RN), (25, 61, R)]
    assert tr.meta["runnable_reconciled_ns"] == {"101": [0, 0, 2]}


def test_a_first_report_after_two_arrivals_leaves_the_first_wait():
    tr = build_trace(_child(4, arrivals=2), root_pids=[100])
    assert intervals(tr, 101) == [(15, 25, RN), (25, 61, R)]
    assert tr.meta["runnable_reconciled_ns"] == {}


def test_runnable_inside_a_run_the_thread_never_left_is_uncharged_time():
    # one arrival between the switch-outs at 10 and 40: the thread ran from 22 to 40 without leaving
    # its CPU, so the stretch no runtime report charged (30-31) is no wait: steal or interrupts
    rows = [(0, 10, R), (10, 20, SY), (20, 22, RN), (22, 30, R), (30, 31, RN), (31, 40, R)]
    a, b, s = (np.array(x, np.int64) for x in zip(*rows, strict=True))
    table = StateTable(tid=np.full(len(a), 7, np.int32), start_ns=a, end_ns=b, state=s.astype(np.uint8),
                       cpu=np.where(s == R, 0, -1).astype(np.int16), addr=np.zeros(len(a), np.uint64),
                       waker=np.full(len(a), -1, np.int32), repaired=np.zeros(len(a), bool))

    def reports(arrivals):
        return RawEvents.from_rows([(10, 0, 7, 7, int(Kind.RUN_DELAY), 7, 0, 1, -1, -1),
                                    (40, 0, 7, 7, int(Kind.RUN_DELAY), 7, 2, arrivals, -1, -1)])
    new, changed = reconcile_runnable(table, reports(2))
    assert new.state.tolist() == [R, SY, RN, R, int(State.UNKNOWN), R] and changed == {"7": [0, 1, 0]}
    new, changed = reconcile_runnable(table, reports(3))  # a switch-in no tracepoint reported: left alone
    assert new.state.tolist() == [R, SY, RN, R, RN, R] and changed == {}


@st.composite
def timelines(draw, slivers=False):
    """One thread: runs separated by off-CPU gaps (blocked then RUNNABLE, or RUNNABLE only), the
    kernel's run delay read at each run's end (each gap's wait drawn independently of the trace's).
    With `slivers`, a run may hold a RUNNABLE stretch no runtime report charged."""
    n = draw(st.integers(2, 8))
    t, rows, outs, delays, arrivals = 0, [], [], [0], [1]
    for k in range(n):
        run = draw(st.integers(1, 50))
        if slivers and run >= 3 and draw(st.booleans()):
            x = draw(st.integers(1, run - 2))
            y = draw(st.integers(x + 1, run - 1))
            rows += [(t, t + x, R), (t + x, t + y, RN), (t + y, t + run, R)]
        else:
            rows.append((t, t + run, R))
        t += run
        outs.append(t)
        if k == n - 1:
            break
        blocked, queued = draw(st.integers(0, 40)), draw(st.integers(0, 40))
        if blocked + queued == 0:
            queued = 1
        if blocked:
            rows.append((t, t + blocked, SY))
        if queued:
            rows.append((t + blocked, t + blocked + queued, RN))
        t += blocked + queued
        delays.append(delays[-1] + draw(st.integers(0, 90)))
        arrivals.append(arrivals[-1] + draw(st.sampled_from([1, 1, 1, 2])))
    a, b, s = (np.array(x, np.int64) for x in zip(*rows, strict=True))
    table = StateTable(tid=np.full(len(a), 7, np.int32), start_ns=a, end_ns=b, state=s.astype(np.uint8),
                       cpu=np.where(s == R, 0, -1).astype(np.int16), addr=np.zeros(len(a), np.uint64),
                       waker=np.full(len(a), -1, np.int32), repaired=np.zeros(len(a), bool))
    m = len(outs)
    rd = RawEvents.from_rows([(outs[i], 0, 7, 7, int(Kind.RUN_DELAY), 7, delays[i], arrivals[i], -1, -1)
                              for i in range(m)])
    return table, rd, np.array(outs), np.array(delays), np.array(arrivals)


@settings(max_examples=200, deadline=None)
@given(timelines())
def test_each_reported_wait_is_placed_whole_and_nothing_else_moves(case):
    table, rd, outs, delays, arrivals = case
    new, changed = reconcile_runnable(table, rd)
    # still one tiling of the same lifetime, with the same runs
    assert new.start_ns[0] == table.start_ns[0] and new.end_ns[-1] == table.end_ns[-1]
    assert np.all(new.start_ns[1:] == new.end_ns[:-1])
    run_old, run_new = table.state == R, new.state == R
    assert int(table.duration_ns[run_old].sum()) == int(new.duration_ns[run_new].sum())
    runs = np.flatnonzero(run_old)
    for k in range(1, len(outs)):
        ga, gb = table.end_ns[runs[k - 1]], table.start_ns[runs[k]]
        inside = (new.start_ns >= ga) & (new.end_ns <= gb)
        queued = int(new.duration_ns[inside & (new.state == RN)].sum())
        old_inside = (table.start_ns >= ga) & (table.end_ns <= gb)
        preempted = not np.any(old_inside & (table.state == SY))
        if arrivals[k] - arrivals[k - 1] == 1:
            want = min(int(delays[k] - delays[k - 1]), int(gb - ga))
            if preempted:  # queued from its switch-out on: a shorter figure is clock offsets, it stays queued
                want = int(gb - ga)
            assert queued == want
            if want:  # the wait is the gap's last part
                assert new.state[inside][-1] == RN
        else:
            assert queued == int(table.duration_ns[old_inside & (table.state == RN)].sum())
    net = int(new.duration_ns[new.state == RN].sum()) - int(table.duration_ns[table.state == RN].sum())
    made, unmade, _ = changed.get("7", [0, 0, 0])
    assert net == made - unmade


def _retid(table: StateTable, rd: RawEvents, tid: int, shift: int) -> tuple[StateTable, RawEvents]:
    cols = table.columns()
    cols = dict(cols, tid=np.full(len(table), tid, np.int32), start_ns=cols["start_ns"] + shift,
                end_ns=cols["end_ns"] + shift)
    rows = [(int(t) + shift, 0, tid, tid, int(Kind.RUN_DELAY), tid, int(d), int(p), -1, -1)
            for t, d, p in zip(rd.time, rd.arg1, rd.arg2, strict=True)]
    return StateTable(**cols), RawEvents.from_rows(rows)


@settings(max_examples=200, deadline=None)
@given(timelines(slivers=True), timelines(slivers=True), st.integers(0, 30), st.integers(1, 9), st.booleans())
def test_threads_recut_a_piece_at_a_time_equal_the_whole_recut(one, two, shift, rows, blocked_waker):
    """Two threads (one of them with no reports, or both) re-cut `rows` rows at a time: the table
    and the counts of the re-cut of each thread whole (tests/unit/run_delay_reference.py)."""
    from .run_delay_reference import reconcile_runnable_whole

    a, rd_a = _retid(one[0], one[1], 7, 0)
    b, rd_b = _retid(two[0], two[1], 9, shift)
    if blocked_waker:  # wakers and futex words on the blocked rows, which the re-cut moves
        cols = b.columns()
        sy = cols["state"] == SY
        b = StateTable(**dict(cols, waker=np.where(sy, 7, -1).astype(np.int32),
                              addr=np.where(sy, 0xABC, 0).astype(np.uint64)))
    table = StateTable.concat([a, b])
    both = concat_events([rd_a, rd_b])
    # the reports as the eBPF collector's come (each thread's in one run, in time order: read in
    # place, whatever the threads' order), and in any order (sorted first)
    for rd in (RawEvents.from_rows([]), rd_a, both, concat_events([rd_b, rd_a]), both.take(np.arange(len(both))[::-1])):
        got, got_changed = reconcile_runnable(table, rd, piece_rows=rows)
        want, want_changed = reconcile_runnable_whole(table, rd)
        assert got_changed == want_changed
        for k, col in want.columns().items():
            assert got.columns()[k].dtype == col.dtype and np.array_equal(got.columns()[k], col), k


def _long_thread(rng, tid: int, runs: int) -> tuple[StateTable, list]:
    """One thread of `runs` runs with off-CPU gaps (blocked then RUNNABLE, or RUNNABLE only) and its
    run-delay reports, as `timelines` draws them, long enough to span many memory pages."""
    t, rows, reports, delay, arrivals = 0, [], [], 0, 1
    for k in range(runs):
        run = int(rng.integers(1, 50))
        rows.append((t, t + run, R))
        t += run
        reports.append((t, 0, tid, tid, int(Kind.RUN_DELAY), tid, delay, arrivals, -1, -1))
        if k == runs - 1:
            break
        blocked, queued = int(rng.integers(0, 40)), int(rng.integers(0, 40)) or 1
        if blocked:
            rows.append((t, t + blocked, SY))
        rows.append((t + blocked, t + blocked + queued, RN))
        t += blocked + queued
        delay += int(rng.integers(0, 90))
        arrivals += int(rng.choice([1, 1, 1, 2]))
    a, b, s = (np.array(x, np.int64) for x in zip(*rows, strict=True))
    sy = s == SY
    table = StateTable(tid=np.full(len(a), tid, np.int32), start_ns=a, end_ns=b, state=s.astype(np.uint8),
                       cpu=np.where(s == R, 0, -1).astype(np.int16), addr=np.where(sy, 0xABC, 0).astype(np.uint64),
                       waker=np.where(sy, 1, -1).astype(np.int32), repaired=np.zeros(len(a), bool))
    return table, reports


def _owned_copy(table: StateTable) -> StateTable:
    return StateTable(**{k: v.copy() for k, v in table.columns().items()})


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5000), st.integers(1, 3000))
def test_giving_the_source_back_as_it_is_read_changes_nothing(seed, release_every, piece_rows):
    """`reconcile_runnable(release=True)` and `_merge_adjacent(release=True)` hand the pages of the
    table they read back to the system as they go (its rows then read as zeros): same tables as
    without, and the source's early pages really given back."""
    from scalestack.trace import builder

    rng = np.random.default_rng(seed)
    parts = [_long_thread(rng, tid, int(rng.integers(1500, 4000))) for tid in (5, 8, 11)]
    table = StateTable.concat([p[0] for p in parts])
    rd = RawEvents.from_rows([r for p in parts for r in p[1]])
    saved = builder.RELEASE_EVERY
    builder.RELEASE_EVERY = release_every
    try:
        want, want_changed = reconcile_runnable(table, rd, piece_rows=piece_rows)
        source = _owned_copy(table)
        got, got_changed = reconcile_runnable(source, rd, piece_rows=piece_rows, release=True)
        assert got_changed == want_changed
        for k, col in want.columns().items():
            assert np.array_equal(got.columns()[k], col), k
        assert source.end_ns[:len(source) // 2].min() == 0  # given back: zeros (every true end is > 0)
        # a join: each blocked row of the result split in two (the first half with no waker), joined again
        idx = np.repeat(np.arange(len(want)), np.where(want.state == SY, 2, 1))
        cols = {k: v[idx] for k, v in want.columns().items()}
        second = np.r_[False, idx[1:] == idx[:-1]]
        first = np.r_[second[1:], False]
        mid = (cols["start_ns"] + cols["end_ns"]) // 2
        cols["end_ns"] = np.where(first, mid, cols["end_ns"])
        cols["start_ns"] = np.where(second, mid, cols["start_ns"])
        cols["waker"] = np.where(first, -1, cols["waker"]).astype(np.int32)
        split = StateTable(**cols)
        joined = builder._merge_adjacent(split)
        source = _owned_copy(split)
        got = builder._merge_adjacent(source, release=True)
        for k, col in joined.columns().items():
            assert np.array_equal(got.columns()[k], col), k
        assert len(joined) < len(split) and source.end_ns[:len(source) // 2].min() == 0
    finally:
        builder.RELEASE_EVERY = saved


@settings(max_examples=200, deadline=None)
@given(timelines(), st.integers(1, 40), st.integers(0, 60))
def test_a_born_threads_first_wait_is_sized_and_nothing_after_it_moves(case, queued, first_delay):
    """The timeline's thread born `queued` ns before its first run, the kernel's first report
    saying `first_delay`: its life begins at most that long before the run, and the rest of the
    re-cut is that of the timeline alone."""
    table, rd, *_ = case
    alone, alone_changed = reconcile_runnable(table, rd)
    cols = {k: np.r_[v[:1], v] for k, v in table.columns().items()}
    cols["start_ns"][0], cols["end_ns"][0], cols["state"][0] = -queued, 0, RN
    rd_born = RawEvents.from_rows([(int(t), 0, 7, 7, int(Kind.RUN_DELAY), 7, int(d) + first_delay, int(p), -1, -1)
                                   for t, d, p in zip(rd.time, rd.arg1, rd.arg2, strict=True)])
    new, changed = reconcile_runnable(StateTable(**cols), rd_born)
    wait = min(queued, first_delay)
    if wait:
        assert (new.start_ns[0], new.end_ns[0], new.state[0]) == (-wait, 0, RN)
    rest = {k: v[1 if wait else 0:] for k, v in new.columns().items()}
    assert all(np.array_equal(rest[k], v) for k, v in alone.columns().items())
    _, unmade, unplaced = changed.get("7", [0, 0, 0])
    _, alone_unmade, alone_unplaced = alone_changed.get("7", [0, 0, 0])
    assert unmade - alone_unmade == queued - wait
    assert unplaced - alone_unplaced == first_delay - wait
