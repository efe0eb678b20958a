"""The timeline's data: lanes grouped by role and pool, intervals packed without loss, and the
criticality strip agreeing with the criticality stack."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.criticality import criticality
from scalestack.report import ReportOptions, build_report, write_report
from scalestack.report import timeline as timeline_module
from scalestack.report.browser import browser_page, open_report, why_not
from scalestack.report.timeline import (
    coarsen,
    critical_segments,
    detail_width,
    lane_order,
    pool_name,
    timeline_data,
    unpack,
)
from scalestack.trace import State, make_trace

from ..analysis.fig32 import fig32_trace
from ..conftest import ROOT


@st.composite
def traces(draw):
    """Random traces whose states tile each thread's lifetime, with CPUs, futexes and wakers."""
    n = draw(st.integers(1, 5))
    tids, starts, ends, cols = [], [], [], {k: [] for k in ("tid", "start_ns", "end_ns", "state", "cpu", "addr", "waker")}
    for k in range(n):
        cuts = sorted(set(draw(st.lists(st.integers(0, 10_000), min_size=2, max_size=12))))
        if len(cuts) < 2:
            cuts = [0, 1]
        tids.append(100 + k)
        starts.append(cuts[0])
        ends.append(cuts[-1])
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            s = draw(st.integers(0, 5))
            cols["tid"].append(100 + k)
            cols["start_ns"].append(a)
            cols["end_ns"].append(b)
            cols["state"].append(s)
            cols["cpu"].append(draw(st.integers(0, 3)) if s in (0, 1) else -1)
            cols["addr"].append(draw(st.sampled_from([0x1000, 0x2040, 2**63 + 8])) if s == 2 else 0)
            cols["waker"].append(draw(st.sampled_from([-1, *range(100, 100 + n)])) if s == 2 else -1)
    names = [draw(st.sampled_from(["main", "worker-1", "worker-2", "GC Thread#0", "pool 3"])) for _ in tids]
    return make_trace({"tid": tids, "name": names, "start_ns": starts, "end_ns": ends}, cols)


@settings(max_examples=60, deadline=None)
@given(traces())
def test_packed_intervals_decode_to_the_trace(trace):
    """Every interval comes back exactly: lane, start, end, state, CPU, wait object, waker."""
    trace.validate()
    data = timeline_data(trace, ReportOptions())
    p = data["payload"]
    arr = unpack(p)
    t0 = trace.start_ns
    tid_of_lane = np.array([ln["tid"] for ln in p["lanes"]])
    lane = np.repeat(np.arange(len(tid_of_lane)), np.diff(arr["lane_off"].astype(np.int64)))
    got = sorted(zip(tid_of_lane[lane].tolist(), (arr["start"] + t0).astype(np.int64).tolist(),
                     (arr["end"] + t0).astype(np.int64).tolist(), arr["state"].tolist(), arr["cpu"].tolist(),
                     [p["addrs"][i] for i in arr["obj"]], arr["waker"].tolist(), strict=True))
    s = trace.states
    want = sorted(zip(s.tid.tolist(), s.start_ns.tolist(), s.end_ns.tolist(), s.state.tolist(), s.cpu.tolist(),
                      [f"0x{int(a):x}" if a else "" for a in s.addr], s.waker.tolist(), strict=True))
    assert got == want
    assert sorted(tid_of_lane.tolist()) == sorted(trace.threads.tid.tolist())
    assert data["summary"]["intervals"] == len(s)


@settings(max_examples=60, deadline=None)
@given(traces())
def test_criticality_strip_adds_up_to_the_criticality_stack(trace):
    """The strip's segments tile the run; their time with r > 0 is the criticalities' total (each
    instant is divided among its r threads), the r = 0 time is the idle time, and a thread's time
    alone is at most its criticality."""
    order, _ = lane_order(trace)
    lane_of_row = np.empty(len(order), np.int64)
    lane_of_row[order] = np.arange(len(order))
    a, b, r, lone = critical_segments(trace, lane_of_row)
    res = criticality(trace)
    assert a[0] == trace.start_ns and b[-1] == trace.end_ns and np.array_equal(a[1:], b[:-1])
    d = (b - a).astype(np.float64)
    assert np.sum(d[r > 0]) == pytest.approx(res.criticality_ns.sum(), abs=1e-6)
    assert np.sum(d[r == 0]) == pytest.approx(res.idle_ns)
    assert np.all((lone >= 0) == (r == 1))
    alone = np.bincount(lone[r == 1], weights=d[r == 1], minlength=len(order))
    crit_by_lane = res.criticality_ns[order]
    assert np.all(alone <= crit_by_lane + 1e-6)


@settings(max_examples=100, deadline=None)
@given(traces(), st.sampled_from(["running", "running+runnable"]), st.booleans())
def test_strip_without_a_timeline_is_the_timelines(trace, active, spans):
    """The strip merged from the intervals as they go (no shared timeline yet) is the one read from
    the shared timeline, segment for segment; so is the criticality stack."""
    import dataclasses

    from scalestack.analysis import criticality as crit_module
    from scalestack.trace import SwitchSpanTable

    if spans:  # switch spans: the RUNNING rows, a little later
        s = trace.states
        run = s.state == int(State.RUNNING)
        trace = dataclasses.replace(trace, switch_spans=SwitchSpanTable(
            tid=s.tid[run], start_ns=s.start_ns[run] + 3, end_ns=s.end_ns[run] + 3, repaired=np.zeros(int(run.sum()), bool)))
    lanes = np.arange(len(trace.threads), dtype=np.int64)[::-1].copy()
    fresh = critical_segments(trace, lanes, active)
    first = crit_module._criticality(trace, active, trace.start_ns, trace.end_ns)
    crit_module.critical_sweep(trace, active, trace.start_ns, trace.end_ns)  # now shared
    assert all(np.array_equal(x, y) for x, y in zip(fresh, critical_segments(trace, lanes, active), strict=True))
    again = crit_module._criticality(trace, active, trace.start_ns, trace.end_ns)
    assert np.array_equal(first.criticality_ns, again.criticality_ns) and first.idle_ns == again.idle_ns


@settings(max_examples=100, deadline=None)
@given(traces(), st.sampled_from(["running", "running+runnable"]), st.integers(1, 3000))
def test_summarised_strip_without_its_segments_is_the_summary_of_its_segments(trace, active, width):
    """The strip summarised as its segments are made equals `coarsen` of the whole strip, with and
    without a shared timeline; and its count is the strip's."""
    from scalestack.analysis import criticality as crit_module
    from scalestack.report.timeline import CriticalStrip, coarsen

    lanes = np.arange(len(trace.threads), dtype=np.int64)
    cs, ce, cr, cl = critical_segments(trace, lanes, active)
    key = (cl + 1) * 256 + np.minimum(cr, 255)
    want = coarsen(np.array([0, len(cs)]), cs, ce, key, trace.start_ns, width)[1:]
    strip = CriticalStrip(trace, lanes, active)
    assert strip.count() == len(cs)
    got = strip.coarse(trace.start_ns, width, len(cs))
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))
    crit_module.critical_sweep(trace, active, trace.start_ns, trace.end_ns)  # now shared
    strip = CriticalStrip(trace, lanes, active)
    assert strip.count() == len(cs)
    got = strip.coarse(trace.start_ns, width, len(cs))
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))


def test_fig32_strip_names_the_thread_that_runs_alone():
    """Thesis fig. 3.2: T0 runs alone for the last 5 units; before, 2 to 4 threads share the CPUs."""
    tr = fig32_trace()
    order, groups = lane_order(tr)
    lane_of_row = np.empty(len(order), np.int64)
    lane_of_row[order] = np.arange(len(order))
    a, b, r, lone = critical_segments(tr, lane_of_row)
    assert r.tolist() == [4, 3, 2, 3, 2, 3, 4, 1]
    assert (b - a).tolist() == [3e6, 3e6, 1e6, 3e6, 1e6, 3e6, 3e6, 5e6]
    assert tr.threads.tid[order[lone[-1]]] == 10


def test_lanes_grouped_by_role_then_pool():
    names = ["java", "worker-2", "GC Thread#1", "worker-1", "C2 CompilerThre", "GC Thread#0", "reader"]
    n = len(names)
    tr = make_trace({"tid": list(range(1, n + 1)), "name": names, "start_ns": [0, 5, 1, 2, 3, 1, 4],
                     "end_ns": [10] * n},
                    {"tid": list(range(1, n + 1)), "start_ns": [0, 5, 1, 2, 3, 1, 4], "end_ns": [10] * n,
                     "state": [int(State.RUNNING)] * n},
                    meta={"root_tid": 1})
    order, groups = lane_order(tr)
    assert [tr.threads.name[i] for i in order][:4] == ["java", "worker-1", "worker-2", "reader"]
    assert groups[1] == groups[2] == "app · worker"
    gc = [g for g in groups if "GC Thread" in g]
    assert gc == ["gc · GC Thread"] * 2
    assert groups[0] == "main" and groups[3] == "app"  # lone threads: their role
    assert pool_name("GC Thread#12") == "GC Thread" and pool_name("worker-3") == "worker"
    assert pool_name("pool-1-thread-2") == "pool-1-thread" and pool_name("42") == "42"


def test_windows_and_phases_become_marks():
    tr = fig32_trace()
    data = timeline_data(tr, ReportOptions(), [{"kind": "phase", "label": "phase 1", "tid": 11, "t0_ns": 0,
                                                 "t1_ns": 3_000_000}])
    marks = data["payload"]["marks"]
    phase = [m for m in marks if m["kind"] == "phase"]
    assert phase == [{"kind": "phase", "label": "phase 1", "t0": 0, "t1": 3_000_000, "lane": 1}]
    windows = [m for m in marks if m["kind"] == "window"]  # none given: windows of a round length
    assert windows[0]["t0"] == 0 and windows[-1]["t1"] == tr.wall_ns and len(windows) == 11
    assert all(w["t1"] - w["t0"] == 2_000_000 for w in windows[:-1])


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_phases_are_selectable_in_chromium(tmp_path):
    """A sampled (simulated) run with planted phases: each phase is in the menu and selecting it
    spans its intervals."""
    from scalestack.sim.samples import planted_run

    trace = planted_run(threads=3, n_phases=2, rounds=3, total_cycles=2.4e10).trace
    report = build_report(trace, ReportOptions())
    written = write_report(report, str(tmp_path))
    marks = [m for s in report.sections for m in s.marks if m["kind"] == "phase"]
    assert {m["label"] for m in marks} == {"phase 1", "phase 2"}
    with browser_page() as (page, errors):
        info = open_report(page, written["report.html"])
        assert info["error"] is None and info["lanes"] == len(trace.threads) and info["painted"] > 0
        assert any(o.startswith("phase 2 (") for o in page.locator(".sst-sel option").all_inner_texts())
        page.select_option(".sst-sel", "pphase 2")
        r = page.evaluate("() => window.scalestackTimeline.visibleRange()")
        two = [m for m in marks if m["label"] == "phase 2"]
        a, b = min(m["t0_ns"] for m in two) - trace.start_ns, max(m["t1_ns"] for m in two) - trace.start_ns
        w = min(b - a, trace.wall_ns)  # the view keeps the phase's extent, moved inside the run
        a = min(max(a, 0), trace.wall_ns - w)
        assert r == pytest.approx([a, a + w])
        assert errors == []


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_benchmark_quick_prints_paint_and_zoom_times():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speed" / "report_browser.py"), "--quick"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^100,000 intervals", proc.stdout, re.M)
    assert re.search(r"first paint: \d+ ms", proc.stdout) and re.search(r"zoom, whole run in view: median [\d.]+ ms",
                                                                        proc.stdout)


def _lanes(draw_lists):
    """(lane_off, starts, ends, keys) of lanes given as lists of (duration, key), tiling from 0."""
    off, starts, ends, keys = [0], [], [], []
    for lane in draw_lists:
        t = 0
        for d, k in lane:
            starts.append(t)
            ends.append(t + d)
            keys.append(k)
            t += d
        off.append(len(starts))
    return tuple(np.array(x, np.int64) for x in (off, starts, ends, keys))


lanes_st = st.lists(st.lists(st.tuples(st.integers(1, 500), st.integers(0, 5)), max_size=30), min_size=1, max_size=4)


def test_coarsen_worked_example():
    # one lane: 0-30 state 1, 30-35 state 2, 35-100 state 3; buckets of 20 ns
    off, s, e, k = coarsen(np.array([0, 3]), np.array([0, 30, 35]), np.array([30, 35, 100]), np.array([1, 2, 3]), 0, 20)
    # [0,20) wholly state 1; [20,40): 10 ns of 1, 5 of 2, 5 of 3 -> 1; [40,100) wholly state 3
    assert off.tolist() == [0, 2] and s.tolist() == [0, 40] and e.tolist() == [40, 100] and k.tolist() == [1, 3]


def test_coarsen_keeps_a_lane_that_starts_where_the_one_before_ended():
    # lane 0: [0, 1) state 0; lane 1: [1, 2) state 0; one bucket of 2 ns: lane 1 keeps its own row
    off, s, e, k = coarsen(np.array([0, 1, 2]), np.array([0, 1]), np.array([1, 2]), np.array([0, 0]), 0, 2)
    assert off.tolist() == [0, 1, 2] and s.tolist() == [0, 1] and e.tolist() == [1, 2] and k.tolist() == [0, 0]


@settings(max_examples=100, deadline=None)
@given(lanes_st, st.integers(1, 300))
def test_coarsen_tiles_each_lane_with_a_key_that_covered_most_of_each_bucket(lanes, width):
    off, s, e, k = _lanes(lanes)
    o_off, o_s, o_e, o_k = coarsen(off, s, e, k, 0, width)
    for lane in range(len(off) - 1):
        a, b = off[lane], off[lane + 1]
        oa, ob = o_off[lane], o_off[lane + 1]
        if a == b:
            assert oa == ob
            continue
        assert o_s[oa] == s[a] and o_e[ob - 1] == e[b - 1]  # the same lifetime, tiled
        assert np.all(o_s[oa + 1:ob] == o_e[oa:ob - 1]) and np.all(o_e[oa:ob] > o_s[oa:ob])
        assert np.all(o_k[oa + 1:ob] != o_k[oa:ob - 1])  # equal neighbours merged
        assert ob - oa <= (e[b - 1] // width + 1)  # at most one segment per bucket
        for t in range(int(s[a]), int(e[b - 1]), max(1, width // 3)):  # each bucket: the dominant key
            bs, be = (t // width) * width, (t // width + 1) * width
            cover = {}
            for i in range(a, b):
                d = min(e[i], be) - max(s[i], bs)
                if d > 0:
                    cover[int(k[i])] = cover.get(int(k[i]), 0) + int(d)
            j = oa + np.searchsorted(o_s[oa:ob], t, side="right") - 1
            assert cover[int(o_k[j])] == max(cover.values())


@given(lanes_st)
def test_coarsen_by_one_ns_keeps_every_interval(lanes):
    off, s, e, k = _lanes(lanes)
    o_off, o_s, o_e, o_k = coarsen(off, s, e, k, 0, 1)
    merged = []
    for lane in range(len(off) - 1):
        rows = []
        for i in range(off[lane], off[lane + 1]):
            if rows and rows[-1][2] == k[i]:
                rows[-1][1] = e[i]
            else:
                rows.append([s[i], e[i], k[i]])
        merged += rows
    assert [list(x) for x in zip(o_s.tolist(), o_e.tolist(), o_k.tolist(), strict=True)] == [
        [int(v) for v in r] for r in merged]


@settings(max_examples=30, deadline=None)
@given(traces())
def test_a_run_with_too_many_intervals_is_summarised_within_the_limit(trace):
    limit = 6
    width = detail_width(trace.wall_ns, 10**9, len(trace.threads), limit)
    assert width >= trace.wall_ns * len(trace.threads) / limit
    orig = timeline_module.MAX_DETAIL
    timeline_module.MAX_DETAIL = limit
    try:
        data = timeline_data(trace, ReportOptions())
    finally:
        timeline_module.MAX_DETAIL = orig
    p = data["payload"]
    arr = unpack(p)
    if len(trace.states) + p["critSegments"] <= limit:
        return
    assert p["summaryNs"] > 0 and p["traceIntervals"] == len(trace.states)
    n_lanes = len(p["lanes"])
    assert len(arr["dur"]) <= n_lanes * (trace.wall_ns // p["summaryNs"] + 2)
    # every lane still spans its thread's lifetime; the strip still spans the run
    for k, ln in enumerate(p["lanes"]):
        i = trace.thread_index(np.array([ln["tid"]]))[0]
        a, b = arr["lane_off"][k], arr["lane_off"][k + 1]
        assert arr["start"][a] + trace.start_ns == trace.threads.start_ns[i]
        assert arr["end"][b - 1] + trace.start_ns == trace.threads.end_ns[i]
    assert np.isclose(arr["crit_end"][-1] - arr["crit_start"][0], trace.wall_ns)
