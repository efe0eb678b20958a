"""Criticality, bottle graphs and time in states of a stored trace read in time chunks equal the
whole trace's: Run_j, idle and time in states exactly, C_j to the rounding of its float sums; row
groups follow threads."""

from __future__ import annotations

import dataclasses
import json
import re
import zipfile

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis import chunked, chunked_advice
from scalestack.analysis.advice import advise, with_inferred_wakers
from scalestack.analysis.bottle import bottle
from scalestack.analysis.criticality import criticality
from scalestack.analysis.phase_criticality import phase_criticality
from scalestack.analysis.whatif import whatif
from scalestack.cli import cli
from scalestack.report.source import StoredTrace
from scalestack.trace import State, SwitchSpanTable, store

from ..conftest import requires_recording
from ..unit.test_trace import tiled_traces

TOL = 1e-6  # ns: C_j's float sums, in another order


def _with_spans(trace, shift: int):
    """The trace with switch spans: its RUNNING rows, shifted (spans need not match RUNNING)."""
    s = trace.states
    run = s.state == int(State.RUNNING)
    spans = SwitchSpanTable(tid=s.tid[run], start_ns=s.start_ns[run] + shift, end_ns=s.end_ns[run] + shift,
                            repaired=np.zeros(int(run.sum()), bool))
    return dataclasses.replace(trace, switch_spans=spans)


def _same_crit(whole, part):
    assert np.array_equal(whole.tids, part.tids)
    assert np.array_equal(whole.running_ns, part.running_ns)
    assert whole.idle_ns == part.idle_ns
    assert (whole.span_ns, whole.t0_ns, whole.active) == (part.span_ns, part.t0_ns, part.active)
    np.testing.assert_allclose(part.criticality_ns, whole.criticality_ns, rtol=0, atol=TOL)


def _same_boxes(whole, part):
    assert [(b.label, b.tids, b.area_ns) for b in whole.boxes] == [(b.label, b.tids, b.area_ns) for b in part.boxes]
    np.testing.assert_allclose([b.height_ns for b in part.boxes], [b.height_ns for b in whole.boxes], rtol=0, atol=TOL)
    assert (whole.idle_ns, whole.span_ns, whole.t0_ns) == (part.idle_ns, part.span_ns, part.t0_ns)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), spans=st.sampled_from([None, 0, 7]), group=st.integers(1, 6),
       max_rows=st.integers(1, 40), active=st.sampled_from(["running", "running+runnable"]),
       between=st.one_of(st.none(), st.tuples(st.integers(0, 10_000), st.integers(1, 10_000))))
def test_chunks_give_the_whole_traces_stack_and_bottle(tmp_path_factory, monkeypatch, trace, spans, group, max_rows,
                                                      active, between):
    monkeypatch.setattr(store, "ROW_GROUP", group)  # many row groups, so chunks can skip most
    if spans is not None:
        trace = _with_spans(trace, spans)
    path = tmp_path_factory.mktemp("c") / "t.trace"
    store.save(trace, path)
    if between is not None:
        between = (between[0], between[0] + between[1])
        if min(between[1], trace.end_ns) <= max(between[0], trace.start_ns):
            return
    _same_crit(criticality(trace, active=active, between=between),
               chunked.criticality(path, active=active, between=between, max_rows=max_rows))
    _same_boxes(bottle(trace, group_by="role", active=active, between=between),
                chunked.bottle(path, group_by="role", active=active, between=between, max_rows=max_rows))
    whole = bottle(trace, active=active, between=between, window=997)
    part = chunked.bottle(path, active=active, between=between, window=997, max_rows=max_rows)
    assert len(part.windows) == len(whole.windows)
    for w, p in zip(whole.windows, part.windows, strict=True):
        _same_boxes(w, p)


@given(sizes=st.lists(st.integers(1, 60), min_size=0, max_size=8), size=st.integers(1, 40))
def test_row_groups_hold_a_big_thread_alone(sizes, size):
    tid = np.repeat(np.arange(len(sizes)), sizes)
    bounds = store.group_bounds(tid, size)
    assert bounds[0] == 0 and bounds[-1] == len(tid) and np.all(np.diff(bounds) > 0)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert b - a <= size
        members = np.unique(tid[a:b])
        if len(members) > 1:  # shared only by threads with fewer than size // 8 rows
            assert all(sizes[m] < max(size // 8, 1) for m in members)


@given(max_rows=st.integers(1, 50), grid=st.one_of(st.none(), st.integers(1, 3000)))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_plan_tiles_the_span(tmp_path_factory, monkeypatch, max_rows, grid):
    monkeypatch.setattr(store, "ROW_GROUP", 4)
    n = 200
    trace = scalestack.trace.make_trace(
        {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [n * 10, n * 10]},
        {"tid": [1] * n + [2] * n, "start_ns": [i * 10 for i in range(n)] * 2,
         "end_ns": [(i + 1) * 10 for i in range(n)] * 2, "state": [i % 3 for i in range(2 * n)]})
    path = tmp_path_factory.mktemp("p") / "t.trace"
    store.save(trace, path)
    windows = chunked.plan(path, 5, 1995, max_rows, grid)
    assert windows[0][0] == 5 and windows[-1][1] == 1995
    assert all(a < b for a, b in windows) and all(w[1] == v[0] for w, v in zip(windows[:-1], windows[1:], strict=True))
    if grid is not None:
        assert all((a - 5) % grid == 0 for a, _ in windows)
    # each window overlaps no more rows than max_rows, or than twice the shortest window from its start
    rows, lo, hi = store.group_ranges(path, "states")
    edges = np.unique(np.r_[lo, hi]) if grid is None else 5 + grid * np.arange(1, 2000 // grid + 2)
    for a, b in windows:
        shortest = min(int(edges[edges > a].min(initial=1995)), 1995)
        least = rows[(hi > a) & (lo < shortest)].sum()
        assert rows[(hi > a) & (lo < b)].sum() <= max(max_rows, 2 * least)
    assert len(windows) <= -(-rows.sum() // max_rows) * 4 + 2 or max_rows < 8 or grid is not None


def test_files_group_rows_by_thread_and_delta_encode_times(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "ROW_GROUP", 16)
    n = 100
    trace = scalestack.trace.make_trace(
        {"tid": [1, 2, 3], "name": ["a", "b", "c"], "start_ns": [0, 0, 0], "end_ns": [n, n, 1]},
        {"tid": [1] * n + [2] * n + [3], "start_ns": list(range(n)) * 2 + [0],
         "end_ns": list(range(1, n + 1)) * 2 + [1], "state": [0] * (2 * n + 1)})
    path = tmp_path / "t.trace"
    store.save(trace, path)
    with zipfile.ZipFile(path) as zf, zf.open("states.parquet") as fh:
        md = pq.ParquetFile(fh).metadata
        groups = [md.row_group(g) for g in range(md.num_row_groups)]
        cols = {groups[0].column(c).path_in_schema: groups[0].column(c) for c in range(groups[0].num_columns)}
        assert "DELTA_BINARY_PACKED" in cols["start_ns"].encodings
        tids = [(g.column(0).statistics.min, g.column(0).statistics.max) for g in groups]
    assert all(lo == hi for lo, hi in tids[:-1]) and max(g.num_rows for g in groups) <= 16
    assert store.load(path).equals(trace)


@requires_recording
def test_cli_chunks_a_real_recording(c_programs, tmp_path, monkeypatch):
    """`crit`/`bottle`/`info` of a recorded producer/consumer switch storm (3 threads on 2 cores), saved in
    row groups of 64 rows and read in chunks of a twentieth of its rows, give the JSON of the whole
    load. (How many switches the run makes is the scheduler's: 2 200-5 400 rows for 30 000 items.)"""
    monkeypatch.setattr(store, "ROW_GROUP", 64)
    path = tmp_path / "m.trace"
    scalestack.record([str(c_programs["prodcons"]), "60000", "2", "200"], str(path))
    rows = chunked.stored_rows(path)
    assert rows > 1_500, rows
    meta = store.read_meta(path)
    assert len(chunked.plan(path, meta["start_ns"], meta["end_ns"], rows // 20)) >= 5
    run = CliRunner().invoke
    for args in (["crit"], ["crit", "--active", "running+runnable"], ["bottle", "--group-by", "role"],
                 ["bottle", "--window", "20ms"], ["crit", "--between", "10ms", "60ms"], ["info"]):
        out = {}
        for chunk in ("0", str(rows // 20)):
            res = run(cli, [*args, str(path), "--json", "--chunk-rows", chunk])
            assert res.exit_code == 0, res.output
            out[chunk] = json.loads(res.stdout)
        whole, part = out.values()
        assert json.dumps(_rounded(whole)) == json.dumps(_rounded(part)), args
    loads = []
    monkeypatch.setattr(chunked, "load", lambda *a, **k: loads.append(k) or store.load(*a, **k))
    for args in (["--window", "20ms", "--group-by", "role"], ["--no-timeline", "--active", "running+runnable"]):
        out = {}
        for chunk in ("0", str(rows // 20)):
            del loads[:]
            res = run(cli, ["report", str(path), "-q", "-o", str(tmp_path / chunk), "--chunk-rows", chunk, *args])
            assert res.exit_code == 0, res.output
            assert (len(loads) >= 5) == (chunk != "0"), len(loads)  # read in chunks, or whole
            out[chunk] = json.loads((tmp_path / chunk / "report.json").read_text())
        whole, part = out.values()
        assert set(whole["sections"]) >= {"threads", "criticality", "bottle", "advice"}
        assert ("timeline" in whole) == ("--no-timeline" not in args)
        assert json.dumps(_rounded(whole)) == json.dumps(_rounded(part)), args


def _rounded(x):
    """Floats to 1e-3 ns (C_j's sums in another order); shares and widths to 9 digits."""
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    if isinstance(x, float):
        return float(f"{x:.9g}") if abs(x) < 1e3 else round(x, 3)
    return x


def test_the_public_api_reads_a_path_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "ROW_GROUP", 2)
    n = 50
    trace = scalestack.trace.make_trace(
        {"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [n, n]},
        {"tid": [1] * n + [2] * n, "start_ns": list(range(n)) * 2, "end_ns": list(range(1, n + 1)) * 2,
         "state": [i % 2 for i in range(n)] + [i % 3 == 0 for i in range(n)]})
    path = tmp_path / "t.trace"
    store.save(trace, path)
    _same_crit(scalestack.criticality(trace), scalestack.criticality(str(path), max_rows=3))
    _same_boxes(scalestack.bottle(trace), scalestack.bottle(path, max_rows=3))


def test_cli_refuses_a_negative_chunk(tmp_path):
    res = CliRunner().invoke(cli, ["crit", str(tmp_path / "x.trace"), "--chunk-rows", "-1"])
    assert res.exit_code == 2 and "chunk-rows" in res.output


@pytest.mark.parametrize("between", [(10**12, 10**12 + 5)])
def test_a_range_outside_the_trace_is_one_line(tmp_path, between):
    trace = scalestack.trace.make_trace({"tid": [1], "name": ["a"], "start_ns": [0], "end_ns": [10]},
                                        {"tid": [1], "start_ns": [0], "end_ns": [10], "state": [0]})
    path = tmp_path / "t.trace"
    store.save(trace, path)
    with pytest.raises(scalestack.errors.UserError, match="empty or outside"):
        chunked.criticality(path, between=between, max_rows=1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), wakers=st.lists(st.integers(-1, 4), min_size=64, max_size=64), root=st.integers(-1, 4),
       group=st.integers(1, 6), max_rows=st.integers(1, 40), factor=st.sampled_from([0.5, 2.0, 3.0]))
def test_chunked_whatif_replays_the_whole_trace(tmp_path_factory, monkeypatch, trace, wakers, root, group, max_rows,
                                                factor):
    """The replay walks the chunks' segment ends with its state carried: the same span, float for
    float; the blocked time and its share without a waker exactly; the criticality estimate to the
    rounding of C_j."""
    monkeypatch.setattr(store, "ROW_GROUP", group)
    tids = trace.threads.tid
    s = trace.states
    waker = [int(tids[w % len(tids)]) if w >= 0 else -1 for w in (wakers * 2)[:len(s)]]
    meta = {**trace.meta, **({"root_tid": int(tids[root % len(tids)])} if root >= 0 else {})}
    trace = dataclasses.replace(trace, states=type(s)(**{**{c: getattr(s, c) for c in s.SCHEMA}, "waker": waker}),
                                meta=meta)
    path = tmp_path_factory.mktemp("w") / "t.trace"
    store.save(trace, path)
    tid = int(tids[-1])
    whole = whatif(trace, tid, factor)
    part = chunked_advice.whatif(path, tid, factor, max_rows=max_rows)
    assert part.replay_runtime_ns == whole.replay_runtime_ns
    assert (part.runtime_ns, part.unknown_waker_share, part.tid, part.factor) == \
        (whole.runtime_ns, whole.unknown_waker_share, whole.tid, whole.factor)
    assert part.crit_runtime_ns == pytest.approx(whole.crit_runtime_ns, abs=TOL)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), group=st.integers(1, 6), max_rows=st.integers(1, 40),
       active=st.sampled_from(["running", "running+runnable"]))
def test_chunked_phases_are_the_whole_traces(tmp_path_factory, monkeypatch, trace, group, max_rows, active):
    """The same phases (a chunk's first instant cuts as in the whole trace), the same gains to the
    rounding of their sums."""
    monkeypatch.setattr(store, "ROW_GROUP", group)
    path = tmp_path_factory.mktemp("p") / "t.trace"
    store.save(trace, path)
    whole = phase_criticality(trace, factor=2.0, active=active)
    part = chunked_advice.phase_gain(path, factor=2.0, active=active, max_rows=max_rows)
    assert part.phases == whole.phases == len(whole.bounds_ns) - 1
    assert np.array_equal(part.lead_ns, whole.lead_ns) and np.array_equal(part.lead_phases, whole.lead_phases)
    np.testing.assert_allclose(part.gain_ns, whole.gain_ns, rtol=0, atol=TOL)
    lead = np.sort(whole.gain_ns)[-2:]
    if len(lead) < 2 or lead[1] - lead[0] > TOL:  # else a tie that rounding may break either way
        assert part.best_tid == whole.best_tid
    assert (part.span_ns, part.factor) == (whole.span_ns, whole.factor) and np.array_equal(part.tids, whole.tids)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=tiled_traces(), group=st.integers(1, 6), max_rows=st.integers(1, 40),
       span=st.one_of(st.none(), st.tuples(st.integers(-100, 10_100), st.integers(-100, 10_100))),
       backwards=st.booleans())
def test_chunks_give_the_whole_traces_time_in_states(tmp_path_factory, monkeypatch, trace, group, max_rows, span,
                                                     backwards):
    """Exactly, each row counted once though windows read it again; `span` gives the meta a range
    the rows need not lie in (or an empty one): the first and last windows take what lies outside.
    `backwards`: states out of time order (not a valid trace, but summed all the same)."""
    monkeypatch.setattr(store, "ROW_GROUP", group)
    if span is not None:
        trace = trace.with_meta(start_ns=span[0], end_ns=span[1])
    if backwards:
        trace = dataclasses.replace(trace, states=trace.states.take(np.arange(len(trace.states))[::-1]))
    trace = _with_spans(trace, 3)  # spans are stored but not read
    path = tmp_path_factory.mktemp("s") / "t.trace"
    store.save(trace, path)
    seen = []
    threads, times = chunked.time_in_states(path, max_rows=max_rows, progress=lambda k, n: seen.append((k, n)))
    assert threads == trace.threads
    assert times.dtype == np.int64 and np.array_equal(times, trace.time_in_states())
    assert seen and seen[-1][0] == seen[-1][1] == len(seen)
    if span is None or span[1] > span[0]:  # summed on the way by a report's criticality pass (states and spans)
        assert np.array_equal(StoredTrace(path, max_rows).time_in_states(), trace.time_in_states())


def _barrier_trace(path, monkeypatch, group: int):
    """The recorded barrier program (tests/data), saved in row groups of `group` rows; its rows."""
    from pathlib import Path

    from scalestack.ingest.perf_data import read_perf_data
    from scalestack.trace.builder import build_trace

    monkeypatch.setattr(store, "ROW_GROUP", group)
    data = Path(__file__).resolve().parents[1] / "data" / "barrier.perf.data"
    trace = build_trace(read_perf_data(data), comm="bi").with_meta(warnings=["a warning, to be printed"])
    store.save(trace, path)
    return chunked.stored_rows(path)


def test_info_reads_a_big_trace_in_chunks(tmp_path, monkeypatch):
    """`info` of a trace of more rows than --chunk-rows reads it in chunks (without loading it
    whole) and prints what it prints of the whole load, as JSON and as the table."""
    rows = _barrier_trace(tmp_path / "b.trace", monkeypatch, 4)
    calls = []
    real = chunked.time_in_states
    monkeypatch.setattr(chunked, "time_in_states", lambda *a, **k: calls.append(k["max_rows"]) or real(*a, **k))
    run = CliRunner().invoke
    printed = {}
    for args in (["--json"], []):
        out = {}
        for chunk in ("0", "3", str(rows // 5), str(rows)):
            res = run(cli, ["info", str(tmp_path / "b.trace"), *args, "--chunk-rows", chunk])
            assert res.exit_code == 0, res.output
            out[chunk] = res.stdout
        assert len(set(out.values())) == 1, args
        printed[bool(args)] = out["0"]
    assert calls == [3, rows // 5] * 2  # --chunk-rows N with N >= the rows, or 0, reads it whole
    assert "a warning, to be printed" in printed[False]
    data = json.loads(printed[True])
    assert data["warnings"] == ["a warning, to be printed"] and sum(
        sum(v for k, v in t.items() if k.endswith("_ns") and k[:-3] in [s.label for s in State])
        for t in data["threads"]) > 0


@st.composite
def advised_traces(draw):
    """Tiled traces with futex waits on a few words, wakers among the threads, unknown (-1) or
    outside the trace (999, so the advice infers them), and thread names that may form a pool."""
    trace = draw(tiled_traces())
    s, th = trace.states, trace.threads
    tids = th.tid.tolist()
    n = len(s)
    waker = [draw(st.sampled_from(tids + [-1, 999])) for _ in range(n)]
    addr = [draw(st.sampled_from([0x10, 0x20, 0x30])) if x == int(State.SYNC_WAIT) else 0 for x in s.state.tolist()]
    pool = draw(st.booleans())
    names = [f"w-{k}" if pool and k else f"t{t}" for k, t in enumerate(tids)]
    cols = {**{c: getattr(s, c) for c in s.SCHEMA}, "waker": waker, "addr": addr}
    return dataclasses.replace(
        trace, states=type(s)(**cols), threads=type(th)(**{**{c: getattr(th, c) for c in th.SCHEMA}, "name": names}),
        meta={**trace.meta, "cores": draw(st.integers(1, 4))})


def _same_advice(whole, part):
    """Findings equal but for the float rounding of criticality sums (a tie between two findings'
    gains may then order them either way: compared as a set)."""
    def key(f):
        return (f.kind, f.tid, f.addr, f.title)

    assert (whole.span_ns, whole.alone_ns, whole.caused_wait_ns) == (part.span_ns, part.alone_ns, part.caused_wait_ns)
    assert list(whole.caused_wait_ns) == list(part.caused_wait_ns)  # the same order too
    w, p = sorted(whole.findings, key=key), sorted(part.findings, key=key)
    assert [key(f) for f in w] == [key(f) for f in p]
    for f, g in zip(w, p, strict=True):
        assert g.predicted_speedup == pytest.approx(f.predicted_speedup, rel=1e-9)
        if f.detail != g.detail:  # numbers printed from rounded floats may differ in the last digit shown
            nums = re.compile(r"\d+(?:\.\d+)?")
            assert nums.sub("#", f.detail) == nums.sub("#", g.detail)
            for x, y in zip(nums.findall(f.detail), nums.findall(g.detail), strict=True):
                assert float(y) == pytest.approx(float(x), abs=0.011, rel=1e-3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=advised_traces(), group=st.integers(1, 6), max_rows=st.integers(1, 40))
def test_chunked_advice_is_the_whole_traces(tmp_path_factory, monkeypatch, trace, group, max_rows):
    """The wakers inferred chunk by chunk are the whole trace's, row for row; the advice the same."""
    monkeypatch.setattr(store, "ROW_GROUP", group)
    path = tmp_path_factory.mktemp("a") / "t.trace"
    store.save(trace, path)
    want = with_inferred_wakers(trace).states
    want = dict(zip(zip(want.tid.tolist(), want.start_ns.tolist(), strict=True), want.waker.tolist(), strict=True))
    infer = chunked_advice._InferredWakers()
    windows = chunked.plan(path, trace.start_ns, trace.end_ns, max_rows)
    for k, a, b, part in chunked._chunks(path, windows, None):
        waker = infer(k, len(windows), a, b, part)
        rows = np.flatnonzero(chunked_advice._ends_in(part.states, k, len(windows), a, b))
        for i in rows.tolist():
            assert waker[i] == want[(int(part.states.tid[i]), int(part.states.start_ns[i]))]
    _same_advice(advise(trace), chunked_advice.advise(path, max_rows=max_rows))
    _same_advice(advise(trace), StoredTrace(path, max_rows).advise())  # its first pass shared with a report's


@pytest.mark.parametrize("workload", ["pipeline", "pmd", "shifting_critical", "lock_critical", "random", "bfs",
                                      "streamcluster", "gc_heavy"])
def test_chunked_advice_of_simulated_programs(tmp_path, monkeypatch, workload):
    """The simulator's programs (locks, pools, phases, a serial step), saved in row groups of 8 rows
    and read in chunks of 3 and 40 rows, get the whole trace's advice through the CLI."""
    from scalestack.sim.engine import simulate
    from scalestack.sim.workloads import get

    monkeypatch.setattr(store, "ROW_GROUP", 8)
    trace = simulate(get(workload), cores=2).trace
    path = tmp_path / "t.trace"
    store.save(trace, path)
    whole = CliRunner().invoke(cli, ["advise", str(path), "--json", "--chunk-rows", "0"])
    assert whole.exit_code == 0, whole.output
    for rows in (3, 40):
        part = CliRunner().invoke(cli, ["advise", str(path), "--json", "--chunk-rows", str(rows)])
        assert part.exit_code == 0, part.output
        w, p = json.loads(whole.output), json.loads(part.output)
        assert [f["title"] for f in w["findings"]] == [f["title"] for f in p["findings"]]
        assert (w["alone_ns"], w["caused_wait_ns"]) == (p["alone_ns"], p["caused_wait_ns"])
        for f, g in zip(w["findings"], p["findings"], strict=True):
            assert g["predicted_speedup"] == pytest.approx(f["predicted_speedup"], rel=1e-9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=advised_traces(), group=st.integers(1, 6), max_rows=st.integers(1, 40))
def test_chunked_free_core_wait_is_the_whole_traces(tmp_path_factory, monkeypatch, trace, group, max_rows):
    """The wait for a CPU while a core was free of the program, window by window, adds up to the
    whole trace's (the advice's cpu-contention finding reads it from either)."""
    from scalestack.analysis.advice import runnable_beside_free_cores

    monkeypatch.setattr(store, "ROW_GROUP", group)
    path = tmp_path_factory.mktemp("f") / "t.trace"
    store.save(trace, path)
    first = chunked_advice.AdviceFacts()
    windows = chunked.plan(path, trace.start_ns, trace.end_ns, max_rows)
    for k, a, b, part in chunked._chunks(path, windows, None):
        first(k, len(windows), a, b, part)
    assert first.runnable_free == runnable_beside_free_cores(trace, trace.meta["cores"])
    assert first.runnable_free <= first.runnable
