"""Bottle graphs: one box per thread (or group), height = criticality, width = parallelism.

Du Bois et al. (thesis ch. 3.3, 5; managed-speedup-stacks.md §3): a box's height C_j is the
thread's share of the run time (its criticality), its width P_j = Run_j / C_j is the average
number of threads that ran beside it (itself included), so its area is Run_j, the thread's
running time. Stacked, the heights add up to the run time where something ran. Tall, narrow
boxes are the bottlenecks: work cut from them shortens the run the most.

Groups (thread pools, roles) add heights and areas, which is sound: P_G = ΣRun / ΣC.
Windows (`window=`) give one bottle graph per fixed time window, from the same F(t) timeline.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from scalestack.analysis.criticality import _span, critical_sweep, criticality, sweep
from scalestack.errors import UserError
from scalestack.results import Result
from scalestack.trace import Trace
from scalestack.trace.aggregate import AggregateRecording, refuse_trace_options
from scalestack.units import parse_duration_ns


@dataclasses.dataclass(frozen=True)
class Box:
    label: str
    role: str
    tids: tuple[int, ...]
    height_ns: float  # C: criticality
    area_ns: float  # Run: running time

    @property
    def width(self) -> float:
        """Parallelism P = Run / C (NaN for a box that never ran)."""
        return self.area_ns / self.height_ns if self.height_ns > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        w = self.width
        return {"label": self.label, "role": self.role, "tids": list(self.tids), "height_ns": self.height_ns,
                "width": None if np.isnan(w) else w, "area_ns": self.area_ns}


@dataclasses.dataclass(frozen=True)
class BottleResult(Result):
    """Boxes in drawing order: widest at the bottom (first), ties by taller, then lower tid."""

    boxes: tuple[Box, ...]
    idle_ns: float
    span_ns: int
    t0_ns: int
    active: str

    kind = "bottle"

    @property
    def height_ns(self) -> float:
        return float(sum(b.height_ns for b in self.boxes))

    def rows(self) -> list[dict[str, Any]]:
        total = self.height_ns
        return [{**b.to_dict(), "tids": ",".join(map(str, b.tids)),
                 "share_pct": b.height_ns / total * 100 if total else 0.0} for b in self.boxes]

    def to_dict(self) -> dict[str, Any]:
        return {"active": self.active, "span_ns": int(self.span_ns), "t0_ns": int(self.t0_ns),
                "idle_ns": float(self.idle_ns), "height_ns": self.height_ns,
                "boxes": [b.to_dict() for b in self.boxes]}


@dataclasses.dataclass(frozen=True)
class WindowedBottleResult(Result):
    """One bottle graph per window [t0 + k·w, t0 + (k+1)·w)."""

    window_ns: int
    windows: tuple[BottleResult, ...]

    kind = "bottle-windows"

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for k, w in enumerate(self.windows):
            for r in w.rows():
                out.append({"window": k, "window_start_ns": w.t0_ns, **r})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"window_ns": int(self.window_ns), "windows": [w.to_dict() for w in self.windows]}


def group_labels(trace: Trace, group_by) -> tuple[np.ndarray, list[str], list[str]]:
    """Group index of each thread row, group labels and group roles."""
    th = trace.threads
    return group_threads(th.tid.tolist(), th.name.tolist(), th.role.tolist(), group_by)


def group_threads(tids, names, roles, group_by) -> tuple[np.ndarray, list[str], list[str]]:
    """Group index per thread, labels and roles: per thread, by role, or by REGEX=LABEL rules
    (shared by traces and the eBPF aggregate recordings)."""
    n = len(tids)
    if group_by is None:
        return np.arange(n), [f"{nm} ({t})" for nm, t in zip(names, tids, strict=True)], [str(r) for r in roles]
    if group_by == "role":
        uniq = sorted({str(r) for r in roles})
        return np.array([uniq.index(str(r)) for r in roles], dtype=np.int64), uniq, uniq
    rules = _pool_rules(group_by)
    keys: list[str] = []
    kroles: list[str] = []
    index = np.empty(n, dtype=np.int64)
    for i, (nm, t, r) in enumerate(zip(names, tids, roles, strict=True)):
        key = next((label for pat, label in rules if pat.search(str(nm))), f"{nm} ({t})")
        if key not in keys:
            keys.append(key)
            kroles.append(str(r))
        index[i] = keys.index(key)
    return index, keys, kroles


def _pool_rules(group_by) -> list[tuple[re.Pattern[str], str]]:
    if isinstance(group_by, str):
        pairs = []
        for part in group_by.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise UserError(f"group rule {part!r} must look like REGEX=LABEL (or use 'role')")
            pat, label = part.rsplit("=", 1)
            pairs.append((pat, label.strip()))
    else:
        pairs = list(group_by)
    out = []
    for pat, label in pairs:
        try:
            out.append((re.compile(pat), label))
        except re.error as exc:
            raise UserError(f"bad regular expression {pat!r} in --group-by: {exc}") from None
    return out


def _boxes(crit: np.ndarray, run: np.ndarray, group: np.ndarray, labels, roles, tids) -> tuple[Box, ...]:
    ng = len(labels)
    gc = np.bincount(group, weights=crit, minlength=ng)
    gr = np.bincount(group, weights=run, minlength=ng)
    members: list[list[int]] = [[] for _ in range(ng)]
    for i, g in enumerate(group.tolist()):
        members[g].append(int(tids[i]))
    boxes = [Box(labels[g], roles[g], tuple(members[g]), float(gc[g]), float(gr[g])) for g in range(ng)]
    width = np.array([b.width if b.height_ns > 0 else -1.0 for b in boxes])
    first_tid = np.array([min(b.tids) if b.tids else 0 for b in boxes])
    order = np.lexsort((first_tid, -gc, -width))
    return tuple(boxes[i] for i in order)


def bottle(
    trace: Trace | AggregateRecording, *, group_by=None, active: str = "running", between: tuple[int, int] | None = None,
    window: int | str | None = None,
) -> BottleResult | WindowedBottleResult:
    """Bottle graph of `trace` (thesis §3.3), per thread, per role or per thread pool.

    Parameters
    ----------
    group_by : None, "role", "REGEX=LABEL,..." or [(regex, label), ...]
        Aggregate threads: by role, or by name patterns (thread pools); unmatched threads stay
        alone. Heights and areas add, so P = ΣRun / ΣC.
    active : {"running", "running+runnable"}
    between : (t0_ns, t1_ns), optional
    window : int ns or a duration such as "500ms", optional
        One bottle graph per window (the thesis draws pmd every 0.5 s).
    """
    if isinstance(trace, AggregateRecording):  # per-window counters of `record --aggregate`
        return _from_counters(trace, group_by, active, between, window)
    group, labels, roles = group_labels(trace, group_by)
    tids = trace.threads.tid
    if window is None:
        res = criticality(trace, active=active, between=between)
        return BottleResult(_boxes(res.criticality_ns, res.running_ns, group, labels, roles, tids), res.idle_ns,
                            res.span_ns, res.t0_ns, active)
    w = parse_duration_ns(window)
    t0, t1 = _span(trace, between)
    n_win = window_count(t0, t1, w)
    n = len(trace.threads)
    edges = np.minimum(t0 + np.arange(n_win + 1) * w, t1)
    # as the whole run's graph (`criticality`): criticality over the switch spans where the recording
    # has them, the boxes' running time from the states (one window over the run: the same graph)
    rows, a, b, tl, where = critical_sweep(trace, active, t0, t1)
    crit = _per_window(rows, a, b, t0, t1, w, n_win, n, tl, where, edges)
    rows, a, b, _, _ = sweep(trace, active, t0, t1)
    run = _per_window(rows, a, b, t0, t1, w, n_win, n)
    idle = np.diff(tl.idle_at(edges))
    windows = tuple(
        BottleResult(_boxes(crit[j], run[j], group, labels, roles, tids), float(idle[j]), int(edges[j + 1] - edges[j]),
                     int(edges[j]), active)
        for j in range(n_win)
    )
    return WindowedBottleResult(w, windows)


def _per_window(rows, a, b, t0: int, t1: int, w: int, n_win: int, n: int, tl=None, where=None,
                edges=None) -> np.ndarray:
    """(windows, threads) sums of the intervals [a, b) of thread rows `rows` cut at the window
    edges, all at once: their criticality (F's growth over each piece) given the timeline `tl` and
    where each endpoint landed, else their length."""
    k_a = (a - t0) // w
    k_b = (b - 1 - t0) // w
    pieces = (k_b - k_a + 1).astype(np.int64)
    idx = np.repeat(np.arange(len(a)), pieces)
    k = np.repeat(k_a, pieces) + (np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces))
    pa = np.maximum(a[idx], t0 + k * w)
    pb = np.minimum(b[idx], np.minimum(t0 + (k + 1) * w, t1))
    flat = k * n + rows[idx]
    if tl is None:
        weights = (pb - pa).astype(np.float64)
    else:  # F at a piece's ends: the interval's own endpoint (a gather) or the window's edge
        m = len(a)
        f_edge = tl.at(edges)
        f_a = np.where(pa == a[idx], tl.F[where[0:2 * m:2]][idx], f_edge[k])
        f_b = np.where(pb == b[idx], tl.F[where[1:2 * m:2]][idx], f_edge[np.minimum(k + 1, n_win)])
        weights = f_b - f_a
    return np.bincount(flat, weights=weights, minlength=n_win * n).reshape(n_win, n)


MAX_WINDOWS = 100_000  # bottle graphs per run: each window holds a box per thread group


def window_count(t0: int, t1: int, w: int) -> int:
    """How many windows of `w` ns tile [t0, t1); a user's error beyond `MAX_WINDOWS` (`--window
    1ns` on a 0.3 s trace asked for 3 x 10^8 of them and ran out of memory)."""
    if w <= 0:
        raise UserError("--window must be a positive duration, such as 500ms")
    n = int(-(-(t1 - t0) // w))
    if n > MAX_WINDOWS:
        from scalestack.units import format_ns

        raise UserError(f"--window {format_ns(w)} cuts the {format_ns(t1 - t0)} run into {n:,} windows; give one "
                        f"of {format_ns(-(-(t1 - t0) // MAX_WINDOWS))} or more (at most {MAX_WINDOWS:,} windows)")
    return n


def _from_counters(rec: AggregateRecording, group_by, active: str, between, window) -> BottleResult | WindowedBottleResult:
    """Bottle graph of an aggregate recording, or one per `window` (a multiple of the recorded
    window; rounded to the nearest): sums of its rows, no sweep."""
    refuse_trace_options(active, between)
    tids, names, roles = rec.threads()
    group, labels, groles = group_threads(tids, names, roles, group_by)
    start, end, busy = rec.windows()
    if window is None:
        s = rec.per_thread()
        span = int(end[-1] - start[0]) if len(start) else 0
        return BottleResult(_boxes(s["crit_ns"], s["running_ns"], group, labels, groles, tids),
                            float(max(span - busy.sum(), 0.0)), span, int(start[0]) if len(start) else 0, "running")
    k = max(1, int(round(parse_duration_ns(window) / rec.window_ns)))
    out = []
    for j in range(0, len(start), k):
        mask = np.zeros(len(start), bool)
        mask[j:j + k] = True
        s = rec.per_thread(mask)
        span = int(end[min(j + k, len(end)) - 1] - start[j])
        out.append(BottleResult(_boxes(s["crit_ns"], s["running_ns"], group, labels, groles, tids),
                                float(max(span - busy[mask].sum(), 0.0)), span, int(start[j]), "running"))
    return WindowedBottleResult(k * rec.window_ns, tuple(out))
