"""The state builder over a recording read in time windows: memory follows one window and the
trace's rows, not the events (53 bytes each: 5.3 GB at 10^8).

`build_trace` holds every event because its passes after the walk ask about all of them. Here
each pass that reads events is a fold carried from window to window, and the recording is read
again for each question that can only be asked once the answers before it are known:

1. the facts the walk needs (traced threads, forks, CPUs: `event_facts.EventFacts`);
2. the walk (`builder._walk_chunk`), gathering the few events later passes need in memory (the
   traced threads' runtime reports, run-delay reports, code samples);
3. the stretches the runtime reports took from RUNNING (`cpu_sweeps` witness), the switch spans,
   names and pids of the threads found;
4. the futex calls that name each wait's waker (`futex_wakers`);
5. whether the woken thread's CPU was busy at each such call (`cpu_sweeps` busy).

Every pass gives what the pass over all events gives, so the Trace is `build_trace`'s, bit for
bit (tests/unit/test_streaming_builder.py cuts random recordings into random windows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from scalestack.errors import UserError
from scalestack.trace import NameTable
from scalestack.trace.builder import (
    _WAIT_OPS_MASK,
    MAX_CPUS,
    Walked,
    _merge_adjacent,
    _names_chunk,
    _names_end,
    _names_start,
    _pids_chunk,
    _pids_start,
    _reconcile_rows_of,
    _reconcile_steals_by,
    _samples,
    _walk_chunk,
    _walk_end,
    _walk_start,
    _walk_states_of,
    finish_trace,
    naming_kinds,
    reconcile_runnable,
    steal_questions,
    traced_slots,
)
from scalestack.trace.cpu_sweeps import witness_chunk, witness_end, witness_start
from scalestack.trace.event_facts import EventFacts
from scalestack.trace.events import CommTable, Kind, RawEvents, concat_events
from scalestack.trace.futex_wakers import attribute_futex_wakers_windows
from scalestack.trace.lookup import EventIndex, member, unique_first
from scalestack.trace.rows import RELEASE_EVERY, rows_copy, state_table
from scalestack.trace.switch_spans import (
    SwitchSpans,
    _clipped_by_thread,
    _spans_chunk,
    _spans_end,
    _spans_out,
    _spans_start,
)

Windows = Callable[[], Iterable[RawEvents]]


def _scheduled(windows: Windows):
    """Each window's events without the run-delay reports, and those reports (eBPF's: not a state
    change); windows left empty skipped."""
    for w in windows():
        rd = w.kind == Kind.RUN_DELAY
        if rd.any():
            yield w.take(np.flatnonzero(~rd)), w.take(np.flatnonzero(rd))
        elif len(w):
            yield w, None


def build_trace_windows(
    windows: Windows,
    *,
    root_pids: list[int] | None = None,
    comm: str | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    meta: dict | None = None,
    role_rules=None,
    root_known: bool = False,
    known_names: dict[int, str] | None = None,
    stats: dict | None = None,
    n_events: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
):
    """`builder.build_trace` of the events `windows()` gives, a fresh iterator of time-sorted
    windows in time order each time it is called (the recording is read five times). `stats`: the
    reader's (lost events ...; default: the first window's); `n_events`: how many events the
    windows hold, if known, for `progress(done, total, stage)`, which follows the passes."""
    meta = dict(meta or {})
    tell = progress or (lambda done, total, stage: None)
    # 1: the facts
    facts, seen = EventFacts(comm), 0
    for w, _ in _scheduled(windows):
        if stats is None:
            stats = dict(w.stats)
        wild = np.flatnonzero(w.cpu >= MAX_CPUS)
        if len(wild):
            i = int(wild[0])
            raise UserError(f"event {seen + i} (at {int(w.time[i])} ns) names CPU {int(w.cpu[i])}, "
                            f"beyond the {MAX_CPUS} any Linux machine has: the recording is corrupt")
        facts.add(w)
        seen += len(w)
        tell(seen, n_events or seen, "1/5 threads")
    if facts.n_events == 0:
        raise UserError("the recording holds no events; was the program too short, or were the tracepoints missing?")
    n = facts.n_events
    tids, parents, slot_of, born_at = traced_slots(facts, root_pids, comm)
    n_slots = len(tids)
    n_cpus = max(facts.cpu_max + 1, 1)
    t_first, t_last = facts.t_first, facts.t_last
    win_start = t_first - 1 if start_ns is None else int(start_ns)
    t0 = t_first if start_ns is None else int(start_ns)

    # 2: the walk, and the events kept for later passes
    carry = _walk_start(n_slots, n_cpus, born_at, t_first)
    parts = []
    rt, rt_other = [], None  # the traced threads' runtime reports (time, tid, ns); another task's, if no traced one has
    run_delay, samples = [], []  # their events, window by window
    done = 0
    for w, rd in _scheduled(windows):
        rows = _walk_chunk(w.time, w.cpu, w.tid, w.kind, w.arg0, w.arg1, w.arg2, slot_of, n_slots, n_cpus,
                           _WAIT_OPS_MASK, win_start, carry)
        parts.append(rows_copy(rows))  # out of the walk's room for every event's rows (2.7x as many, 36 B each)
        del rows
        r = np.flatnonzero((w.kind == Kind.STAT_RUNTIME) & (w.arg1 > 0))
        if len(r):
            mine = member(w.arg0[r], tids)
            if mine.any():
                k = r[mine]
                rt.append((w.time[k], w.arg0[k], w.arg1[k]))
            elif rt_other is None:
                rt_other = (w.time[r[:1]], w.arg0[r[:1]], w.arg1[r[:1]])
        if rd is not None:
            run_delay.append(rd)
        s = np.flatnonzero((w.kind == Kind.SAMPLE) & (w.time >= t0))
        if len(s):
            samples.append(w.take(s[member(w.tid[s], tids)]))
        done += len(w)
        tell(done, n, "2/5 states")
    parts.append(_walk_end(t_last if end_ns is None else max(t_last, int(end_ns)), n_slots, carry))
    dead, end_time = carry[11], carry[12]
    t1 = t_last if end_ns is None else int(end_ns)
    if end_ns is None and np.all(dead):
        t1 = int(end_time.max())
    if t1 <= t0:
        raise UserError("the chosen time window is empty")
    *cols, in_order = _walk_states_of(parts, t0, t1, tids, RELEASE_EVERY)
    if not in_order:
        order = np.lexsort((cols[1], cols[0]))
        cols = [c[order] for c in cols]
    states = state_table(cols)
    del cols, parts
    present = unique_first(states.tid)[0].astype(np.int64)
    if not rt and rt_other is not None:
        rt = [rt_other]
    rt_cols = [np.concatenate(c) for c in zip(*rt, strict=True)] if rt else [np.zeros(0, np.int64)] * 3
    del rt
    cut = _reconcile_rows_of(states, np.arange(len(rt_cols[0])), *rt_cols, release=RELEASE_EVERY)
    del rt_cols

    # 3: the steal questions, and the present threads' switch spans, names and pids
    questions = steal_questions(cut) if cut is not None else None
    witness = witness_start(*questions, _WAIT_OPS_MASK) if questions is not None and len(questions[0]) else None
    p_slot_of = np.full(int(present.max(initial=0)) + 1, -1, np.int64)
    p_slot_of[present] = np.arange(len(present))
    names, strings = _names_start(p_slot_of), CommTable()
    naming = naming_kinds()
    pids = _pids_start(n_slots)
    spans = _spans_start(len(present), n_cpus) if facts.count(Kind.SWITCH) else None
    span_parts = []
    done = 0
    for w, _ in _scheduled(windows):
        if witness is not None:
            witness_chunk(w.time, w.cpu, w.kind, w.arg0, w.arg1, w.tid, witness)
        if spans is not None:
            out = _spans_out(len(w), len(present))
            m = _spans_chunk(w.time, w.cpu, w.kind, w.tid, w.arg0, w.arg1, p_slot_of, len(present), n_cpus, spans, out, 0)
            span_parts.append(tuple(c[:m].copy() for c in out))
            del out
        comm0, comm1 = strings.relabel(w)  # the names' comm ids, of one table for all windows
        names = _names_chunk(w.time, w.kind, w.arg0, w.arg1, comm0, comm1, naming, p_slot_of, names)
        side = np.flatnonzero((w.kind == Kind.TASK_COMM) | (w.kind == Kind.TASK_FORK))
        _pids_chunk(w.tid, w.pid, w.arg0, w.arg1, side, slot_of, pids)
        done += len(w)
        tell(done, n, "3/5 names and spans")
    if cut is None:
        states, reconciled, stolen, room = _merge_adjacent(states), {}, {}, None
    else:
        del states
        answers = witness_end(witness) if witness is not None else np.zeros(0, bool)
        states, reconciled, stolen, room = _reconcile_steals_by(cut, lambda *q: answers)
        del cut
    pids = pids[0]
    n_slot, n_t, n_c = _names_end(names)
    comms = strings.strings()
    name_table = NameTable(tid=present[n_slot], time_ns=n_t, name=[comms[i] for i in n_c])
    span_result = None
    if spans is not None:
        out = _spans_out(0, len(present))
        m = _spans_end(t1, len(present), spans, out, 0)
        span_parts.append(tuple(c[:m] for c in out))
        cat = tuple(np.concatenate(c) for c in zip(*span_parts, strict=True))
        del span_parts
        tid, a, b, rep, in_order = _clipped_by_thread(cat, t0, t1, present, RELEASE_EVERY)
        del cat
        if not in_order:
            order = np.lexsort((a, tid))
            tid, a, b, rep = tid[order], a[order], b[order], rep[order]
        counts = spans[-1]
        span_result = SwitchSpans(tid=tid, start_ns=a, end_ns=b, repaired=rep, tids=present, complete=counts[:, 0],
                                  lost_in=counts[:, 1], lost_out=counts[:, 2], lost_whole=counts[:, 3])

    # 4, 5: the futex calls, then the CPUs woken threads ran on
    run_delay = concat_events(run_delay)
    states, futex_wakers, runnable_from_wakes = attribute_futex_wakers_windows(
        states, lambda: (w for w, _ in _scheduled(windows)), tids, pids, join=len(run_delay) == 0, room=room,
        progress=lambda done, stage: tell(done, n, stage))
    del room
    states, runnable_reconciled = reconcile_runnable(states, run_delay)
    states = _merge_adjacent(states)
    if not np.array_equal(unique_first(states.tid)[0], present):  # no pass adds or drops a thread
        raise AssertionError("the threads with states changed after the walk")

    def samples_of(present):
        sampled = concat_events(samples)
        return _samples(sampled, present, t0, t1, EventIndex(sampled))

    walked = Walked(facts, tids, parents, slot_of, born_at, t0, t1, carry)
    return finish_trace(
        states, walked, pids=pids, reconciled=reconciled, stolen=stolen, futex_wakers=futex_wakers,
        runnable_from_wakes=runnable_from_wakes, runnable_reconciled=runnable_reconciled,
        names_of=lambda _: name_table, spans_of=lambda _: span_result, samples_of=samples_of,
        stats=stats or {}, n_events=n, root_pids=root_pids, root_known=root_known, known_names=known_names,
        meta=meta, role_rules=role_rules)

