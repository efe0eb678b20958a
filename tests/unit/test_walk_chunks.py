"""The state builder's walk carries its per-thread and per-CPU state across chunks of events: cut
anywhere, the rows and counters are those of one pass."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace import State
from scalestack.trace.builder import (
    _WAIT_OPS_MASK,
    _walk,
    _walk_chunk,
    _walk_end,
    _walk_result,
    _walk_start,
    build_trace,
)
from scalestack.trace.event_facts import traced_tids
from scalestack.trace.events import Kind

from .test_state_builder import ev, event_streams


def walk_inputs(events):
    events = events.sorted()
    tids, _ = traced_tids(events, [100])
    slot_of = np.full(int(tids.max()) + 1, -1, np.int32)
    slot_of[tids] = np.arange(len(tids), dtype=np.int32)
    born_at = np.full(len(tids), -1, np.int64)
    fork = np.flatnonzero(events.kind == Kind.FORK)
    for i in fork[::-1]:
        child = int(events.arg1[i])
        if child < len(slot_of) and slot_of[child] >= 0:
            born_at[slot_of[child]] = events.time[i]
    cols = (events.time, events.cpu, events.tid, events.kind, events.arg0, events.arg1, events.arg2)
    return cols, slot_of, born_at, len(tids), int(events.cpu.max()) + 1


def chunked(cols, slot_of, born_at, n_slots, n_cpus, cuts):
    time = cols[0]
    carry = _walk_start(n_slots, n_cpus, born_at, time[0])
    bounds = [0, *sorted(cuts), len(time)]
    rows = [_walk_chunk(*(c[a:b] for c in cols), slot_of, n_slots, n_cpus, _WAIT_OPS_MASK, int(time[0]) - 1, carry)
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    rows.append(_walk_end(time[-1], n_slots, carry))
    return _walk_result(tuple(np.concatenate(col) for col in zip(*rows, strict=True)), carry)


@settings(max_examples=150, deadline=None)
@given(event_streams(), st.data())
def test_random_chunks_give_the_rows_and_counters_of_one_pass(events, data):
    cols, slot_of, born_at, n_slots, n_cpus = walk_inputs(events)
    n = len(cols[0])
    cuts = data.draw(st.lists(st.integers(0, n), max_size=6))
    whole = _walk(*cols, slot_of, born_at, n_slots, n_cpus, _WAIT_OPS_MASK, int(cols[0][0]) - 1)
    parts = chunked(cols, slot_of, born_at, n_slots, n_cpus, cuts)
    assert len(whole) == len(parts)
    for a, b in zip(whole[1:], parts[1:], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(whole[0], parts[0], strict=True):  # the rows' columns
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_a_switch_storm_outgrows_the_first_output_block():
    """Two traced threads preempting each other on one CPU every 10 ns: every switch ends two
    intervals, twice as many rows as events, past the walk's first output block."""
    rows = [(0, 0, 0, Kind.SWITCH, 0, 100, 0), (1, 0, 100, Kind.FORK, 100, 101, 0)]
    cur, other = 100, 101
    for k in range(1, 400):
        rows.append((10 * k, 0, cur, Kind.SWITCH, cur, other, 0))
        cur, other = other, cur
    tr = build_trace(ev(rows), root_pids=[100])
    s = tr.states
    mine = s.tid == 100
    assert mine.sum() >= 399
    run = s.state[mine] == int(State.RUNNING)
    assert np.all(run[1:] != run[:-1])  # RUNNING and RUNNABLE alternate
    assert np.all((s.end_ns[mine] - s.start_ns[mine])[1:-1] == 10)
    cols, slot_of, born_at, n_slots, n_cpus = walk_inputs(ev(rows))
    whole = _walk(*cols, slot_of, born_at, n_slots, n_cpus, _WAIT_OPS_MASK, -1)
    assert len(whole[0][0]) > len(cols[0]) + 2 * n_slots + 64  # grown
    parts = chunked(cols, slot_of, born_at, n_slots, n_cpus, [1, 150, 151, 399])
    for a, b in zip(whole[0], parts[0], strict=True):
        np.testing.assert_array_equal(a, b)
