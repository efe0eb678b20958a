"""The builder's facts about a whole recording (traced threads, forks, CPUs, runtime reports)
summed window by window: cut anywhere, each window with its own string table, the answers of
one pass over all events."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace.event_facts import EventFacts, traced_tids
from scalestack.trace.events import Kind, RawEvents

from .test_builder_event_passes import ref_traced, stream

DATA = __import__("pathlib").Path(__file__).parent.parent / "data"


def window(events: RawEvents, a: int, b: int, rng: np.random.Generator) -> RawEvents:
    """Events a..b with a string table of their own: the strings shuffled, with a stranger's."""
    part = events.take(np.arange(a, b))
    perm = rng.permutation(len(events.comms) + 1)  # string i moves to perm[i]; one slot for "stranger"
    table = [""] * len(perm)
    for i, s in enumerate(events.comms):
        table[perm[i]] = s
    table[perm[-1]] = "stranger"
    for col in ("comm0", "comm1"):
        c = getattr(part, col)
        setattr(part, col, np.where(c >= 0, perm[np.clip(c, 0, None)], c).astype(np.int32))
    part.comms = table
    return part


def facts_in_windows(events, cuts, comm, limit, seed=0):
    rng = np.random.default_rng(seed)
    bounds = [0, *sorted(cuts), len(events)]
    facts = EventFacts(comm, limit)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        facts.add(window(events, a, b, rng))
    return facts


def traced_as_the_masks(facts, events, roots, comm) -> bool:
    """The facts' traced threads are `ref_traced`'s, or both refuse; whether there are any."""
    want = ref_traced(events, roots, comm)
    try:
        got = facts.traced(roots, comm)
    except UserError:
        assert want is None
        return False
    assert (got[0].tolist(), got[1]) == want
    return True


@settings(max_examples=150, deadline=None)
@given(stream(), st.sampled_from([None, "app", "other", "nothing"]), st.sampled_from([[], [100], [200, 5]]),
       st.sampled_from([101, 150, 1 << 22]), st.data())
def test_windows_give_the_traced_threads_of_one_pass(events, comm, roots, limit, data):
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=6))
    facts = facts_in_windows(events, cuts, comm, limit, data.draw(st.integers(0, 9)))
    if not traced_as_the_masks(facts, events, roots, comm):
        return
    # and the other facts
    assert facts.n_events == len(events)
    assert facts.t_first == int(events.time[0]) and facts.t_last == int(events.time[-1])
    assert facts.cpu_max == int(events.cpu.max())
    assert facts.count(Kind.SWITCH) == int(np.sum(events.kind == Kind.SWITCH))
    assert facts.no_groups == (int(events.pid.max()) <= 0 and not np.isin(events.kind, [Kind.TASK_COMM, Kind.TASK_FORK]).any())
    fk = np.flatnonzero(np.isin(events.kind, [Kind.FORK, Kind.TASK_FORK]))
    assert facts.forks[:, 1].tolist() == events.time[fk].tolist()
    tasks = np.array([-1, 0, 100, 101, 102, 200, 201, 5], np.int64)
    ran = set(events.arg0[events.kind == Kind.STAT_RUNTIME].tolist())
    assert facts.reported_runtime(tasks).tolist() == [t in ran and 0 <= t <= limit for t in tasks.tolist()]
    known = (events.pid > 0) & (events.tid > 0)
    first = {}
    for t, p in zip(events.tid[known].tolist(), events.pid[known].tolist(), strict=True):
        first.setdefault(t, p)
    assert facts.pid_of(tasks).tolist() == [first.get(t, -1) for t in tasks.tolist()]


def test_a_recording_in_windows():
    """barrier.perf.data (perf record -a of a 3-thread barrier program) in windows of 1000 events."""
    ev = read_perf_data(DATA / "barrier.perf.data")
    whole = traced_tids(ev, None, "bi")
    facts = EventFacts("bi")
    for a in range(0, len(ev), 1000):
        facts.add(ev.take(np.arange(a, min(a + 1000, len(ev)))))
    got = facts.traced(None, "bi")
    assert len(whole[0]) == 3 and got[0].tolist() == whole[0].tolist() and got[1] == whole[1]


def test_facts_are_asked_for_the_name_they_gathered():
    ev = RawEvents.from_rows([(1, 0, 100, 100, int(Kind.SWITCH), 100, 0, 0, 0, -1)], comms=["app"])
    facts = EventFacts("app").add(ev)
    assert facts.traced(None, "app")[0].tolist() == [100]
    try:
        facts.traced(None, "other")
    except ValueError as exc:
        assert "'app'" in str(exc)
    else:
        raise AssertionError("no error")


@settings(max_examples=100, deadline=None)
@given(stream(), st.sampled_from([None, "app"]), st.sampled_from([[100], [200, 5]]), st.data())
def test_windows_with_more_rare_records_than_room(events, comm, roots, data):
    """A window with more forks, side-band records, second pids or far tasks than the first fold's
    room folds again with room, and tallies its kinds once."""
    from scalestack.trace import event_facts

    cap = event_facts._CAP
    event_facts._CAP = 1
    try:
        facts = facts_in_windows(events, data.draw(st.lists(st.integers(0, len(events)), max_size=3)), comm, 150)
    finally:
        event_facts._CAP = cap
    assert facts.count(*Kind) == len(events)
    if not traced_as_the_masks(facts, events, roots, comm):
        return
