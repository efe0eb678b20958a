"""The compiled `reconcile_running` against a NumPy statement of the same rule, on random threads,
runtime reports and CPU events: the same table, its adjacent rows joined (bit for bit, dtypes
included), and the same per-thread sums."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace import State, StateTable
from scalestack.trace.builder import _STEAL_MIN_NS, _merge_adjacent, reconcile_running
from scalestack.trace.events import Kind, RawEvents

from .cpu_buckets import CpuWitness

RUN, UNK = int(State.RUNNING), int(State.UNKNOWN)


def _union(a, b):
    keep = b > a
    a, b = a[keep], b[keep]
    if len(a) == 0:
        return a, b
    o = np.argsort(a, kind="stable")
    a, b = a[o], b[o]
    run_end = np.maximum.accumulate(b)
    heads = np.flatnonzero(np.r_[True, a[1:] > run_end[:-1]])
    return a[heads], np.maximum.reduceat(b, heads)


def reference(states: StateTable, events: RawEvents, open_end: int | None = None):
    """Thread by thread, in NumPy: cut at the rows' bounds and the report union's edges, then
    RUNNING where a report covers, the state before the run where none does (UNKNOWN if stolen),
    but for a run still open at `open_end` (the last rows RUNNING, touching, the last reaching it):
    it stays RUNNING after the last report."""
    rep = (events.kind == Kind.STAT_RUNTIME) & (events.arg1 > 0)
    if not np.any(rep) or len(states) == 0:
        return states, {}, {}, {}
    r_tid, r_end = events.arg0[rep], events.time[rep]
    r_start = r_end - events.arg1[rep]
    witness = None
    parts, changed, stolen, unreported = [], {}, {}, {}
    bounds = np.flatnonzero(np.r_[True, states.tid[1:] != states.tid[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        th = states.take(np.arange(lo, hi))
        tid = int(th.tid[0])
        mine = r_tid == tid
        if not np.any(mine):
            parts.append(th)
            continue
        life0, life1 = int(th.start_ns[0]), int(th.end_ns[-1])
        sa, sb = _union(np.clip(r_start[mine], life0, life1), np.clip(r_end[mine], life0, life1))
        cuts = np.unique(np.concatenate([th.start_ns, th.end_ns, sa, sb]))
        cuts = cuts[(cuts >= life0) & (cuts <= life1)]
        seg_a, seg_b = cuts[:-1], cuts[1:]
        row = np.searchsorted(th.start_ns, seg_a, side="right") - 1
        i = np.searchsorted(sa, seg_a, side="right") - 1
        covered = (i >= 0) & (seg_a < sb[np.maximum(i, 0)]) if len(sa) else np.zeros(len(seg_a), bool)
        was_running = th.state[row] == RUN
        keep_from = life1 + 1
        if open_end is not None and life1 >= open_end and th.state[-1] == RUN:
            r = len(th) - 1
            while r > 0 and th.state[r - 1] == RUN and th.end_ns[r - 1] == th.start_ns[r]:
                r -= 1
            keep_from = max(int(th.start_ns[r]), int(sb[-1])) if len(sb) else int(th.start_ns[r])
        open_tail = was_running & ~covered & (seg_a >= keep_from)
        covered = covered | open_tail
        last_nonrun = np.maximum.accumulate(np.where(th.state != RUN, np.arange(len(th)), -1))[row]
        fallback = np.where(last_nonrun >= 0, th.state[np.maximum(last_nonrun, 0)], UNK)
        add, drop = covered & ~was_running, was_running & ~covered
        steal = drop & ~th.repaired[row] & (th.cpu[row] >= 0) & (seg_b - seg_a >= _STEAL_MIN_NS)
        if np.any(steal):
            witness = witness or CpuWitness(events)
            steal[steal] = ~witness.shows(th.cpu[row][steal], seg_a[steal], seg_b[steal],
                                          np.full(int(steal.sum()), tid))
        state = np.where(add, RUN, np.where(drop, np.where(steal, UNK, fallback), th.state[row]))
        dur = seg_b - seg_a
        if np.any(add | drop):
            changed[str(tid)] = [int(dur[add].sum()), int(dur[drop].sum())]
        if np.any(steal):
            stolen[str(tid)] = int(dur[steal].sum())
        if np.any(open_tail):
            unreported[str(tid)] = int(dur[open_tail].sum())
        mod = add | drop
        parts.append(StateTable(
            tid=np.full(len(seg_a), tid, np.int32), start_ns=seg_a, end_ns=seg_b, state=state.astype(np.uint8),
            cpu=np.where(mod, -1, th.cpu[row]), addr=np.where(mod, 0, th.addr[row]).astype(np.uint64),
            waker=np.where(mod, -1, th.waker[row]), repaired=th.repaired[row] | mod,
        ))
    return StateTable.concat(parts), changed, stolen, unreported


@st.composite
def scenario(draw):
    n_th = draw(st.integers(1, 4))
    tids = sorted(draw(st.sets(st.integers(100, 110), min_size=n_th, max_size=n_th)))
    unit = draw(st.sampled_from([1, 40_000]))  # 40 us units reach the steal threshold
    cols = {k: [] for k in StateTable.SCHEMA}
    for tid in tids:
        t = draw(st.integers(0, 20)) * unit
        for _ in range(draw(st.integers(1, 8))):
            d = draw(st.integers(0, 12)) * unit  # zero-length rows and gaps included
            gap = draw(st.sampled_from([0, 0, 0, unit]))
            cols["tid"].append(tid)
            cols["start_ns"].append(t + gap)
            # now and then a row reaching over the next ones (its end out of order)
            cols["end_ns"].append(t + gap + d + draw(st.sampled_from([0, 0, 0, 0, 0, 3 * unit])))
            cols["state"].append(draw(st.sampled_from([RUN, RUN, int(State.RUNNABLE), int(State.SYNC_WAIT),
                                                       int(State.SLEEP), UNK])))
            cols["cpu"].append(draw(st.integers(-1, 1)))
            cols["addr"].append(draw(st.sampled_from([0, 0xABC])))
            cols["waker"].append(draw(st.sampled_from([-1, 7])))
            cols["repaired"].append(draw(st.booleans()))
            t += gap + d
    states = StateTable(**cols)
    rows = []
    for _ in range(draw(st.integers(0, 14))):
        end = draw(st.integers(0, 120)) * unit
        who = draw(st.sampled_from([*tids, 999]))
        rows.append((end, draw(st.integers(0, 1)), who, 1, int(Kind.STAT_RUNTIME), who,
                     draw(st.integers(-1, 15)) * unit, 0, -1, -1))
    for _ in range(draw(st.integers(0, 10))):  # other tasks' events and futex waits on the CPUs
        t = draw(st.integers(0, 120)) * unit
        who = draw(st.sampled_from([*tids, 0, 555]))
        kind = draw(st.sampled_from([Kind.SWITCH, Kind.FUTEX_ENTER]))
        a1 = 0 if kind == Kind.FUTEX_ENTER else 0
        rows.append((t, draw(st.integers(0, 1)), who, 1, int(kind), who, a1, 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    # the trace's end: none, or an instant some threads' last rows reach
    open_end = draw(st.sampled_from([None, int(states.end_ns.max()), draw(st.integers(0, 120)) * unit]))
    return states, RawEvents.from_rows(rows, comms=[]), open_end


@settings(max_examples=300, deadline=None)
@given(scenario(), st.sampled_from([1, 2, 3]))
def test_compiled_reconcile_matches_numpy_statement(case, workers):
    """With 2 or 3 workers, the threads are cut at once in groups, each into its own part of the
    output: the same table."""
    states, events, open_end = case
    want, want_changed, want_stolen, want_unreported = reference(states, events, open_end)
    want = _merge_adjacent(want)  # reconcile_running joins them as it writes them
    got, got_changed, got_stolen, got_unreported = reconcile_running(states, events, 0, 0, open_end=open_end,
                                                                     workers=workers)
    for k in StateTable.SCHEMA:
        assert getattr(got, k).dtype == getattr(want, k).dtype, k
        np.testing.assert_array_equal(getattr(got, k), getattr(want, k), err_msg=k)
    assert got_changed == want_changed
    assert got_stolen == want_stolen
    assert got_unreported == want_unreported


def test_worked_example_report_moves_running_start_and_drops_uncovered_tail():
    """Thread 100: SLEEP [0, 10), RUNNING [10, 30), SLEEP [30, 40). One report at 28 of 23 ns proves
    it ran [5, 28): [5, 10) becomes RUNNING, [28, 30) returns to SLEEP (the state before the run)."""
    states = StateTable(tid=[100] * 3, start_ns=[0, 10, 30], end_ns=[10, 30, 40],
                        state=[int(State.SLEEP), RUN, int(State.SLEEP)], cpu=[-1, 0, -1], addr=[0, 0, 0],
                        waker=[-1, -1, -1], repaired=[False] * 3)
    events = RawEvents.from_rows([(28, 0, 100, 1, int(Kind.STAT_RUNTIME), 100, 23, 0, -1, -1)], comms=[])
    got, changed, stolen, _ = reconcile_running(states, events, 0, 40)
    assert got.start_ns.tolist() == [0, 5, 10, 28, 30]
    assert got.end_ns.tolist() == [5, 10, 28, 30, 40]
    assert got.state.tolist() == [int(State.SLEEP), RUN, RUN, int(State.SLEEP), int(State.SLEEP)]
    assert got.repaired.tolist() == [False, True, False, True, False]
    assert changed == {"100": [5, 2]} and stolen == {}


def test_worked_example_a_run_open_at_the_end_keeps_its_unreported_running():
    """Thread 100: SLEEP [0, 10), RUNNING [10, 40), the trace ending at 40 (a part of a recording).
    Its last report, at 28 of 18 ns, proves it ran [10, 28); the report charging [28, 40) comes
    after the trace: [28, 40) stays RUNNING, counted as unreported. With the run closed (SLEEP from
    35), [28, 35) returns to SLEEP as before."""
    def case(rows):
        return StateTable(tid=[100] * len(rows), start_ns=[a for a, _, _ in rows], end_ns=[b for _, b, _ in rows],
                          state=[s for _, _, s in rows], cpu=[-1, 0, -1][:len(rows)], addr=[0] * len(rows),
                          waker=[-1] * len(rows), repaired=[False] * len(rows))
    events = RawEvents.from_rows([(28, 0, 100, 1, int(Kind.STAT_RUNTIME), 100, 18, 0, -1, -1)], comms=[])
    SL = int(State.SLEEP)
    got, changed, _, unreported = reconcile_running(case([(0, 10, SL), (10, 40, RUN)]), events, 0, 40, open_end=40)
    assert list(zip(got.start_ns.tolist(), got.end_ns.tolist(), got.state.tolist(), strict=True)) == [(0, 10, SL), (10, 40, RUN)]
    assert changed == {} and unreported == {"100": 12}
    got, changed, _, unreported = reconcile_running(case([(0, 10, SL), (10, 35, RUN), (35, 40, SL)]), events, 0, 40,
                                                     open_end=40)
    assert list(zip(got.start_ns.tolist(), got.end_ns.tolist(), got.state.tolist(), strict=True)) == [
        (0, 10, SL), (10, 28, RUN), (28, 35, SL), (35, 40, SL)]  # the repaired stretch apart
    assert changed == {"100": [0, 7]} and unreported == {}


def _big_case(seed):
    """Threads of thousands of rows (many memory pages), some with a row reaching over the next ones,
    one without reports; reports over each thread's life."""
    rng = np.random.default_rng(seed)
    cols, rows = {k: [] for k in StateTable.SCHEMA}, []
    for tid in (100, 101, 102, 103):
        n = int(rng.integers(2000, 6000))
        start = np.cumsum(rng.integers(0, 30, n)) * 1000
        end = start + rng.integers(0, 40, n) * 1000
        if tid == 101:
            end[n // 2] += 500_000  # out of order: the thread's cuts come from one sorted array
        cols["tid"].append(np.full(n, tid, np.int32))
        cols["start_ns"].append(start)
        cols["end_ns"].append(end)
        cols["state"].append(rng.choice([RUN, RUN, int(State.RUNNABLE), int(State.SYNC_WAIT), UNK], n).astype(np.uint8))
        cols["cpu"].append(rng.integers(-1, 2, n).astype(np.int16))
        cols["addr"].append(rng.choice([0, 0xABC], n).astype(np.uint64))
        cols["waker"].append(rng.choice([-1, 7], n).astype(np.int32))
        cols["repaired"].append(rng.integers(0, 2, n).astype(bool))
        if tid != 103:
            for t in rng.integers(0, int(end[-1]), n // 3):
                rows.append((int(t), int(rng.integers(0, 2)), tid, 1, int(Kind.STAT_RUNTIME), tid,
                             int(rng.integers(1, 200)) * 1000, 0, -1, -1))
    rows.sort(key=lambda r: r[0])
    return {k: np.concatenate(v) for k, v in cols.items()}, RawEvents.from_rows(rows, comms=[])


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3000))
def test_giving_the_table_back_changes_nothing(seed, release):
    """Given back every `release` rows as the pass reads them (the builder's way: the table is
    dropped afterwards), the new table is the same: no row is read after its memory went back (it
    would read zeros), also with two threads cutting at once, each giving back its own rows while
    the other reads the rows either side."""
    from scalestack.trace.builder import _reconcile_rows, _reconcile_steals
    from scalestack.trace.lookup import EventIndex

    cols, events = _big_case(seed)
    got = []
    for r, workers in ((0, 1), (release, 1), (release, 2)):
        index = EventIndex(events)
        states = StateTable(**{k: v.copy() for k, v in cols.items()})
        table, changed, stolen, _, _ = _reconcile_steals(_reconcile_rows(states, index, r, workers=workers), index)
        got.append((table, changed, stolen))
    want, w_changed, w_stolen = got[0]
    for table, changed, stolen in got[1:]:
        for k in StateTable.SCHEMA:
            np.testing.assert_array_equal(getattr(table, k), getattr(want, k), err_msg=k)
        assert changed == w_changed and stolen == w_stolen
