"""Criticality and bottle graphs of real recordings: the slow thread is critical, a balanced
program's stack is even."""

from __future__ import annotations

import numpy as np

import scalestack

from ..conftest import requires_recording

pytestmark = requires_recording


def _workers(trace):
    root = trace.meta["root_tid"]
    th = trace.threads
    order = np.argsort(th.start_ns, kind="stable")
    return [int(th.tid[i]) for i in order if th.tid[i] != root]


def test_imbalanced_barrier_slow_thread_is_critical(c_programs):
    # The slow thread runs alone while the fast one waits at the barrier, so its parallelism is the
    # lower. With other jobs on both CPUs the two threads ran one at a time throughout (parallelism
    # 0.9975 for both in one whole-suite run beside two busy loops): that is the machine, so the
    # recording is made again up to 3 times; a tool that gets criticality wrong fails all three.
    for attempt in range(3):
        trace = scalestack.record([str(c_programs["barrier_imbalance"]), "8", "3000000", "3"], None)
        t0, t1 = _workers(trace)
        res = scalestack.criticality(trace)
        i0, i1 = (int(np.flatnonzero(res.tids == t)[0]) for t in (t0, t1))
        boxes = scalestack.bottle(trace).boxes
        ok = (res.most_critical_tid == t1 and res.parallelism[i1] < res.parallelism[i0] and res.share[i1] > 0.6
              and (boxes[-2].tids == (t1,) or boxes[-1].tids == (t1,)))  # narrow boxes sit on top
        if ok or attempt == 2:
            break
    assert res.most_critical_tid == t1
    assert res.parallelism[i1] < res.parallelism[i0]
    assert res.share[i1] > 0.6
    assert boxes[-2].tids == (t1,) or boxes[-1].tids == (t1,)


def test_balanced_program_has_an_even_stack(c_programs):
    """Even within 10%, beyond what the CPU itself made uneven.

    On this shared 2-vCPU VM one thread sometimes needs 5-25% more CPU time for the same work
    (another tenant, perf itself). If thread A runs T and B runs (1 - d)T between barriers, both
    run for (1 - d)T and A alone for dT, so A's share exceeds B's by 2d / (1 + d) of A's share:
    that part is the machine, not the program. The rest must be within 10% (median of three).
    """
    excess = []
    for _ in range(3):
        trace = scalestack.record([str(c_programs["balanced"]), "2", "20", "4000000"], None)
        res = scalestack.criticality(trace)
        rows = [int(np.flatnonzero(res.tids == t)[0]) for t in _workers(trace)]
        share, run = res.share[rows], res.running_ns[rows]
        uneven = abs(share[0] - share[1]) / share.max()
        d = abs(run[0] - run[1]) / run.max()
        excess.append(abs(uneven - 2 * d / (1 + d)))
    assert np.median(excess) <= 0.10, excess
