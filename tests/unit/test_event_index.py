"""The builder's event index (rows by kind) and the reference by-CPU buckets (`cpu_buckets`) against the
masks and sorts they replace."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.lookup import EventIndex

from .cpu_buckets import cpu_buckets

KINDS = [int(k) for k in Kind]


@st.composite
def events(draw):
    n = draw(st.integers(0, 60))
    rows = [(t, draw(st.integers(-1, 3)), draw(st.integers(0, 5)), 1, draw(st.sampled_from(KINDS)),
             draw(st.integers(0, 5)), draw(st.integers(0, 5)), 0, -1, -1) for t in range(n)]
    return RawEvents.from_rows(rows) if rows else RawEvents.empty()


@settings(max_examples=300, deadline=None)
@given(events(), st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True))
def test_rows_by_kind_and_cpu_are_the_masks(ev, kinds):
    ix = EventIndex(ev)
    want = np.flatnonzero(np.isin(ev.kind, kinds))
    np.testing.assert_array_equal(ix.rows(*kinds), want)
    assert ix.count(*kinds) == len(want)
    off, rows, s_off, s_rows = cpu_buckets(ev)
    for c in range(max(int(ev.cpu.max(initial=0)) + 1, 1)):
        np.testing.assert_array_equal(rows[off[c]:off[c + 1]], np.flatnonzero(ev.cpu == c))
        np.testing.assert_array_equal(s_rows[s_off[c]:s_off[c + 1]],
                                      np.flatnonzero((ev.cpu == c) & (ev.kind == Kind.SWITCH)))
    assert off[-1] == np.count_nonzero(ev.cpu >= 0)


def test_worked_example():
    ev = RawEvents.from_rows([(0, 1, 5, 1, int(Kind.SWITCH), 5, 6, 0, -1, -1),
                              (1, 0, 6, 1, int(Kind.WAKEUP), 5, 0, 0, -1, -1),
                              (2, -1, 6, 1, int(Kind.TASK_COMM), 5, 0, 0, -1, -1),
                              (3, 1, 6, 1, int(Kind.SWITCH), 6, 0, 0, -1, -1)])
    ix = EventIndex(ev)
    assert ix.rows(Kind.SWITCH).tolist() == [0, 3] and ix.rows(Kind.TASK_COMM, Kind.WAKEUP).tolist() == [1, 2]
    off, rows, s_off, s_rows = cpu_buckets(ev)
    assert off.tolist() == [0, 1, 3] and rows.tolist() == [1, 0, 3]
    assert s_off.tolist() == [0, 0, 2] and s_rows.tolist() == [0, 3]


@settings(max_examples=200, deadline=None)
@given(events(), st.booleans())
def test_context_tid_and_sorted_are_the_numpy_statements(ev, shuffle):
    np.testing.assert_array_equal(ev.context_tid(), np.where(ev.kind == Kind.SWITCH, ev.arg0, ev.tid).astype(np.int64))
    if shuffle and len(ev) > 1:
        ev = ev.take(np.r_[len(ev) - 1, np.arange(len(ev) - 1)])  # the last event first: out of order
    s = ev.sorted()
    np.testing.assert_array_equal(s.time, np.sort(ev.time, kind="stable"))
    np.testing.assert_array_equal(s.tid, ev.tid[np.argsort(ev.time, kind="stable")])
    assert (s is ev) == (len(ev) < 2 or bool(np.all(ev.time[1:] >= ev.time[:-1])))


def test_rows_of_rare_and_common_kinds():
    """Rows of several kinds come in time order whether they are few (sorted) or many (one pass)."""
    kinds = np.array([int(Kind.SWITCH)] * 200 + [int(Kind.FORK), int(Kind.TASK_FORK)] * 2, np.uint8)
    kinds = kinds[np.random.default_rng(1).permutation(len(kinds))]
    n = len(kinds)
    ev = RawEvents(time=np.arange(n), cpu=np.zeros(n), tid=np.ones(n), pid=np.ones(n), kind=kinds, arg0=np.zeros(n),
                   arg1=np.zeros(n), arg2=np.zeros(n), comm0=np.full(n, -1), comm1=np.full(n, -1))
    ix = EventIndex(ev)
    for ks in ([Kind.FORK, Kind.TASK_FORK], [Kind.SWITCH, Kind.FORK], [Kind.FORK, Kind.FORK, Kind.TASK_FORK]):
        np.testing.assert_array_equal(ix.rows(*ks), np.flatnonzero(np.isin(kinds, ks)))
