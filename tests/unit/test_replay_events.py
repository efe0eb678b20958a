"""The what-if replay merges its events from the states' per-thread runs (whatif._Events) instead
of sorting them: the order is ``np.lexsort((kind, time))`` over births and segment ends, and the
replayed span is the one of the replay over that sorted array."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis import whatif
from scalestack.trace import NameTable, State, StateTable, ThreadTable, Trace


def _trace(threads: list[tuple[int, int]], states: list[tuple[int, int, int, int, int]], root: int | None = None,
           ppid: list[int] | None = None, end: int = 100):
    """threads (tid, start); states (tid, start, end, state, waker) in the given row order, unchecked;
    ppid: each thread's creator (default -1, unknown)."""
    th = ThreadTable(tid=[t for t, _ in threads], pid=[1] * len(threads), ppid=ppid or [-1] * len(threads),
                     name=[f"t{t}" for t, _ in threads], role=["app"] * len(threads),
                     start_ns=[s for _, s in threads], end_ns=[end] * len(threads),
                     start_known=[True] * len(threads), exited=[False] * len(threads))
    cols = list(zip(*states, strict=True)) if states else [[]] * 5
    sts = StateTable(tid=cols[0], start_ns=cols[1], end_ns=cols[2], state=cols[3], cpu=[-1] * len(states),
                     addr=[0] * len(states), waker=cols[4], repaired=[False] * len(states))
    meta = {"start_ns": 0, "end_ns": end, **({"root_tid": root} if root is not None else {})}
    return Trace(threads=th, states=sts, names=NameTable.empty(), meta=meta)


def _lexsorted(trace: Trace) -> np.ndarray:
    """The order the replay walks: births (kind 0), then RUNNING ends (1) before other ends (2)."""
    st = trace.states
    t = np.concatenate([trace.threads.start_ns, st.end_ns])
    kind = np.concatenate([np.zeros(len(trace.threads), np.int8), np.where(st.state == State.RUNNING, 1, 2)])
    return np.lexsort((kind, t))


def _replay_reference(trace: Trace, scale: dict[int, float]) -> float:
    """The replay over the lexsorted events, as a plain loop (the code before the merge)."""
    tids = trace.threads.tid
    n, st = len(tids), trace.states
    root_k = int(trace.thread_index(trace.meta.get("root_tid", int(tids[0])), missing=-1)[0])
    inv = 1.0 / np.array([scale.get(int(t), 1.0) for t in tids])
    k_of = trace.thread_index(st.tid)
    waker_k = trace.thread_index(st.waker, missing=-1)
    first_row = np.ones(len(st), bool)
    first_row[1:] = st.tid[1:] != st.tid[:-1]
    first_of = np.full(n, -1)
    rows = np.flatnonzero(first_row)
    first_of[k_of[rows]] = rows
    birth = trace.threads.start_ns
    parent = trace.thread_index(trace.threads.ppid, missing=-1)
    cursor, last_end, nxt = np.zeros(n), birth.astype(float), np.zeros(n, bool)
    cut = {}  # thread -> (re-timed start, original start) of a last wait the recording's end cut
    for e in _lexsorted(trace):
        if e < n:
            s = float(birth[e])
            p = parent[e] if parent[e] >= 0 and parent[e] != e else root_k  # its creator, else the root
            if p >= 0 and p != e and s > trace.start_ns:
                cursor[e] = cursor[p] + (s - last_end[p]) * (inv[p] if nxt[p] else 1.0)
            else:
                cursor[e] = s
            last_end[e] = s
            nxt[e] = first_of[e] >= 0 and st.state[first_of[e]] == State.RUNNING
            continue
        i = e - n
        k = k_of[i]
        d = float(st.end_ns[i] - st.start_ns[i])
        w = waker_k[i]
        if st.state[i] == State.RUNNING:
            new = cursor[k] + d * inv[k]
        elif w >= 0 and w != k and st.state[i] != State.RUNNABLE:
            new = max(cursor[k], cursor[w] + (float(st.end_ns[i]) - last_end[w]) * (inv[w] if nxt[w] else 1.0))
        else:
            new = cursor[k] + d
            if st.state[i] != State.RUNNABLE and st.end_ns[i] >= trace.end_ns:
                cut[k] = (cursor[k], float(st.start_ns[i]))
        cursor[k], last_end[k] = new, float(st.end_ns[i])
        nxt[k] = i + 1 < len(st) and not first_row[i + 1] and st.state[i + 1] == State.RUNNING
    if not cut:
        return cursor.max() - trace.start_ns
    end = max(cut[k][0] if k in cut else cursor[k] for k in range(n))
    orig = max(cut[k][1] if k in cut else last_end[k] for k in range(n))
    return end - trace.start_ns + max(trace.end_ns - orig, 0.0)


def test_hand_checked_order():
    # thread 1 from 0: run [0,5), wait [5,10) woken by 2, run [10,12); thread 2 from 5: run [5,10), sleep [10,12)
    tr = _trace([(1, 0), (2, 5)], [(1, 0, 5, 0, -1), (1, 5, 10, 2, 2), (1, 10, 12, 0, -1),
                                   (2, 5, 10, 0, -1), (2, 10, 12, 4, -1)])
    # births 0 (t1 at 0), 1 (t2 at 5); rows as 2 + row. At 5: the birth, then row 0; at 10: row 3
    # (RUNNING) before row 1 (waiting); at 12: row 2 (RUNNING), then row 4
    assert whatif._Events(tr).order(tr).tolist() == [0, 1, 2, 5, 3, 4, 6]
    assert whatif.replay_runtime(tr, {}) == 12.0
    # thread 2 twice as fast: its run ends at 7.5, so thread 1's wait does, and its last run at 9.5
    assert whatif.replay_runtime(tr, {2: 2.0}) == 9.5


def test_a_thread_is_born_where_its_creator_is():
    """Root 1 starts M (2) and waits for it; M runs 100, starts W (3), waits for it, runs 90 and exits.
    M twice as fast: W is born at 60 (M's re-timed start of it), runs to 160, M resumes and ends at
    205, the root at 206: 301/206. Placed by the root's schedule (only waiting), W was born at its
    original 110 and the run ended at 256: a JVM's main() thread is no child of the root either."""
    rows = [(1, 0, 10, 0, -1), (1, 10, 300, 2, 2), (1, 300, 301, 0, -1),
            (2, 10, 110, 0, -1), (2, 110, 210, 2, 3), (2, 210, 300, 0, -1), (3, 110, 210, 0, -1)]
    tr = _trace([(1, 0), (2, 10), (3, 110)], rows, root=1, ppid=[-1, 1, 2], end=301)
    assert whatif.replay_runtime(tr, {}) == 301.0
    assert whatif.replay_runtime(tr, {2: 2.0}) == 206.0
    unknown = _trace([(1, 0), (2, 10), (3, 110)], rows, root=1, end=301)  # no creators known: the root's
    assert whatif.replay_runtime(unknown, {2: 2.0}) == 256.0


def test_a_wait_the_recording_cut_ends_with_the_rest_of_the_run():
    """An attach window: main (1) is `unknown` (in a join) from before the window to its end, worker
    2 runs [0, 100). Worker twice as fast: the run is 50 long, not pinned at 100 by main's wait. When
    the worker then sleeps [60, 100) to the end too, the stretch in which all wait keeps its 40."""
    tr = _trace([(1, 0), (2, 0)], [(1, 0, 100, int(State.UNKNOWN), -1), (2, 0, 100, 0, -1)], root=1)
    assert whatif.replay_runtime(tr, {}) == 100.0
    assert whatif.replay_runtime(tr, {2: 2.0}) == 50.0
    idle_end = _trace([(1, 0), (2, 0)], [(1, 0, 100, int(State.UNKNOWN), -1), (2, 0, 60, 0, -1),
                                          (2, 60, 100, int(State.SLEEP), 0)], root=1)
    assert whatif.replay_runtime(idle_end, {}) == 100.0
    assert whatif.replay_runtime(idle_end, {2: 2.0}) == 70.0
    # woken at the end by a traced thread, a wait is no cut one: it ends where its waker gets
    woken = _trace([(1, 0), (2, 0)], [(1, 0, 100, int(State.SYNC_WAIT), 2), (2, 0, 100, 0, -1)], root=1)
    assert whatif.replay_runtime(woken, {2: 2.0}) == 50.0


@st.composite
def _any_traces(draw):
    """Threads with states in any row order (runs break where the order goes back), ties everywhere."""
    n = draw(st.integers(1, 4))
    threads = [(10 + k, draw(st.integers(0, 6))) for k in range(n)]
    rows = []
    for tid, start in threads:
        t = start
        for _ in range(draw(st.integers(0, 6))):
            end = t + draw(st.integers(0, 4))  # empty ones too: equal ends within a thread
            rows.append((tid, t, end, draw(st.sampled_from([0, 1, 2, 4])),
                         draw(st.sampled_from([-1, 99] + [x for x, _ in threads]))))
            t = end
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    ppid = [draw(st.sampled_from([-1, 98] + [x for x, _ in threads])) for _ in threads]
    # the recording ends after every row, or where the last ones end (those waits were cut by it)
    last = max([e for _, _, e, _, _ in rows] + [s for _, s in threads])
    return _trace(threads, rows, root=draw(st.sampled_from([None, 10, 98])), ppid=ppid,
                  end=draw(st.sampled_from([100, last])))


@settings(max_examples=300, deadline=None)
@given(_any_traces(), st.floats(0.25, 4.0))
def test_merged_events_and_replay_match_the_sorted_ones(tr, factor):
    assert np.array_equal(whatif._Events(tr).order(tr), _lexsorted(tr))
    for t in tr.threads.tid.tolist():
        assert whatif.replay_runtime(tr, {t: factor}) == _replay_reference(tr, {t: factor})


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**9), st.integers(0, 5), st.integers(-1, 3)),
                max_size=50))
def test_blocked_time_is_the_masked_sums(rows):
    """whatif's blocked and unknown-waker ns in one pass equal the masked NumPy sums they replace."""
    start = np.array([a for a, *_ in rows], np.int64)
    end = start + np.array([d for _, d, *_ in rows], np.int64)
    state = np.array([s for *_, s, _ in rows], np.int8)
    waker = np.array([w for *_, w in rows], np.int32)
    blocked = (state != State.RUNNING) & (state != State.RUNNABLE)
    unk = blocked & (waker <= 0)  # none seen (-1) or the idle task (0)
    tot, got_unk = whatif._blocked_ns(start, end, state, waker)
    assert tot == (end[blocked] - start[blocked]).sum() and got_unk == (end[unk] - start[unk]).sum()
