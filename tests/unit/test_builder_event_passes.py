"""The state builder's compiled passes over all events (traced threads, their processes, their
name histories, the order of the walk's rows) against the NumPy statements they replace, on random
event streams: the same answers, dtypes aside."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.trace.builder import _thread_names, _thread_pids
from scalestack.trace.event_facts import traced_tids
from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.lookup import EventIndex, order_by_key_then

COMMS = ["app", "other", "app"]  # "app" twice: a name can have two entries in the string table
KINDS = [Kind.SWITCH, Kind.SWITCH, Kind.WAKEUP, Kind.FORK, Kind.EXEC, Kind.RENAME, Kind.TASK_COMM, Kind.TASK_FORK,
         Kind.STAT_RUNTIME, Kind.MIGRATE, Kind.FUTEX_ENTER, Kind.WAKEUP_NEW]
TASKS = [0, 100, 101, 102, 200, 201, -1]


def ref_traced(events: RawEvents, root_pids, comm):
    """traced_tids as masks, np.unique and np.isin over all events."""
    kind = events.kind
    roots = {int(p) for p in (root_pids or [])}
    if comm is not None:
        ids = [i for i, s in enumerate(events.comms) if s == comm]
        named = np.isin(events.comm0, ids)
        who = np.where(kind == Kind.FORK, events.arg1, events.arg0)
        candidates = np.unique(who[named & (kind != Kind.TASK_COMM) & (kind != Kind.EXEC)])
        groups = np.unique(events.arg1[named & (kind == Kind.TASK_COMM)])
        known = (events.pid > 0) & (events.tid > 0)
        k_tid, first = np.unique(events.tid[known], return_index=True)
        k_pid = events.pid[known][first]
        mapped = [int(k_pid[np.searchsorted(k_tid, c)]) if c in set(k_tid.tolist()) else int(c) for c in candidates]
        roots |= set(mapped) | {int(g) for g in groups}
        roots -= {0, -1}
        if not roots:
            return None
    if not roots:
        return None
    known = (events.pid > 0) & (events.tid > 0)
    tg_tid = np.concatenate([events.tid[known], events.arg0[kind == Kind.TASK_COMM], events.arg0[kind == Kind.TASK_FORK]])
    tg_pid = np.concatenate([events.pid[known], events.arg1[kind == Kind.TASK_COMM], events.arg1[kind == Kind.TASK_FORK]])
    tracked = {int(t) for t in np.unique(tg_tid[np.isin(tg_pid, list(roots))])} | roots
    parents = {}
    for i in np.flatnonzero((kind == Kind.FORK) | (kind == Kind.TASK_FORK)):
        if kind[i] == Kind.FORK:
            parent, child = int(events.arg0[i]), int(events.arg1[i])
        else:
            parent, child = int(events.arg2[i]), int(events.arg0[i])
        if parent in tracked and child not in tracked:
            tracked.add(child)
        if child in tracked and parent in tracked:
            parents.setdefault(child, parent)
    return sorted(t for t in tracked if t > 0), parents


def ref_pids(events: RawEvents, tids):
    """Each thread's pid: its first event with one, else its first side-band record."""
    out = np.full(len(tids), -1, np.int64)
    for j, t in enumerate(tids):
        sb = np.flatnonzero(np.isin(events.kind, [Kind.TASK_COMM, Kind.TASK_FORK]) & (events.arg0 == t))
        if len(sb):
            out[j] = events.arg1[sb[0]]
        own = np.flatnonzero((events.pid > 0) & (events.tid == t))
        if len(own):
            out[j] = events.pid[own[0]]
    return out


def ref_names(events: RawEvents, tids):
    """Name changes per thread: every statement of a comm, concatenated by kind, sorted by (tid, time)."""
    k = events.kind
    parts = [(k == Kind.SWITCH, events.arg0, events.comm0), (k == Kind.SWITCH, events.arg1, events.comm1),
             (k == Kind.FORK, events.arg1, events.comm0), (k == Kind.RENAME, events.arg0, events.comm0),
             (k == Kind.TASK_COMM, events.arg0, events.comm0),
             (np.isin(k, [Kind.WAKEUP, Kind.WAKEUP_NEW, Kind.STAT_RUNTIME, Kind.MIGRATE]), events.arg0, events.comm0)]
    tid = np.concatenate([w[m] for m, w, _ in parts])
    t = np.concatenate([events.time[m] for m, _, _ in parts])
    c = np.concatenate([x[m] for m, _, x in parts])
    keep = np.isin(tid, tids) & (c >= 0)
    tid, t, c = tid[keep], t[keep], c[keep]
    o = np.lexsort((t, tid))
    tid, t, c = tid[o], t[o], c[o]
    change = np.r_[True, (tid[1:] != tid[:-1]) | (c[1:] != c[:-1])] if len(tid) else np.zeros(0, bool)
    return tid[change].tolist(), t[change].tolist(), [events.comms[i] for i in c[change]]


@st.composite
def stream(draw):
    rows = []
    t = 0
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0, 0, 1, 2]))  # many events at one instant
        kind = draw(st.sampled_from(KINDS))
        tid = draw(st.sampled_from(TASKS))
        pid = draw(st.sampled_from([-1, 0, 100, 200, 101]))
        rows.append((t, draw(st.integers(0, 1)), tid, pid, int(kind), draw(st.sampled_from(TASKS)),
                     draw(st.sampled_from(TASKS)), draw(st.sampled_from(TASKS)), draw(st.integers(-1, 2)),
                     draw(st.integers(-1, 2))))
    return RawEvents.from_rows(rows, comms=COMMS)


@settings(max_examples=300, deadline=None)
@given(stream(), st.sampled_from([None, "app", "other", "nothing"]), st.sampled_from([[], [100], [200, 5]]))
def test_traced_threads_are_the_masks_statement(events, comm, roots):
    want = ref_traced(events, roots, comm)
    try:
        tids, parents = traced_tids(events, roots, comm)
    except UserError:
        assert want is None
        return
    assert (tids.tolist(), parents) == want


@settings(max_examples=300, deadline=None)
@given(stream(), st.lists(st.sampled_from([100, 101, 102, 200, 201, 5]), min_size=1, unique=True))
def test_pids_and_names_are_the_masks_statement(events, tids):
    tids = np.array(sorted(tids), np.int64)
    slot_of = np.full(int(tids.max()) + 1, -1, np.int32)
    slot_of[tids] = np.arange(len(tids))
    index = EventIndex(events)
    np.testing.assert_array_equal(_thread_pids(events, tids, slot_of, index), ref_pids(events, tids))
    names = _thread_names(events, tids, {}, index)
    assert (names.tid.tolist(), names.time_ns.tolist(), list(names.name)) == ref_names(events, tids)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5)), max_size=40))
def test_order_by_key_then_is_the_lexsort(rows):
    key = np.array([r[0] for r in rows], np.int64)
    t = np.array([r[1] for r in rows], np.int64)
    np.testing.assert_array_equal(order_by_key_then(key, 4, t), np.lexsort((t, key)))


def test_worked_example():
    """app (pid 100) has threads 100 and 101 by their events' pid; 101 forks 102; 200 is another
    process. 101 is renamed at 5 by two statements at one instant: the switch's (first) and the
    rename's."""
    rows = [(1, 0, 100, 100, int(Kind.SWITCH), 100, 101, 0, 0, 0),
            (2, 0, 101, 100, int(Kind.FORK), 101, 102, 0, 0, 0),
            (3, 1, 200, 200, int(Kind.SWITCH), 200, 0, 0, 1, -1),
            (5, 0, 101, 100, int(Kind.SWITCH), 101, 100, 0, 1, 0),
            (5, 0, 101, 100, int(Kind.RENAME), 101, 0, 0, 0, -1)]
    ev = RawEvents.from_rows(rows, comms=["app", "other"])
    tids, parents = traced_tids(ev, None, "app")
    assert tids.tolist() == [100, 101, 102] and parents == {102: 101}
    names = _thread_names(ev, tids, {}, EventIndex(ev))
    assert names.tid.tolist() == [100, 101, 101, 101, 102] and names.time_ns.tolist() == [1, 1, 5, 5, 2]
    assert list(names.name) == ["app", "app", "other", "app", "app"]


@settings(max_examples=300, deadline=None)
@given(stream(), st.sampled_from([None, "app", "other"]), st.sampled_from([[], [100], [200, 5]]), st.integers(-1, 250))
def test_tasks_beyond_the_tables_are_listed(events, comm, roots, limit):
    """With tables of task ids up to `limit` only, the tasks beyond it (named by the comm's events,
    in a thread group, forked) are listed, and the traced threads are the masks' statement still."""
    want = ref_traced(events, roots, comm)
    try:
        tids, parents = traced_tids(events, roots, comm, limit=limit)
    except UserError:
        assert want is None
        return
    assert (tids.tolist(), parents) == want


def test_names_with_many_statements_at_one_instant_and_many_changes():
    """More statements at one instant (300) and more changes of name (4000) than `_name_changes`
    first holds room for: its buffers grow, and the names are still the masks' statement."""
    rows = [(5, 0, 100, 100, int(Kind.RENAME if k % 3 else Kind.SWITCH), 100 + k % 2, 101 - k % 2, 0, k % 2, 1 - k % 2)
            for k in range(300)]
    rows += [(10 + k, 0, 101, 100, int(Kind.RENAME), 100 + k % 2, 0, 0, (k // 2) % 2, -1) for k in range(8000)]
    ev = RawEvents.from_rows(rows, comms=COMMS)
    tids = np.array([100, 101], np.int64)
    names = _thread_names(ev, tids, {}, EventIndex(ev))
    assert len(names) > 4000
    assert (names.tid.tolist(), names.time_ns.tolist(), list(names.name)) == ref_names(ev, tids)
