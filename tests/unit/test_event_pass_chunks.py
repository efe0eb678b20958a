"""The state builder's switch spans, thread names and first pids carry their state across chunks
of time-sorted events: cut anywhere (between events of one instant too), the answers are those of
one pass, and the carries hold per-thread and per-CPU state only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace.builder import (
    _first_pids,
    _name_changes,
    _name_instant,
    _names_chunk,
    _names_end,
    _names_start,
    _pids_chunk,
    _pids_start,
)
from scalestack.trace.event_facts import traced_tids
from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.lookup import EventIndex
from scalestack.trace.switch_spans import _spans, _spans_chunk, _spans_end, _spans_out, _spans_start

from .test_builder_event_passes import COMMS, ref_names, ref_pids, stream
from .test_state_builder import ev, event_streams

DATA = Path(__file__).resolve().parents[1] / "data"
NAMING = np.zeros(256, np.bool_)  # the kinds `_thread_names` reads names from
NAMING[[Kind.SWITCH, Kind.FORK, Kind.RENAME, Kind.TASK_COMM, Kind.WAKEUP, Kind.WAKEUP_NEW, Kind.STAT_RUNTIME,
        Kind.MIGRATE]] = True


def barrier():
    events = read_perf_data(DATA / "barrier.perf.data").sorted()
    return events, traced_tids(events, comm="bi")[0]


def slots(tids):
    slot_of = np.full(int(tids.max(initial=0)) + 1, -1, np.int64)
    slot_of[tids] = np.arange(len(tids))
    return slot_of


def pieces(n, cuts):
    """The [a, b) of the chunks the cuts make (repeated cuts: empty chunks)."""
    bounds = [0, *sorted(cuts), n]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def draw_cuts(data, time):
    """Cuts anywhere, and some between two events of one instant when there are such."""
    n = len(time)
    cuts = data.draw(st.lists(st.integers(0, n), max_size=6))
    ties = [i for i in range(1, n) if time[i] == time[i - 1]]
    if ties:
        cuts += data.draw(st.lists(st.sampled_from(ties), max_size=3))
    return cuts


# --- switch spans ---------------------------------------------------------------------------

def span_inputs(events, tids):
    n_cpus = int(events.cpu.max(initial=0)) + 1
    return (events.time, events.cpu, events.kind, events.tid, events.arg0, events.arg1), slots(tids), len(tids), n_cpus


def spans_in_chunks(cols, slot_of, n_slots, n_cpus, t_end, cuts):
    """`_spans` by chunks; each chunk's spans written into room for twice as many as `_spans_out`
    leaves, to check that bound without writing past it."""
    carry = _spans_start(n_slots, n_cpus)
    parts = []
    for a, b in pieces(len(cols[0]), cuts):
        out = _spans_out(2 * (b - a) + n_slots, n_slots)
        m = _spans_chunk(*(c[a:b] for c in cols), slot_of, n_slots, n_cpus, carry, out, 0)
        assert m <= len(_spans_out(b - a, n_slots)[0])
        parts.append(tuple(col[:m] for col in out))
    out = _spans_out(0, n_slots)
    m = _spans_end(t_end, n_slots, carry, out, 0)
    assert m <= n_slots
    parts.append(tuple(col[:m] for col in out))
    return tuple(np.concatenate(col) for col in zip(*parts, strict=True)), carry[-1]


def assert_same_spans(whole, parts):
    for a, b in zip(whole[0], parts[0], strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(whole[1], parts[1])


@settings(max_examples=150, deadline=None)
@given(event_streams(), st.data())
def test_spans_cut_anywhere_are_those_of_one_pass(events, data):
    events = events.sorted()
    cols, slot_of, n_slots, n_cpus = span_inputs(events, traced_tids(events, [100])[0])
    t_end = int(events.time[-1]) + data.draw(st.integers(0, 3))
    whole = _spans(*cols, slot_of, n_slots, n_cpus, t_end)
    assert_same_spans(whole, spans_in_chunks(cols, slot_of, n_slots, n_cpus, t_end, draw_cuts(data, events.time)))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_spans_of_a_recording_cut_anywhere_are_those_of_one_pass(data):
    events, tids = barrier()
    cols, slot_of, n_slots, n_cpus = span_inputs(events, tids)
    whole = _spans(*cols, slot_of, n_slots, n_cpus, int(events.time[-1]))
    assert len(whole[0][0]) > 0
    parts = spans_in_chunks(cols, slot_of, n_slots, n_cpus, int(events.time[-1]), draw_cuts(data, events.time))
    assert_same_spans(whole, parts)


def test_a_span_open_across_a_cut_ends_at_its_switch_out():
    """Thread 100 switched in at 10 (first chunk), out at 30 (second chunk); 101 is still in at
    the end: the carry holds 100's switch-in, the end closes 101's span."""
    e = ev([(10, 0, 0, Kind.SWITCH, 0, 100, 0), (20, 1, 0, Kind.SWITCH, 0, 101, 0),
            (30, 0, 100, Kind.SWITCH, 100, 0, 1)])
    cols, slot_of, n_slots, n_cpus = span_inputs(e, np.array([100, 101]))
    carry = _spans_start(n_slots, n_cpus)
    out = _spans_out(3, n_slots)
    m = _spans_chunk(*(c[:1] for c in cols), slot_of, n_slots, n_cpus, carry, out, 0)
    assert m == 0 and carry[0].tolist() == [10, -1] and carry[8].tolist() == [0, -1]  # in_t; the CPUs' slots
    m = _spans_chunk(*(c[1:] for c in cols), slot_of, n_slots, n_cpus, carry, out, m)
    m = _spans_end(40, n_slots, carry, out, m)
    assert [col[:m].tolist() for col in out] == [[0, 1], [10, 20], [30, 40], [False, False]]
    assert carry[-1][:, 0].tolist() == [1, 0]  # complete spans: 100's; 101's was closed by the end


def test_spans_out_has_room_for_two_spans_an_event_and_two_a_slot():
    out = _spans_out(10, 3)
    assert [len(c) for c in out] == [30] * 4 and [c.dtype for c in out] == [np.int32, np.int64, np.int64, np.bool_]


def test_the_spans_carry_does_not_grow_with_the_events():
    """Per slot and per CPU: the same size after 10 events as after 10^4."""
    sizes = []
    for n in (10, 10_000):
        rows = [(0, 0, 0, Kind.SWITCH, 0, 100, 0)]
        rows += [(k, k % 2, 100, Kind.SWITCH, 100 + (k - 1) % 2, 100 + k % 2, 0) for k in range(1, n)]
        e = ev(rows)
        cols, slot_of, n_slots, n_cpus = span_inputs(e, np.array([100, 101]))
        carry = _spans_start(n_slots, n_cpus)
        _spans_chunk(*cols, slot_of, n_slots, n_cpus, carry, _spans_out(n, n_slots), 0)
        sizes.append(sum(a.nbytes for a in carry))
    assert sizes[0] == sizes[1]


# --- thread names ---------------------------------------------------------------------------

def name_cols(events):
    return events.time, events.kind, events.arg0, events.arg1, events.comm0, events.comm1


def names_in_chunks(cols, slot_of, cuts):
    carry = _names_start(slot_of)
    for a, b in pieces(len(cols[0]), cuts):
        carry = _names_chunk(*(c[a:b] for c in cols), NAMING, slot_of, carry)
    return _names_end(carry)


def assert_same_names(whole, parts):
    for a, b in zip(whole, parts, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@settings(max_examples=150, deadline=None)
@given(event_streams(), st.data())
def test_names_cut_anywhere_are_those_of_one_pass(events, data):
    events = events.sorted()
    slot_of = slots(traced_tids(events, [100])[0])
    cols = name_cols(events)
    whole = _name_changes(*cols, NAMING, slot_of)
    assert_same_names(whole, names_in_chunks(cols, slot_of, draw_cuts(data, events.time)))


@settings(max_examples=200, deadline=None)
@given(stream(), st.lists(st.sampled_from([100, 101, 102, 200, 201, 5]), min_size=1, unique=True), st.data())
def test_names_of_many_statements_an_instant_cut_anywhere_are_those_of_one_pass(events, tids, data):
    """Streams with many events at one instant: cuts inside an instant hold its statements."""
    tids = np.array(sorted(tids), np.int64)
    slot_of = slots(tids)
    cols = name_cols(events)
    slot, t, c = names_in_chunks(cols, slot_of, draw_cuts(data, events.time))
    assert_same_names(_name_changes(*cols, NAMING, slot_of), (slot, t, c))
    assert (tids[slot].tolist(), t.tolist(), [events.comms[i] for i in c]) == ref_names(events, tids)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_names_of_a_recording_cut_anywhere_are_those_of_one_pass(data):
    events, tids = barrier()
    slot_of = slots(tids)
    cols = name_cols(events)
    whole = _name_changes(*cols, NAMING, slot_of)
    assert len(whole[0]) > 0
    assert_same_names(whole, names_in_chunks(cols, slot_of, draw_cuts(data, events.time)))


def test_an_instant_cut_in_two_is_settled_as_one():
    """101 is named at 5 by a rename ("other", rank 3), then by a switch ("app", rank 0): cut
    between them, the rename is held over the cut and still settles after the switch, so 101 is
    renamed once, to "other"."""
    rows = [(1, 0, 100, 100, int(Kind.SWITCH), 100, 101, 0, 0, 0),
            (5, 0, 101, 100, int(Kind.RENAME), 101, 0, 0, 1, -1),
            (5, 0, 101, 100, int(Kind.SWITCH), 101, 100, 0, 0, 0)]
    e = RawEvents.from_rows(rows, comms=["app", "other"])
    slot_of = slots(np.array([100, 101]))
    cols = name_cols(e)
    carry = _names_chunk(*(c[:2] for c in cols), NAMING, slot_of, _names_start(slot_of))
    assert carry[3].tolist() == [1, 5, 2]  # the rename held at 5; two changes at 1
    slot, t, c = _names_end(_names_chunk(*(c[2:] for c in cols), NAMING, slot_of, carry))
    assert (slot.tolist(), t.tolist(), c.tolist()) == ([0, 1, 1], [1, 1, 5], [0, 0, 1])
    assert_same_names(_name_changes(*cols, NAMING, slot_of), (slot, t, c))


def test_names_buffers_grow_across_chunks():
    """An instant of 300 statements and 4000 changes, cut inside the instant and between changes:
    the buffers outgrow their first room in the carry and the answer is the masks' statement."""
    rows = [(5, 0, 100, 100, int(Kind.RENAME if k % 3 else Kind.SWITCH), 100 + k % 2, 101 - k % 2, 0, k % 2, 1 - k % 2)
            for k in range(300)]
    rows += [(10 + k, 0, 101, 100, int(Kind.RENAME), 100 + k % 2, 0, 0, (k // 2) % 2, -1) for k in range(8000)]
    e = RawEvents.from_rows(rows, comms=COMMS)
    tids = np.array([100, 101], np.int64)
    slot_of = slots(tids)
    cols = name_cols(e)
    first = _names_start(slot_of)
    carry = _names_chunk(*(c[:150] for c in cols), NAMING, slot_of, first)
    assert carry[1].shape[0] > first[1].shape[0] and carry[3][0] > 64  # held grew
    slot, t, c = names_in_chunks(cols, slot_of, [150, 299, 300, 4000])
    assert len(slot) > 4000
    assert (tids[slot].tolist(), t.tolist(), [e.comms[i] for i in c]) == ref_names(e, tids)


def test_name_instant_writes_the_changes_in_slot_then_rank_order():
    """Held (slot, comm, rank): slot 1's rank-3 statement came first, then slot 0's, then slot 1's
    rank 0; slot 0 already had comm 7, so only slot 1's two statements change a name."""
    held = np.array([[1, 9, 3], [0, 7, 5], [1, 8, 0], [0, 0, 0]], np.int64)
    last_c = np.array([7, -1], np.int64)
    out = np.zeros((4, 3), np.int64)
    m = _name_instant(last_c, held, out, 3, 42, 1)
    assert m == 3 and out[1:3].tolist() == [[1, 42, 8], [1, 42, 9]] and last_c.tolist() == [7, 9]


# --- first pids -----------------------------------------------------------------------------

def pid_inputs(events, tids):
    side_band = EventIndex(events).rows(Kind.TASK_COMM, Kind.TASK_FORK)
    return (events.tid, events.pid, events.arg0, events.arg1), side_band, slots(tids), len(tids)


def pids_in_chunks(cols, side_band, slot_of, n_slots, cuts):
    """Each chunk with its own side-band rows, relative to the chunk."""
    carry = _pids_start(n_slots)
    for a, b in pieces(len(cols[0]), cuts):
        sb = side_band[(side_band >= a) & (side_band < b)] - a
        _pids_chunk(*(c[a:b] for c in cols), sb, slot_of, carry)
    return carry[0]


@settings(max_examples=300, deadline=None)
@given(stream(), st.lists(st.sampled_from([100, 101, 102, 200, 201, 5]), min_size=1, unique=True), st.data())
def test_pids_cut_anywhere_are_those_of_one_pass(events, tids, data):
    """Streams with side-band records and events without a pid, any of them first."""
    tids = np.array(sorted(tids), np.int64)
    cols, side_band, slot_of, n_slots = pid_inputs(events, tids)
    got = pids_in_chunks(cols, side_band, slot_of, n_slots, draw_cuts(data, events.time))
    np.testing.assert_array_equal(got, _first_pids(*cols, side_band, slot_of, n_slots))
    np.testing.assert_array_equal(got, ref_pids(events, tids))


@settings(max_examples=100, deadline=None)
@given(event_streams(), st.data())
def test_pids_of_scheduler_streams_cut_anywhere_are_those_of_one_pass(events, data):
    events = events.sorted()
    tids = traced_tids(events, [100])[0]
    cols, side_band, slot_of, n_slots = pid_inputs(events, tids)
    got = pids_in_chunks(cols, side_band, slot_of, n_slots, draw_cuts(data, events.time))
    np.testing.assert_array_equal(got, _first_pids(*cols, side_band, slot_of, n_slots))


@pytest.mark.parametrize("cuts", [[], [1], [10, 40], [0, 0, 95, 96]])
def test_pids_of_a_recording_in_chunks_are_those_of_one_pass(cuts):
    events, tids = barrier()
    cols, side_band, slot_of, n_slots = pid_inputs(events, tids)
    whole = _first_pids(*cols, side_band, slot_of, n_slots)
    assert np.all(whole > 0)
    np.testing.assert_array_equal(pids_in_chunks(cols, side_band, slot_of, n_slots, cuts), whole)


def test_an_own_event_wins_over_side_band_records_in_any_chunk():
    """Thread 101: side-band pid 7 in chunk 1, its own event's pid 100 in chunk 2, side-band pid 8
    in chunk 3. Thread 102: own pid 100 in chunk 1, side-band 9 in chunk 2. Thread 103: side-band
    only (4). Once all have their own pid, later chunks change nothing."""
    tid = np.array([0, 102, 0, 101, 0, 0], np.int64)
    pid = np.array([0, 100, 0, 100, 0, 0], np.int64)
    arg0 = np.array([101, 0, 102, 0, 101, 103], np.int64)
    arg1 = np.array([7, 0, 9, 0, 8, 4], np.int64)
    slot_of = slots(np.array([101, 102, 103]))
    carry = _pids_start(3)
    _pids_chunk(tid[:2], pid[:2], arg0[:2], arg1[:2], np.array([0]), slot_of, carry)
    assert carry[0].tolist() == [7, 100, -1] and carry[3].tolist() == [2]
    _pids_chunk(tid[2:4], pid[2:4], arg0[2:4], arg1[2:4], np.array([0]), slot_of, carry)
    _pids_chunk(tid[4:], pid[4:], arg0[4:], arg1[4:], np.array([0, 1]), slot_of, carry)
    assert carry[0].tolist() == [100, 100, 4] and carry[3].tolist() == [1]
    carry = _pids_start(1)
    _pids_chunk(tid[3:4], pid[3:4], arg0[3:4], arg1[3:4], np.zeros(0, np.int64), slots(np.array([101])), carry)
    _pids_chunk(tid, pid, arg0, arg1, np.array([0, 4]), slots(np.array([101])), carry)  # all done: ignored
    assert carry[0].tolist() == [100] and carry[3].tolist() == [0]
