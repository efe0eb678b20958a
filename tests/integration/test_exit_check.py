"""record compares every thread born and ended in the recording with the kernel's own figures at
its last switch-out (bpftrace), and says so when they disagree."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import scalestack
from scalestack.collect.exit_check import check, warning
from scalestack.trace import State, make_trace

from ..conftest import requires_recording


def _trace():
    R, Q = int(State.RUNNING), int(State.RUNNABLE)
    return make_trace({"tid": [1, 2], "name": ["a", "b"], "start_ns": [0, 0], "end_ns": [100_000_000] * 2,
                       "start_known": [True, True], "exited": [True, True]},
                      {"tid": [1, 1, 2, 2], "start_ns": [0, 50_000_000, 0, 10_000_000],
                       "end_ns": [50_000_000, 100_000_000, 10_000_000, 100_000_000], "state": [R, Q, Q, R]})


def test_agreement_and_disagreement_with_the_kernels_figures():
    ok = check(_trace(), {1: (50_500_000, 50_000_000, 0), 2: (90_000_000, 10_400_000, 0)})
    assert ok["available"] and ok["disagreeing"] == [] and warning(ok) is None
    assert ok["threads"]["1"] == [50_000_000, 50_500_000, 50_000_000, 50_000_000]
    off = check(_trace(), {1: (40_000_000, 50_000_000, 0), 2: (90_000_000, 10_000_000, 0)})
    assert off["disagreeing"] == [1] and "tid 1: running 50.00 ms recorded vs 40.00 ms" in warning(off)
    assert check(_trace(), {}, "bpftrace is not installed") == {"available": False,
                                                              "reason": "bpftrace is not installed"}


@requires_recording
@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
def test_recording_carries_the_exit_check(c_programs):
    trace = scalestack.record([str(c_programs["barrier_imbalance"]), "10", "3000000", "3"], None)
    ec = trace.meta["exit_check"]
    assert ec["available"], ec
    workers = [str(t) for t in trace.threads.tid.tolist()[1:]]
    assert sorted(ec["threads"]) == sorted(workers)  # the root (its shell's time before exec) is left out
    for run, on_cpu, _rq, _delay in ec["threads"].values():
        assert abs(run - on_cpu) <= max(0.02 * on_cpu, 1_000_000), ec
    off = scalestack.record([str(c_programs["barrier_imbalance"]), "2", "300000", "3"], None, exit_check=False)
    assert off.meta["exit_check"] == {"available": False,
                                      "reason": "turned off (--no-exit-check, or attaching with --pid)"}
    assert np.all(trace.threads.exited)
