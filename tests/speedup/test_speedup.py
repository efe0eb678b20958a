import math

from hypothesis import given
from hypothesis import strategies as st

from scalestack.analysis.speedup import stack_from_times


def test_paper_fig2_worked_example():
    # T_s = 1.2, N = 4, T_p = 0.6 -> S = 2 (spec §1 worked example)
    s = stack_from_times(4, 1.2, 0.6, sync=0.3, imb=0.15)
    assert math.isclose(s.speedup, 2.0)
    assert math.isclose(s.sync, 0.5) and math.isclose(s.imb, 0.25)
    assert math.isclose(s.other, 1.25)
    assert math.isclose(s.total(), 4.0)


pos = st.floats(0.01, 100.0)
nonneg = st.floats(0.0, 100.0)


@given(st.integers(1, 64), pos, pos, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg)
def test_components_add_up_to_n(n, ts, tp, g1, g2, s1, s2, sy, im, co):
    s = stack_from_times(n, ts, tp, gc_st=g1, gc_mt=g2, seq_st=s1, seq_mt=s2,
                         sync=sy, imb=im, cont=co)
    assert math.isclose(s.total(), n, rel_tol=1e-9, abs_tol=1e-6)


def test_sync_leaves_out_waits_inside_gc_and_seq_windows():
    """App thread 2 waits 0-10: 0-3 the main thread runs alone (SEQ window), 3-6 a GC thread runs
    alone (STW window), 6-10 app thread 3 runs (a real synchronization wait)."""
    from scalestack.analysis.speedup import gc_seq_window_time
    from scalestack.trace import State, make_trace

    R, S = int(State.RUNNING), int(State.SYNC_WAIT)
    tr = make_trace(
        {"tid": [1, 2, 3, 4], "name": ["main", "w1", "w2", "GC Thread#0"], "role": ["main", "app", "app", "gc"],
         "start_ns": [0] * 4, "end_ns": [10] * 4},
        {"tid": [1, 1, 2, 3, 3, 4, 4, 4], "start_ns": [0, 3, 0, 0, 6, 0, 3, 6], "end_ns": [3, 10, 10, 6, 10, 3, 6, 10],
         "state": [R, S, S, S, R, S, R, S]})
    w = gc_seq_window_time(tr)
    assert w.tolist() == [3, 6, 6, 3]  # per thread; the stack sums it over app threads only (2 and 3)
