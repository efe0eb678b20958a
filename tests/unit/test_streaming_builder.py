"""The state builder over a recording read in windows gives `build_trace`'s Trace bit for bit:
random scheduler streams and a real recording, cut into random windows (each with its own string
table), read again for every pass."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace import store, streaming
from scalestack.trace.builder import build_trace
from scalestack.trace.events import Kind, RawEvents, concat_events
from scalestack.trace.model import State
from scalestack.trace.streaming import build_trace_windows

from .test_event_facts import DATA, window
from .test_state_builder import D_BIT, S_BIT, ev, event_streams

TABLES = ("threads", "states", "names", "switch_spans", "samples")


def windows_of(events: RawEvents, cuts, seed: int = 0):
    bounds = [0, *sorted(set(cuts)), len(events)]

    def windows():
        rng = np.random.default_rng(seed)
        return (window(events, a, b, rng) for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    return windows


def assert_same(a, b):
    for name in TABLES:
        x, y = getattr(a, name), getattr(b, name)
        for col, want in x.columns().items():
            got = y.columns()[col]
            assert np.asarray(got).dtype == np.asarray(want).dtype, (name, col)
            assert np.array_equal(got, want), (name, col, got, want)
    assert a.meta == b.meta


def both(events, cuts, seed=0, batch_rows=None, **kw):
    """The Trace of `build_trace` and of `build_trace_windows`, held and, with `batch_rows`, written
    in batches of threads of that many walk rows: the same tables and meta, or the same error."""
    try:
        whole = build_trace(events, **kw)
    except UserError as exc:
        with pytest.raises(UserError) as got:
            build_trace_windows(windows_of(events, cuts, seed), **kw)
        assert str(got.value) == str(exc)
        if batch_rows is not None:
            with tempfile.TemporaryDirectory() as d:
                with pytest.raises(UserError) as got:
                    build_trace_windows(windows_of(events, cuts, seed), output=os.path.join(d, "t.trace"),
                                        batch_rows=batch_rows, **kw)
                assert str(got.value) == str(exc) and os.listdir(d) == []  # nothing left behind
        return None
    streamed = build_trace_windows(windows_of(events, cuts, seed), **kw)
    assert_same(whole, streamed)
    if batch_rows is not None:
        with tempfile.TemporaryDirectory() as d:
            out, ref = os.path.join(d, "t.trace"), os.path.join(d, "whole.trace")
            small = build_trace_windows(windows_of(events, cuts, seed), output=out, batch_rows=batch_rows, **kw)
            assert sorted(os.listdir(d)) == ["t.trace"]  # the spills are gone
            store.save(whole, ref)
            assert_same(store.load(ref), store.load(out))
            assert small.threads == whole.threads and small.meta == store.read_meta(out)
    return whole


@settings(max_examples=120, deadline=None)
@given(event_streams(), st.data())
def test_random_streams_in_random_windows(events, data):
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=8))
    kw = data.draw(st.sampled_from([{}, {"end_ns": 400}, {"start_ns": 5}, {"start_ns": 2, "end_ns": 30}]))
    batch_rows = data.draw(st.sampled_from([None, 1, 3, 20, 1 << 22]))
    both(events, cuts, data.draw(st.integers(0, 5)), batch_rows, root_pids=[100], **kw)


@st.composite
def switching_with_run_delays(draw):
    """Three traced threads and a foreign one taking turns on 2 CPUs (woken before they run), with
    eBPF's run-delay report at most switch-outs: the task's run delay and arrivals so far, growing
    by drawn steps (sometimes two arrivals: a switch-in no tracepoint reported)."""
    rows = [(0, 0, 0, Kind.SWITCH, 0, 100, 0), (1, 0, 100, Kind.FORK, 100, 101, 0), (2, 0, 100, Kind.FORK, 100, 102, 0)]
    on_cpu, delay, count, t = {0: 100, 1: 0}, {}, {}, 3
    for _ in range(draw(st.integers(0, 80))):
        t += draw(st.integers(1, 6))
        cpu = draw(st.integers(0, 1))
        cur, nxt = on_cpu[cpu], draw(st.sampled_from([0, 7, 100, 101, 102]))
        if nxt == cur or (nxt != 0 and nxt in on_cpu.values()):
            continue
        if nxt:
            rows.append((t, cpu, cur, Kind.WAKEUP, nxt, cpu, 0))
            t += draw(st.integers(0, 4))
        rows.append((t, cpu, cur, Kind.SWITCH, cur, nxt, draw(st.sampled_from([0, S_BIT, D_BIT]))))
        if cur and draw(st.integers(0, 9)):
            delay[cur] = delay.get(cur, 0) + draw(st.integers(0, 12))
            count[cur] = count.get(cur, 0) + draw(st.sampled_from([1, 1, 1, 2]))
            rows.append((t, cpu, cur, Kind.RUN_DELAY, cur, delay[cur], count[cur]))
        on_cpu[cpu] = nxt
    return ev(rows)


@settings(max_examples=80, deadline=None)
@given(switching_with_run_delays(), st.data())
def test_run_delay_reports_in_random_windows_and_batches(events, data):
    """The traced threads' run-delay reports go to the spill by thread and each batch reconciles
    with its own: the same Trace as the builder given every report."""
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=8))
    batch_rows = data.draw(st.sampled_from([None, 1, 3, 20, 1 << 22]))
    both(events, cuts, data.draw(st.integers(0, 5)), batch_rows, root_pids=[100])


def test_a_run_begun_pieces_before_is_uncharged_in_each_piece():
    """Reports at 8 and 29 count one arrival between them: the thread never left its CPU from its
    switch-in at 12 to 29, so each RUNNABLE inside is UNKNOWN (`builder._current_runs`). Cut into a
    piece per run, the last piece begins two pieces after that report and still reads it."""
    R, RQ, UNK = int(State.RUNNING), int(State.RUNNABLE), int(State.UNKNOWN)
    rows = [(0, 0, 0, Kind.SWITCH, 0, 100, 0), (1, 0, 100, Kind.FORK, 100, 101, 0), (4, 0, 100, Kind.SWITCH, 100, 0, 0),
            (7, 0, 0, Kind.WAKEUP, 100, 0, 0), (7, 0, 0, Kind.SWITCH, 0, 100, 0), (8, 0, 100, Kind.SWITCH, 100, 0, 0),
            (8, 0, 100, Kind.RUN_DELAY, 100, 0, 1), (12, 0, 0, Kind.SWITCH, 0, 100, 0),
            (13, 0, 100, Kind.SWITCH, 100, 0, 0), (21, 0, 0, Kind.SWITCH, 0, 100, 0),
            (22, 0, 100, Kind.SWITCH, 100, 101, 0), (23, 0, 101, Kind.SWITCH, 101, 0, 0),
            (28, 0, 0, Kind.SWITCH, 0, 100, 0), (29, 0, 100, Kind.SWITCH, 100, 0, 0),
            (29, 0, 100, Kind.RUN_DELAY, 100, 0, 2)]
    tr = both(ev(rows), [], batch_rows=1, root_pids=[100])
    s = tr.states
    mine = s.tid == 100
    assert list(zip(s.start_ns[mine].tolist(), s.state[mine].tolist(), strict=True)) == [
        (0, R), (4, RQ), (7, R), (8, RQ), (12, R), (13, UNK), (21, R), (22, UNK), (28, R)]


@settings(max_examples=80, deadline=None)
@given(st.one_of(event_streams(), switching_with_run_delays()), st.data())
def test_a_cut_threads_reports_read_a_few_at_a_time_give_the_same_pieces(events, data):
    """`_cuts` reads a cut thread's runtime and run-delay reports REPORT_ROWS at a time (`_Reports`,
    `_Sorted`): with 1-5 a chunk, every piece is the one it finds holding them whole, and the Trace
    is the whole build's, its rows scanned and its switch spans written SCAN_ROWS (1-5) at a time."""
    step = data.draw(st.integers(1, 5))
    scan = data.draw(st.integers(1, 5))
    cuts = streaming._SpilledRows._cuts

    def compare(self, *args):
        small = cuts(self, *args)
        streaming.REPORT_ROWS = 1 << 30
        try:
            whole = cuts(self, *args)
        finally:
            streaming.REPORT_ROWS = step
        assert small == whole
        return small
    saved = streaming.REPORT_ROWS, streaming.SCAN_ROWS, streaming._SpilledRows._cuts
    streaming.REPORT_ROWS, streaming.SCAN_ROWS, streaming._SpilledRows._cuts = step, scan, compare
    try:
        both(events, data.draw(st.lists(st.integers(0, len(events)), max_size=4)), 0,
             data.draw(st.sampled_from([1, 3, 1 << 20])), root_pids=[100])
    finally:
        streaming.REPORT_ROWS, streaming.SCAN_ROWS, streaming._SpilledRows._cuts = saved


def test_reports_read_a_few_at_a_time_are_found_as_held_whole():
    """`_Reports` over a spill, chunks of 1-4 reports: each instant's answers are those of the
    whole arrays (NumPy), reports that charge nothing (ns 0) among them."""
    from scalestack.trace.spill import ColumnSpill

    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(1, 30))
        time = np.sort(rng.integers(0, 200, n)).astype(np.int64)
        ns = np.where(rng.random(n) < 0.3, 0, rng.integers(0, 60, n)).astype(np.int64)
        spill = ColumnSpill(streaming._REPORT_DTYPES, "slot", 2)
        try:
            spill.add({"slot": np.full(n, 1, np.int32), "seq": np.arange(n), "time": time, "tid": np.ones(n, np.int64),
                       "ns": ns})
            at = np.sort(rng.integers(-5, 210, 12)).astype(np.int64)
            prev = at - rng.integers(0, 40, 12)
            counted = np.flatnonzero(ns > 0)
            p_time, p_from = time[counted], (time - ns)[counted]
            for step in (1, 2, 4, 1 << 20):
                saved, streaming.REPORT_ROWS = streaming.REPORT_ROWS, step
                try:
                    rep = streaming._Reports(spill, 1)
                finally:
                    streaming.REPORT_ROWS = saved
                assert rep.counted == len(counted)
                j = np.searchsorted(p_time, at, "right")
                clear = np.array([p_from[k:].min(initial=1 << 62) > a for k, a in zip(j, at, strict=True)])
                met = (j > 0) & (p_time[np.maximum(j - 1, 0)] > prev) if len(p_time) else np.zeros(len(at), bool)
                if len(counted):
                    np.testing.assert_array_equal(rep.clear_and_met(at, prev), clear & met, err_msg=f"{trial} {step}")
                for a in at.tolist():
                    k = int(np.searchsorted(p_time, a, "right"))
                    want = int(counted[k - 1]) if k else int(np.searchsorted(time, a, "right"))
                    assert rep.first_for(a) == want and rep.first_for(None) == 0
                    assert rep.position(a, "left") == int(np.searchsorted(time, a, "left"))
                    assert rep.position(a, "right") == int(np.searchsorted(time, a, "right"))
        finally:
            spill.close()


@pytest.mark.parametrize("every", [1, 7, 40])
def test_a_recording_in_windows(every):
    """barrier.perf.data (perf record -a of a 3-thread barrier program, 96 events: futex waits,
    runtime reports, switches) in windows of 1, 7 and 40 events; and through `perf_data.load`,
    which reads a recording of more than 4 windows in windows."""
    from scalestack.ingest import perf_data

    events = read_perf_data(DATA / "barrier.perf.data")
    tr = both(events, range(every, len(events), every), batch_rows=every, comm="bi")
    assert len(events) == 96 and len(tr.states) > 10 and len(tr.switch_spans) > 0
    whole = perf_data.load(str(DATA / "barrier.perf.data"), comm="bi", chunk_rows=0)
    streamed = perf_data.load(str(DATA / "barrier.perf.data"), comm="bi", chunk_rows=every)
    assert_same(whole, streamed)


def test_errors_are_the_builders():
    both(RawEvents.empty(), [], 1, root_pids=[100])
    both(ev([(0, 0, 0, Kind.SWITCH, 0, 100, 0)]), [], 1, root_pids=[5])
    both(ev([(0, 0, 0, Kind.SWITCH, 0, 100, 0), (5, 0, 100, Kind.SWITCH, 100, 0, 1)]), [1], 1, root_pids=[100],
         start_ns=9, end_ns=3)


@settings(max_examples=60, deadline=None)
@given(event_streams(), st.lists(st.tuples(st.integers(0, 300), st.sampled_from([100, 101, 102, 7]),
                                           st.integers(-1, 3), st.integers(-1, 3)), min_size=1, max_size=20),
       st.data())
def test_code_samples_in_random_windows(events, samples, data):
    """cpu-clock samples (symbol and binary as comm ids, each window numbering them its own way)
    of traced and foreign threads, inside and outside the trace's window."""
    rows = [(t, 0, tid, 100 if tid >= 100 else tid, int(Kind.SAMPLE), 0x1000 + t, t % 5, 0, sym, dso)
            for t, tid, sym, dso in samples]
    extra = RawEvents.from_rows(rows, comms=["f", "g", "libc.so", "app"])
    events = concat_events([events, extra]).sorted()
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=6))
    kw = data.draw(st.sampled_from([{}, {"end_ns": 100}, {"start_ns": 20}]))
    tr = both(events, cuts, data.draw(st.integers(0, 5)), data.draw(st.sampled_from([None, 2])), root_pids=[100], **kw)
    assert tr is None or len(tr.samples) <= len(samples)


def _piece_counts(monkeypatch) -> list[int]:
    """How many pieces each thread too big for its batch was cut into (1: not cut)."""
    seen: list[int] = []
    cuts = streaming._SpilledRows._cuts

    def spy(self, *args):
        out = cuts(self, *args)
        seen.append(max(len(out), 1))
        return out
    monkeypatch.setattr(streaming._SpilledRows, "_cuts", spy)
    return seen


def test_a_thread_bigger_than_a_batch_is_finished_a_piece_at_a_time(monkeypatch):
    """barrier.perf.data's threads (futex waits, runtime reports) in batches of 2 walk rows: each is
    cut in time into pieces, and the trace is the whole build's."""
    seen = _piece_counts(monkeypatch)
    events = read_perf_data(DATA / "barrier.perf.data")
    both(events, range(7, len(events), 7), batch_rows=2, comm="bi")
    assert len(seen) >= 2 and max(seen) > 2, seen


def _differs(events, batch_rows: int, **kw) -> bool:
    """Whether the trace built in batches of `batch_rows` differs from `build_trace`'s."""
    try:
        whole = build_trace(events, **kw)
    except UserError:
        return False
    with tempfile.TemporaryDirectory() as d:
        out, ref = os.path.join(d, "t.trace"), os.path.join(d, "whole.trace")
        build_trace_windows(windows_of(events, []), output=out, batch_rows=batch_rows, **kw)
        store.save(whole, ref)
        a, b = store.load(ref), store.load(out)
    return a.meta != b.meta or any(not np.array_equal(v, b.states.columns()[k]) for k, v in a.states.columns().items())


def test_cutting_where_a_report_or_a_gap_is_not_whole_is_caught(monkeypatch):
    """The property tests above would see a piece that lacks what it needs: a piece given only the
    runtime reports ending inside it (a piece without one keeps RUNNING the whole thread drops),
    or the run-delay reports up to the piece after it only (a gap sized by a report further on is
    left as it was)."""
    settings_ = settings(max_examples=2000, database=None, deadline=None, phases=[Phase.generate], derandomize=True)
    with monkeypatch.context() as m:
        m.setattr(streaming._Reports, "first_for", lambda self, at: 0 if at is None else self.position(at, "right"))
        find(event_streams(), lambda e: _differs(e, 1, root_pids=[100]), settings=settings_)
    with monkeypatch.context() as m:
        m.setattr(streaming, "_delays_to", lambda delays, at: delays.n if at is None else delays.position(at, "left"))
        find(switching_with_run_delays(), lambda e: _differs(e, 1, root_pids=[100]), settings=settings_)


def test_the_run_delay_reports_are_split_from_a_window_without_holding_it():
    """`_scheduled` gives a window's events and its run-delay reports apart; the window they were
    taken from is not held beside them while the caller reads them."""
    import gc
    import weakref

    rows = [(t, 0, 5, 5, int(Kind.RUN_DELAY if t % 3 == 0 else Kind.FUTEX_ENTER), 5, t, 1, -1, -1) for t in range(30)]
    whole = [RawEvents.from_rows(rows[:15]), RawEvents.from_rows(rows[15:])]
    seen = []

    def windows():
        while whole:
            seen.append(weakref.ref(whole[0]))
            yield whole.pop(0)
    it = streaming._scheduled(windows)
    events, reports = next(it)
    gc.collect()
    assert seen[0]() is None
    assert len(events) == 10 and np.all(reports.kind == Kind.RUN_DELAY) and len(reports) == 5
    assert sum(len(e) + len(r) for e, r in it) == 15


def test_pass_4_reads_the_kept_futex_events_in_any_chunks(monkeypatch):
    """Written in batches, each batch's futex pass reads the futex events the walk kept
    (`_SpilledRows.add_calls`), not the recording: read back 1 to 50 at a time (instants cut
    anywhere), the trace is the whole build's; a log missing its last events is not."""
    events = read_perf_data(DATA / "barrier.perf.data")
    read = []
    chunks = streaming.ColumnLog.chunks

    def spy(self, rows):
        for c in chunks(self, rows):
            read.append(len(c["time"]))
            yield c
    monkeypatch.setattr(streaming.ColumnLog, "chunks", spy)
    futex = np.flatnonzero(np.isin(events.kind, [Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV]))
    n_futex = len(futex)
    for rows in (1, 7, 50):
        monkeypatch.setattr(streaming, "CALL_ROWS", rows)
        read.clear()
        both(events, range(13, len(events), 13), batch_rows=2, comm="bi")
        batches = sum(read) // n_futex
        assert batches >= 2 and sum(read) == batches * n_futex and max(read) == min(rows, n_futex)
    add = streaming._SpilledRows.add_calls
    monkeypatch.setattr(streaming._SpilledRows, "add_calls",
                        lambda self, w, tids: add(self, w.take(np.flatnonzero(w.time < events.time[futex[-4]])), tids))
    assert _differs(events, 2, comm="bi")


def test_read_ahead_makes_one_window_ahead_in_order_and_stops_with_its_caller():
    import threading
    import time

    from scalestack.trace.streaming import read_ahead

    made = []

    def items(n, fail_at=None):
        for k in range(n):
            if k == fail_at:
                raise ValueError(f"item {k} is damaged")
            made.append(k)
            yield k

    got = []
    for k in read_ahead(items(20), cores=2):
        time.sleep(0.002)  # (the thread has time to run ahead, were it not held)
        assert len(made) <= k + 2  # this one and the next, no more
        got.append(k)
    assert got == list(range(20))
    assert list(read_ahead(items(3), cores=1)) == [0, 1, 2]
    made.clear()
    with pytest.raises(ValueError, match="item 5 is damaged"):
        for k in read_ahead(items(9, fail_at=5), cores=2):
            assert k < 5
    made.clear()
    ahead = read_ahead(items(1000), cores=2)
    assert next(ahead) == 0
    ahead.close()  # the caller stops: the thread stops after the item it was making
    time.sleep(0.05)
    assert len(made) <= 2
    assert not any(t.name == "scalestack-read-ahead" for t in threading.enumerate())
