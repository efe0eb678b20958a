"""Criticality per synchronization phase, and the gain of accelerating one thread it predicts.

Whole-run criticality (thesis eq. 3.1) adds up a thread's critical time over the run. Two cases
the thesis names get that wrong (§4.4): the critical thread changes from phase to phase (Lu
non-cont., 16 threads), and a second thread's criticality is hidden under the first one's, so
accelerating the first only makes the second critical (FMM). This view keeps the stack per phase
(the thesis's own refinement: Ch. 5 windows, Ch. 7 per-timeslice criticality) and scores each
thread by the time accelerating it can save in each phase: its critical time times (1 - 1/F),
but no more than its lead over the next most critical thread of that phase, since from there on
the program waits for that one instead.

Phases are cut where threads become active after a stretch in which at most one thread ran
(the others waited for it: barrier, join, spawn); `bounds` may also be given.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scalestack.analysis.criticality import _span, sweep
from scalestack.errors import UserError
from scalestack.results import Result
from scalestack.trace import Trace
from scalestack.trace.lookup import unique_sorted


def sync_phase_bounds(trace: Trace, active: str = "running") -> np.ndarray:
    """Phase boundaries: every instant where a thread becomes active while at most one thread was
    active just before, plus the trace's start and end. Sorted, int64.

    Such an instant ends a stretch in which the program waited for one thread: a barrier's last
    arriver releasing the others, a join, a spawn after a sequential part, a hand-off within a
    serial chain. Lock hand-offs while other threads run, and thread exits, do not cut.
    """
    t0, t1 = int(trace.start_ns), int(trace.end_ns)
    _, a, b, tl, _ = sweep(trace, active, t0, t1)
    return unique_sorted(np.concatenate([[t0, t1], cuts(a, tl)[0]]))


def cuts(a: np.ndarray, tl, before: int | None = None) -> tuple[np.ndarray, int]:
    """The interval starts `a` (of the sweep `tl`) with at most one thread active just before, and
    how many are active just before `before` (a part of a run read in chunks carries that to the
    next part: whether its first instant cuts)."""
    last = np.flatnonzero(np.r_[tl.u[1:] != tl.u[:-1], True])  # last breakpoint at each time
    times, r_after = tl.u[last], tl.r[last]
    r_before = np.r_[0, r_after[:-1]]
    starts = unique_sorted(a)
    k = np.searchsorted(times, starts)
    j = int(np.searchsorted(times, before, side="left")) - 1 if before is not None else -1
    return starts[r_before[k] <= 1], int(r_after[j]) if j >= 0 else 0


def per_phase_criticality(trace: Trace, bounds: np.ndarray, active: str = "running") -> np.ndarray:
    """Criticality (ns) of every thread in every phase [bounds[p], bounds[p+1]): shape (phases, threads).

    G_j(t), thread j's criticality accumulated up to t, is evaluated at the bounds: the whole
    intervals that ended before t plus the part of the one (at most) that straddles t. The loop
    is over threads; intervals and bounds are vectorized.
    """
    bounds = np.asarray(bounds, dtype=np.int64)
    t0, t1 = int(bounds[0]), int(bounds[-1])
    n = len(trace.threads)
    rows, a, b, tl, where = sweep(trace, active, t0, t1)
    m = len(a)
    fa, fb = tl.F[where[0:2 * m:2]], tl.F[where[1:2 * m:2]]
    fbound = tl.at(bounds)
    o = np.lexsort((a, rows))
    rows, a, b, fa, fb = rows[o], a[o], b[o], fa[o], fb[o]
    g = np.zeros((len(bounds), n))
    edges = np.searchsorted(rows, np.arange(n + 1))
    for j in range(n):
        lo, hi = edges[j], edges[j + 1]
        if hi == lo:
            continue
        aj, bj, faj = a[lo:hi], b[lo:hi], fa[lo:hi]
        cum = np.concatenate([[0.0], np.cumsum(fb[lo:hi] - faj)])
        k = np.searchsorted(bj, bounds, side="right")  # intervals ended by each bound
        straddle = (k < len(aj)) & (aj[np.minimum(k, len(aj) - 1)] < bounds)
        g[:, j] = cum[k] + np.where(straddle, fbound - faj[np.minimum(k, len(aj) - 1)], 0.0)
    return np.diff(g, axis=0)


def capped_gain(c: np.ndarray, factor: float) -> np.ndarray:
    """Time saved per phase and thread: C (1 - 1/F), capped at the lead over the phase's next
    most critical thread (zero for a thread that is not the most critical). c: (phases, threads)."""
    c = np.atleast_2d(np.asarray(c, dtype=np.float64))
    if c.shape[1] < 2:
        return c * (1.0 - 1.0 / factor)
    top2 = -np.sort(-c, axis=1)[:, :2]
    other = np.where(c >= top2[:, :1], top2[:, 1:2], top2[:, :1])  # the largest of the others
    return np.clip(np.minimum(c * (1.0 - 1.0 / factor), c - other), 0.0, None)


@dataclasses.dataclass(frozen=True)
class PhaseGain(Result):
    """The gain each thread's acceleration is predicted to give, summed over the phases (what a
    trace read in chunks keeps of them: `analysis.chunked_advice.whatif_and_phases`).

    Attributes
    ----------
    tids : int array, one per thread (trace.threads order)
    gain_ns : float64 per thread, Σ over phases of the capped saving
    factor : the acceleration the gain assumes
    span_ns : the span the phases tile
    phases : how many phases
    lead_phases, lead_ns : per thread, the phases in which it is clearly the critical one (`LEAD`
        times the next thread's criticality at least), and their length
    """

    tids: np.ndarray
    gain_ns: np.ndarray
    factor: float
    span_ns: int
    phases: int
    lead_phases: np.ndarray
    lead_ns: np.ndarray

    kind = "phase_gain"

    @property
    def best_tid(self) -> int | None:
        if not len(self.tids) or self.gain_ns.max() <= 0:
            return None
        return int(self.tids[np.lexsort((self.tids, -self.gain_ns))[0]])

    @property
    def predicted_speedup(self) -> np.ndarray:
        return self.span_ns / np.maximum(self.span_ns - self.gain_ns, 1.0)

    def rows(self) -> list[dict[str, Any]]:
        return [{"tid": int(t), "gain_ns": float(g), "predicted_speedup": float(s)}
                for t, g, s in zip(self.tids, self.gain_ns, self.predicted_speedup, strict=True)]


@dataclasses.dataclass(frozen=True)
class PhaseCriticalityResult(PhaseGain):
    """Per-phase criticality stacks and the gain each thread's acceleration is predicted to give.

    Attributes (besides `PhaseGain`'s)
    ----------
    bounds_ns : int64 array, phase boundaries (phases = len - 1)
    criticality_ns : float64 (phases, threads)
    """

    bounds_ns: np.ndarray
    criticality_ns: np.ndarray

    kind = "phase_criticality"

    def rows(self) -> list[dict[str, Any]]:
        top = np.argmax(self.criticality_ns, axis=1)
        return [{**row, "phases_most_critical": int(np.sum(top == k))} for k, row in enumerate(super().rows())]

    def to_dict(self) -> dict[str, Any]:
        return {"factor": self.factor, "span_ns": int(self.span_ns), "bounds_ns": self.bounds_ns.tolist(),
                "best_tid": self.best_tid, "threads": self.rows()}


def phase_criticality(trace: Trace, *, factor: float = 2.0, bounds: np.ndarray | None = None,
                      active: str = "running", between: tuple[int, int] | None = None) -> PhaseCriticalityResult:
    """Criticality per phase and the capped gain of accelerating each thread by `factor`.

    Parameters
    ----------
    factor : speed-up of the accelerated thread (thesis Ch. 4: 2 -> 4 GHz is 2)
    bounds : phase boundaries in ns; default `sync_phase_bounds(trace)`. Pass
        ``[trace.start_ns, trace.end_ns]`` for one phase (whole-run stack with the cap only).

    References
    ----------
    Thesis §4.4 (FMM, Lu non-cont. exceptions), Ch. 5 windows, Ch. 7 per-timeslice criticality.
    """
    if factor <= 1:
        raise UserError("factor must be greater than 1")
    t0, t1 = _span(trace, between)
    b = sync_phase_bounds(trace, active) if bounds is None else np.asarray(bounds, dtype=np.int64)
    b = unique_sorted(np.concatenate([[t0, t1], b[(b > t0) & (b < t1)]]).astype(np.int64))
    return result(trace.threads.tid, b, per_phase_criticality(trace, b, active), factor)


def result(tids: np.ndarray, bounds: np.ndarray, c: np.ndarray, factor: float) -> PhaseCriticalityResult:
    """The result of the per-phase criticality `c` between `bounds`."""
    n, length = leads(c, np.diff(bounds))
    return PhaseCriticalityResult(tids=tids.copy(), bounds_ns=bounds, criticality_ns=c,
                                  gain_ns=capped_gain(c, factor).sum(axis=0), factor=float(factor),
                                  span_ns=int(bounds[-1] - bounds[0]), phases=len(bounds) - 1, lead_phases=n,
                                  lead_ns=length)


LEAD = 1.15  # a thread leads a phase with at least this times the next thread's criticality there


def leads(c: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per thread (column of `c`, phases x threads), the phases it clearly leads (`LEAD`) and
    their total length (`length`: each phase's ns)."""
    n_threads = c.shape[1]
    count, total = np.zeros(n_threads, np.int64), np.zeros(n_threads, np.int64)
    if n_threads < 2 or c.shape[0] == 0:
        return count, total
    top2 = -np.sort(-c, axis=1)[:, :2]
    clear = (top2[:, 0] > 0) & (top2[:, 0] >= LEAD * top2[:, 1])
    top = np.argmax(c, axis=1)[clear]
    np.add.at(count, top, 1)
    np.add.at(total, top, np.asarray(length, np.int64)[clear])
    return count, total
