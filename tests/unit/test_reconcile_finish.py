"""The compiled finish of `reconcile_running` on a hand-checked input (its property test against the
NumPy statement is test_reconcile_running_compiled)."""

from __future__ import annotations

import numpy as np

from scalestack.trace import State
from scalestack.trace.builder import _reconcile_finish

RUN, RQ, SY, UNK = int(State.RUNNING), int(State.RUNNABLE), int(State.SYNC_WAIT), int(State.UNKNOWN)


def test_added_dropped_stolen_and_kept_segments():
    """Thread 0: row 0 SYNC_WAIT [0, 10) on address 0xA, row 1 RUNNING [10, 30) on CPU 1.
    Segments: [0, 4) kept; [4, 10) added to RUNNING; [10, 20) dropped (back to SYNC_WAIT);
    [20, 30) dropped and stolen (UNKNOWN)."""
    seg_th = np.zeros(4, np.int64)
    seg_a, seg_b = np.array([0, 4, 10, 20]), np.array([4, 10, 20, 30])
    row = np.array([0, 0, 1, 1])
    fallback = np.array([UNK, UNK, SY, SY])
    add = np.array([False, True, False, False])
    drop = np.array([False, False, True, True])
    steal = np.array([False, False, False, True])
    state, cpu, addr, waker, rep, sums = _reconcile_finish(
        seg_th, seg_a, seg_b, row, fallback, add, drop, steal, np.array([SY, RUN], np.uint8), np.array([-1, 1], np.int16),
        np.array([0xA, 0]), np.array([7, -1], np.int32), np.array([False, False]), 1, RUN, UNK)
    assert state.tolist() == [SY, RUN, SY, UNK]
    assert cpu.tolist() == [-1, -1, -1, -1] and addr.tolist() == [0xA, 0, 0, 0] and waker.tolist() == [7, -1, -1, -1]
    assert rep.tolist() == [False, True, True, True]
    assert sums[:, 0].tolist() == [6, 20, 10]
