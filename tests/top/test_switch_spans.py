"""RUNNING spans at switch instants, lost switches rebuilt from the runtime reports."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.criticality import criticality_from_spans, timeline
from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.switch_spans import switch_spans

A, B = 101, 102


def _sw(t, cpu, prev, nxt, state=1):
    return (t, cpu, prev, 100 if prev else 0, int(Kind.SWITCH), prev, nxt, state, -1, -1)


def _rt(t, cpu, ctx, tid, ns):
    return (t, cpu, ctx, 100 if ctx else 0, int(Kind.STAT_RUNTIME), tid, ns, 0, -1, -1)


def _futex(t, cpu, tid):
    return (t, cpu, tid, 100, int(Kind.FUTEX_EXIT), 0, 0, 0, -1, -1)


def _spans(rows, tids=(A, B)):
    s = switch_spans(RawEvents.from_rows(rows), np.array(tids), 0, 1000)
    return [(int(t), int(a), int(b), bool(r)) for t, a, b, r in zip(s.tid, s.start_ns, s.end_ns, s.repaired,
                                                                     strict=True)], s


def test_complete_chain_gives_the_switch_instants():
    spans, s = _spans([_sw(0, 0, 0, A), _rt(50, 0, A, A, 50), _sw(50, 0, A, B), _sw(80, 1, 0, A),
                       _rt(90, 0, B, B, 40), _sw(90, 0, B, 0, 1), _rt(130, 1, A, A, 45), _sw(130, 1, A, 0)])
    # the runtime reports (here deliberately off: 45 for a 50 ns slice) do not move seen switches
    assert spans == [(A, 0, 50, False), (A, 80, 130, False), (B, 50, 90, False)]
    assert s.complete.tolist() == [2, 1] and s.gaps() == {}


@pytest.mark.parametrize("reported, start", [(100, 100), (130, 70), (10, 120)])
def test_lost_switch_in_is_placed_by_the_runtime_and_bounded_by_the_cpu(reported, start):
    # A left CPU 0 at 50; its switch-in near 100 was lost; it acted at 120 and left at 200.
    # start = switch-out - reported runtime, but no earlier than the CPU's previous event (70)
    # and no later than A's first act (120)
    spans, s = _spans([_sw(0, 0, 0, A), _sw(50, 0, A, B), _sw(70, 0, B, 0, 1), _futex(120, 0, A),
                       _rt(200, 0, A, A, reported), _sw(200, 0, A, 0)])
    assert spans[1] == (A, start, 200, True)
    assert s.lost_in.tolist() == [1, 0] and s.gaps() == {A: 1}


def test_lost_switch_out_ends_at_the_runtime_after_the_switch_in():
    # A in at 0 on CPU 0, runs 40 + 30 ns by the reports, acted at 70; the CPU shows idle at 100
    spans, s = _spans([_sw(0, 0, 0, A), _rt(40, 0, A, A, 40), _rt(70, 0, A, A, 30), _sw(100, 0, 0, B)])
    assert spans[0] == (A, 0, 70, True)
    assert s.lost_out.tolist() == [1, 0]
    # a report that overstates is cut at the CPU's next event in another task's context
    spans, _ = _spans([_sw(0, 0, 0, A), _rt(40, 0, A, A, 40), _rt(70, 0, A, A, 90), _sw(100, 0, 0, B)])
    assert spans[0] == (A, 0, 100, True)


def test_both_switches_lost_the_slice_is_rebuilt_between_its_cpu_neighbours():
    # A is seen only by its own acts at 150 and 160 on CPU 1 (which ran idle until 100)
    spans, s = _spans([_sw(0, 0, 0, A), _sw(50, 0, A, 0), _sw(100, 1, 0, B), _sw(110, 1, B, 0, 1),
                       _futex(150, 1, A), _rt(160, 1, A, A, 30), _sw(300, 1, 0, B)])
    assert (A, 130, 160, True) in spans


def _schedule(data, n_threads, n_switches):
    """A random complete schedule on 2 CPUs: (rows, true spans). At every switch the kernel's
    runtime report for the leaving thread comes first, exact."""
    tids = [A + k for k in range(n_threads)]
    cur, since = [0, 0], [0, 0]
    rows, truth = [], []
    t = 0
    for _ in range(n_switches):
        t += data.draw(st.integers(1, 1000))
        c = data.draw(st.integers(0, 1))
        choices = [0] + [x for x in tids if x not in cur]
        nxt = data.draw(st.sampled_from(choices))
        prev = cur[c]
        if nxt == prev:
            continue
        if prev:
            rows.append((_rt(t, c, prev, prev, t - since[c]), False))
            truth.append((prev, since[c], t))
        rows.append((_sw(t, c, prev, nxt), True))
        cur[c], since[c] = nxt, t
    t += 1
    for c in (0, 1):  # close with a switch to idle
        if cur[c]:
            rows.append((_rt(t, c, cur[c], cur[c], t - since[c]), False))
            truth.append((cur[c], since[c], t))
            rows.append((_sw(t, c, cur[c], 0), True))
            t += 1
    for c in (0, 1):  # the machine goes on after the program: the idle task acts on each CPU
        rows.append(((t, c, 0, 0, int(Kind.WAKEUP), 999, c, 0, -1, -1), False))
        t += 1
    return tids, rows, truth, t


def _crit(tid, a, b, t0, t1):
    tid, a, b = (np.asarray(x, dtype=np.int64) for x in (tid, a, b))
    tl, where = timeline(a, b, t0, t1)
    m = len(a)
    c = tl.F[where[1:2 * m:2]] - tl.F[where[0:2 * m:2]]
    return {int(x): float(c[tid == x].sum()) for x in np.unique(tid)}


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(2, 40))
def test_lost_switches_are_rebuilt_exactly_when_the_runtime_reports_are_exact(data, n_threads, n_switches):
    tids, rows, truth, t_end = _schedule(data, n_threads, n_switches)
    if not truth:
        return
    drop = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    # an idle stretch whose switches in and out are both lost leaves no trace at all (the thread
    # is counted running through it): keep one of the two
    idle_since_dropped = [False, False]
    for k, (r, is_switch) in enumerate(rows):
        if is_switch:
            c = r[1]
            if idle_since_dropped[c] and drop[k]:
                drop[k] = False
            idle_since_dropped[c] = drop[k] and r[6] == 0
    kept = [r for (r, is_switch), d in zip(rows, drop, strict=True) if not (is_switch and d)]
    s = switch_spans(RawEvents.from_rows(kept), np.array(tids), 0, t_end)
    got = _crit(s.tid, s.start_ns, s.end_ns, 0, t_end)
    want = _crit(*zip(*truth, strict=True), 0, t_end)
    for x in want:
        assert got.get(x, 0.0) == pytest.approx(want[x], abs=1e-6)
    # the spans of one thread never overlap, and nothing but the dropped switches is repaired
    for x in tids:
        a, b = s.start_ns[s.tid == x], s.end_ns[s.tid == x]
        assert np.all(a[1:] >= b[:-1])
    if not any(d for (_, is_switch), d in zip(rows, drop, strict=True) if is_switch):
        assert not s.repaired.any()


def test_criticality_from_spans_keeps_the_traces_running_time():
    from scalestack.trace.builder import build_trace

    rows = [_sw(0, 0, 0, A), _sw(10, 1, 0, B), _rt(50, 0, A, A, 45), _sw(50, 0, A, 0), _rt(90, 1, B, B, 80),
            _sw(90, 1, B, 0)]
    ev = RawEvents.from_rows(rows)
    trace = build_trace(ev, root_pids=[100], start_ns=0, end_ns=90)
    s = switch_spans(ev, trace.threads.tid, trace.start_ns, trace.end_ns)
    crit = criticality_from_spans(trace, s)
    # switch instants: A alone 0-10, with B 10-50, B alone 50-90
    c = dict(zip(crit.tids.tolist(), crit.criticality_ns.tolist(), strict=True))
    assert (c[A], c[B]) == (pytest.approx(10 + 20), pytest.approx(20 + 40))
    assert crit.criticality_ns.sum() == pytest.approx(90)
    # Run_j is the trace's (the kernel's runtime reports): 45 and 80, not 50 and 80
    run = dict(zip(crit.tids.tolist(), crit.running_ns.tolist(), strict=True))
    assert (run[A], run[B]) == (45, 80)
