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


@given(st.integers(1, 64), pos, pos, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg)
def test_components_add_up_to_n(n, ts, tp, g1, g2, s1, s2, sy, im, co, c1):
    s = stack_from_times(n, ts, tp, gc_st=g1, gc_mt=g2, seq_st=s1, seq_mt=s2,
                         sync=sy, imb=im, cont=co, cont_st=c1)
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


def test_cont_leaves_out_what_the_baseline_waited_for_a_cpu():
    # 1 thread: 10 s, of which 2 s runnable (another process on the core). 2 threads: 6 s each,
    # 1 s runnable each. Work 8 s -> 2 x 6 = 12 = 8 + 2 (runnable) + 2 (idle at the end of one)
    s = stack_from_times(2, 10.0, 6.0, cont=2.0, cont_st=2.0, imb=2.0)
    assert math.isclose(s.cont, 0.0) and math.isclose(s.imb, 2 / 6)
    assert math.isclose(s.other, 2 - 10 / 6 - 2 / 6, abs_tol=1e-12)  # = 0: nothing left unexplained


@given(st.integers(1, 3), st.integers(0, 4), st.integers(1, 4))
def test_a_run_against_itself_is_speedup_1_with_nothing_lost(workers, cores_extra, seed):
    from scalestack.analysis.speedup import speedup_stack
    from scalestack.sim.engine import simulate

    ths = [{"name": "main", "role": "main", "start": True,
            "ops": [["spawn", i] for i in range(1, workers + 1)] + [["join", i] for i in range(1, workers + 1)]}]
    ths += [{"name": f"w{i}", "role": "app", "start": False, "ops": [["compute", 100_000 * (i + seed)]]}
            for i in range(workers)]
    tr = simulate({"threads": ths}, cores=1 + cores_extra % 2).trace
    s = speedup_stack(tr, tr, 1)
    assert math.isclose(s.speedup, 1.0) and math.isclose(s.cont, 0.0, abs_tol=1e-12)
