"""-Xlog:gc parsing and the GC term computed from the log's pauses."""

import pytest

from scalestack.analysis.gclog import gc_term_from_log, parse_gc_log, pause_ns
from scalestack.errors import UserError

PARALLEL = """[0.005s][info][gc] Using Parallel
[0.125s][info][gc] GC(0) Pause Young (Allocation Failure) 16M->0M(61M) 2.493ms
[0.130s][info][gc] GC(1) Pause Young (Allocation Failure) 16M->0M(61M) 1.762ms
[0.900s][info][gc] GC(2) Pause Full (Ergonomics) 40M->12M(61M) 10.5ms
"""
G1 = """[0.004s][info][gc] Using G1
[0.109s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 6M->1M(64M) 1.564ms
[0.200s][info][gc] GC(1) Concurrent Mark Cycle
[0.210s][info][gc] GC(1) Pause Remark 30M->30M(64M) 0.700ms
[0.250s][info][gc] GC(1) Concurrent Mark Cycle 41.234ms
"""


def test_parallel_pauses_parsed_with_their_kind():
    p = parse_gc_log(PARALLEL)
    assert [(i, k) for i, k, _ in p] == [(0, "Young (Allocation Failure)"), (1, "Young (Allocation Failure)"),
                                        (2, "Full (Ergonomics)")]
    assert pause_ns(PARALLEL) == round((2.493 + 1.762 + 10.5) * 1e6)


def test_g1_concurrent_cycle_is_not_a_pause():
    assert [k for _, k, _ in parse_gc_log(G1)] == ["Young (Normal) (G1 Evacuation Pause)", "Remark"]
    assert pause_ns(G1) == round((1.564 + 0.7) * 1e6)


def test_gc_term_from_log_matches_the_stack_formula():
    # 1 thread: 100 ms of pauses; 4 threads: 60 ms of pauses in a 400 ms run -> (4*60 - 100) / 400
    assert gc_term_from_log(4, 100e6, 60e6, 400e6) == pytest.approx(0.35)


def test_gc_log_needs_java(tmp_path):
    from scalestack.collect.sweep import run_sweep

    with pytest.raises(UserError, match="java"):
        run_sweep(["./prog", "{threads}"], [1], str(tmp_path), gc_log=True)
