"""The compiled split of futex waits at their wake call (`_runnable_from_wake`) against the NumPy
statement it replaces, on random state tables, waits and CPU events: the same table, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace import State, StateTable
from scalestack.trace.builder import _merge_adjacent
from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.futex_wakers import _runnable_from_wake
from scalestack.trace.lookup import EventIndex
from scalestack.trace.rows import new_rows

from .cpu_buckets import cpu_busy

RUN, RQ, SY = int(State.RUNNING), int(State.RUNNABLE), int(State.SYNC_WAIT)


def run_cpu_ref(st_):
    n = len(st_)
    idx = np.where(st_.cpu >= 0, np.arange(n), n)
    first = np.minimum.accumulate(idx[::-1])[::-1]
    f = np.minimum(first, n - 1)
    not_run = np.cumsum(st_.state != RUN)
    prev = np.r_[0, not_run[:-1]]
    same = (first < n) & (st_.tid[f] == st_.tid) & (not_run[f] == prev) & (st_.state == RUN)
    return np.where(same, st_.cpu[f], st_.cpu).astype(np.int64)


def reference(st_, events, waits, wake_ns):
    """Each wait running straight into its thread's RUNNING is split at the wake call where the CPU
    was busy: the slivers after it and the new row from the call are RUNNABLE on the run's CPU."""
    wake_ns = np.maximum(wake_ns, st_.start_ns[waits])
    n = len(st_)
    cont = np.zeros(n, bool)
    cont[1:] = (st_.tid[1:] == st_.tid[:-1]) & (st_.state[1:] == SY) & (st_.start_ns[1:] == st_.end_ns[:-1])
    breaks = np.flatnonzero(~cont)
    pos = np.searchsorted(breaks, waits, side="right")
    nxt = np.where(pos < len(breaks), breaks[np.minimum(pos, len(breaks) - 1)], n)
    safe = np.minimum(nxt, n - 1)
    cut = ((nxt < n) & (st_.tid[safe] == st_.tid[waits]) & (st_.state[safe] == RUN)
           & (st_.start_ns[safe] == st_.end_ns[np.maximum(safe - 1, 0)])
           & (wake_ns >= st_.start_ns[waits]) & (wake_ns < st_.end_ns[waits]))
    if not np.any(cut):
        return st_, 0
    run_cpu = run_cpu_ref(st_)
    cut[cut] = cpu_busy(events, run_cpu[safe[cut]], wake_ns[cut], st_.start_ns[safe[cut]], st_.tid[waits[cut]])
    w, at, nx = waits[cut], wake_ns[cut], safe[cut]
    if len(w) == 0:
        return st_, 0
    cols = {k: v.copy() for k, v in st_.columns().items()}
    tail_len = nx - w - 1
    if np.any(tail_len > 0):
        tail = np.repeat(w + 1, tail_len) + (np.arange(tail_len.sum()) - np.repeat(np.cumsum(tail_len) - tail_len,
                                                                                  tail_len))
        cols["state"][tail] = RQ
        cols["cpu"][tail] = np.repeat(run_cpu[nx], tail_len)
        cols["addr"][tail] = 0
        cols["waker"][tail] = -1
        cols["repaired"][tail] = True
    new = {k: v[w].copy() for k, v in cols.items()}
    new["start_ns"] = at.astype(np.int64)
    new["state"][:] = RQ
    new["cpu"] = run_cpu[nx].astype(np.int16)
    new["addr"][:] = 0
    new["waker"][:] = -1
    new["repaired"][:] = True
    cols["end_ns"][w] = at
    merged = {k: np.concatenate([cols[k], new[k]]) for k in cols}
    order = np.insert(np.arange(n), w + 1, n + np.arange(len(w)))
    order = order[merged["end_ns"][order] > merged["start_ns"][order]]
    return StateTable(**{k: v[order] for k, v in merged.items()}), int(len(w))


@st.composite
def scenario(draw):
    cols = {k: [] for k in StateTable.SCHEMA}
    for tid in (100, 101):
        t = draw(st.integers(0, 5))
        for _ in range(draw(st.integers(1, 8))):
            d = draw(st.integers(1, 6))
            cols["tid"].append(tid)
            cols["start_ns"].append(t)
            cols["end_ns"].append(t + d)
            cols["state"].append(draw(st.sampled_from([SY, SY, SY, RUN, RUN, RQ])))
            cols["cpu"].append(draw(st.sampled_from([-1, -1, 0, 1, 3])))
            cols["addr"].append(draw(st.sampled_from([0, 0xA0])))
            cols["waker"].append(draw(st.sampled_from([-1, 7])))
            cols["repaired"].append(draw(st.booleans()))
            t += d + draw(st.sampled_from([0, 0, 0, 0, 1]))
    states = StateTable(**cols)
    sy = np.flatnonzero(states.state == SY)
    waits = np.array(sorted(draw(st.sets(st.sampled_from(sy.tolist()), max_size=len(sy)))) if len(sy) else [],
                     np.int64)
    wake = states.start_ns[waits] + np.array([draw(st.integers(-2, 6)) for _ in waits], np.int64)
    # CPUs held by another task from the start (busy), so that most waits are split
    rows = [(0, c, 0, 0, int(Kind.SWITCH), 0, 102, 0, -1, -1) for c in (0, 1) if draw(st.booleans())]
    for _ in range(draw(st.integers(0, 15))):
        who = draw(st.sampled_from([0, 100, 101, 102]))
        kind = draw(st.sampled_from([Kind.SWITCH, Kind.WAKEUP, Kind.FUTEX_ENTER]))
        rows.append((draw(st.integers(0, 40)), draw(st.integers(0, 1)), who, 1, int(kind), who,
                     draw(st.sampled_from([0, 100, 101, 102])), 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    return states, (RawEvents.from_rows(rows) if rows else RawEvents.empty()), waits, wake


def _same_table(got, want):
    for k, v in want.columns().items():
        g = getattr(got, k)
        assert g.dtype == v.dtype
        np.testing.assert_array_equal(g, v, err_msg=k)


@settings(max_examples=400, deadline=None)
@given(scenario())
def test_compiled_split_is_the_numpy_statement(case):
    states, events, waits, wake = case
    got, n_got = _runnable_from_wake(states, EventIndex(events), waits, wake)
    want, n_want = reference(states, events, waits, wake)
    assert n_got == n_want
    _same_table(got, want)


@settings(max_examples=300, deadline=None)
@given(scenario(), st.data(), st.booleans())
def test_wakers_and_joins_written_by_the_split_are_those_set_before_and_done_after_it(case, data, join):
    """The wakers given to the split are those of a table that had them already; with `join`, the
    rows of a split table are those `_merge_adjacent` leaves of it (a table with no split is left as it is)."""
    states, events, waits, wake = case
    wakers = np.array([data.draw(st.sampled_from([-1, 7, 101])) for _ in waits], np.int64)
    cols = states.columns()
    cols["waker"] = states.waker.copy()
    cols["waker"][waits] = wakers
    want, n_want = _runnable_from_wake(StateTable(**cols), EventIndex(events), waits, wake)
    if join and n_want:
        want = _merge_adjacent(want)
    got, n_got = _runnable_from_wake(states, EventIndex(events), waits, wake, wakers, join)
    assert n_got == n_want
    _same_table(got, want)


@settings(max_examples=300, deadline=None)
@given(scenario(), st.data(), st.booleans(), st.integers(0, 12))
def test_the_split_written_over_its_own_table_is_the_split_into_a_new_one(case, data, join, spare):
    """With `room` (the table's own columns and rows to spare, or too few), the same table as a
    split into new columns."""
    states, events, waits, wake = case
    wakers = np.array([data.draw(st.sampled_from([-1, 7, 101])) for _ in waits], np.int64)
    want, n_want = _runnable_from_wake(states, EventIndex(events), waits, wake, wakers, join)
    room = new_rows(len(states) + spare)
    for col, name in zip(room, StateTable.SCHEMA, strict=True):
        col[: len(states)] = getattr(states, name).view(col.dtype) if name == "addr" else getattr(states, name)
    got, n_got = _runnable_from_wake(states, EventIndex(events), waits, wake, wakers, join, room)
    assert n_got == n_want
    _same_table(got, want)


def test_worked_example():
    """100 waits on 0xA0 over [0, 10) then runs on CPU 1 from 10; woken at 4 while 102 held CPU 1:
    SYNC_WAIT [0, 4), RUNNABLE on CPU 1 [4, 10) (repaired), RUNNING from 10."""
    states = StateTable(tid=[100, 100], start_ns=[0, 10], end_ns=[10, 20], state=[SY, RUN], cpu=[-1, 1],
                        addr=[0xA0, 0], waker=[101, -1], repaired=[False, False])
    ev = RawEvents.from_rows([(2, 1, 0, 0, int(Kind.SWITCH), 0, 102, 0, -1, -1)])
    got, n = _runnable_from_wake(states, EventIndex(ev), np.array([0]), np.array([4]))
    assert n == 1
    assert list(zip(got.start_ns.tolist(), got.end_ns.tolist(), got.state.tolist(), got.cpu.tolist(),
                    got.repaired.tolist(), strict=True)) == [(0, 4, SY, -1, False), (4, 10, RQ, 1, True),
                                                             (10, 20, RUN, 1, False)]
    assert got.waker.tolist() == [101, -1, -1]
    # woken by 103 (the futex call's thread), the wait's row says so; the split's rows join none here
    got, n = _runnable_from_wake(states, EventIndex(ev), np.array([0]), np.array([4]), np.array([103]), True)
    assert n == 1 and got.waker.tolist() == [103, -1, -1] and got.end_ns.tolist() == [4, 10, 20]
