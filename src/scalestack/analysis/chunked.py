"""Criticality stacks and bottle graphs of a stored trace, read one time chunk at a time.

Both are sums over time: C_j = ∫ [j active] / r(t) dt, Run_j and the idle time add up over any
cut of the run into windows, since r(t) at an instant depends only on that instant. So a trace
too big to hold is read window by window (`store.load(path, window=...)` reads only the Parquet
row groups that overlap), each window's sums are computed as for a whole trace, and added. The
windows are planned from the row groups' time statistics, before any row is read, so that each
holds about `max_rows` rows of states and switch spans: memory follows the chunk, not the trace.

The results equal the whole trace's: Run_j and idle exactly (sums of integer ns), C_j to the
rounding of the float sums it is made of (each window's F(t) restarts at 0, which if anything
loses less).

`time_in_states` is a sum too, of each state row's whole duration: each window counts the rows
that start in it, so the result is the whole trace's bit for bit.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from scalestack.analysis.advice import (
    WAKER_SLACK_NS,
    AdviceResult,
    Facts,
    WaitSums,
    _infer_wakers,
    alone_time,
    findings,
)
from scalestack.analysis.advice import advise as advise_whole
from scalestack.analysis.bottle import BottleResult, WindowedBottleResult, _boxes, group_threads
from scalestack.analysis.bottle import bottle as _bottle
from scalestack.analysis.criticality import (
    ACTIVE,
    CriticalityResult,
    _criticality,
    clip_span,
    sweep,
)
from scalestack.analysis.phase_criticality import PhaseGain, capped_gain, per_phase_criticality
from scalestack.analysis.phase_criticality import cuts as phase_cuts
from scalestack.analysis.phase_criticality import leads as phase_leads
from scalestack.analysis.whatif import (
    ReplayWalk,
    WhatIfResult,
    _blocked_ns,
    _next_running,
    _runs,
    merge_args,
)
from scalestack.analysis.whatif import check as whatif_check
from scalestack.analysis.whatif import result as whatif_result
from scalestack.errors import UserError
from scalestack.trace import NameTable, State, ThreadTable, Trace
from scalestack.trace.lookup import state_sums
from scalestack.trace.store import group_ranges, load, load_states, load_threads, read_meta
from scalestack.units import parse_duration_ns

CHUNK_ROWS = 1 << 22  # rows of states and switch spans a chunk holds (~4 M: ~0.3 GB with the sweep)

Progress = Callable[[int, int], None]  # (chunks done, chunks)


def stored_rows(path: str | os.PathLike) -> int:
    """Rows of states and switch spans in a trace file (what a whole load holds), read from its
    Parquet footers alone."""
    return int(sum(int(group_ranges(path, m)[0].sum()) for m in ("states", "switch_spans")))


def plan(path: str | os.PathLike, t0: int, t1: int, max_rows: int = CHUNK_ROWS,
         grid: int | None = None, members: tuple[str, ...] = ("states", "switch_spans")) -> list[tuple[int, int]]:
    """Consecutive windows [a, b) tiling [t0, t1), each overlapping row groups of at most `max_rows`
    rows in all, or no more than twice what the shortest window there would (a window is never
    shorter than the gap between two group edges, or one `grid` step). With `grid` (ns), every inner edge is t0 plus a multiple of it (so
    that per-window bottle graphs fall on the same windows as the whole trace's). `members`: the
    tables whose rows a window will read."""
    parts = [group_ranges(path, m) for m in members]
    rows, lo, hi = (np.concatenate([p[i] for p in parts]) for i in range(3))
    if grid is not None:
        cand = t0 + grid * np.arange(1, -(-(t1 - t0) // grid), dtype=np.int64)
    else:
        cand = np.unique(np.concatenate([lo, hi]))
    cand = np.r_[cand[(cand > t0) & (cand < t1)], t1].astype(np.int64)
    out = []
    a = t0
    while a < t1:
        ts = cand[np.searchsorted(cand, a, side="right"):]
        live = hi > a  # groups ending after a: those with lo < b overlap [a, b)
        order = np.argsort(lo[live], kind="stable")
        starts, weight = lo[live][order], np.cumsum(rows[live][order])
        held = np.searchsorted(starts, ts, side="left")  # groups starting before each candidate end
        # no group left (a trace without rows, or whose meta's range outlasts its rows): one window
        w = np.where(held > 0, weight[np.maximum(held - 1, 0)], 0) if len(weight) else np.zeros(len(ts), np.int64)
        # groups the shortest window already overlaps are read anyway: the window may grow while it
        # overlaps no more than twice as many rows (else, with one group a thread already over
        # max_rows, every window would end at the next group's edge: 282 loads of 10^8 rows), or
        # max_rows
        fits = np.flatnonzero(w <= max(max_rows, 2 * int(w[0])))
        b = int(ts[fits[-1]])
        out.append((a, b))
        a = b
    return out


def _span(path, between) -> tuple[int, int]:
    meta = read_meta(path)
    if "start_ns" not in meta or "end_ns" not in meta:
        raise UserError(f"{path} does not give its time range; read it whole (scalestack.load)")
    return clip_span(meta["start_ns"], meta["end_ns"], between)


def _chunks(path, windows, progress: Progress | None):
    """Each window with the part of the trace that overlaps it (or begins at its end). The C heap is trimmed between
    windows: glibc serves a chunk's arrays (< 32 MB each) from its heap and keeps them when freed,
    so without it the process grew by a chunk's worth every few windows (to 0.9 GB for 4 M rows)."""
    for k, (a, b) in enumerate(windows):
        _trim()
        yield a, b, load(path, window=(a, b + 1))  # and the rows that begin at b: what follows a row ending there
        if progress is not None:
            progress(k + 1, len(windows))


def _trim() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator gives memory back by itself, or not at all
        pass


def _sums(path, active: str, between, max_rows: int, progress: Progress | None, also: Callable | None = None
          ) -> tuple[CriticalityResult, ThreadTable]:
    """The criticality stack's sums over the chunks; `also(k, n, a, b, part)` is called with each
    chunk k of n (window [a, b)) too, so that another analysis reads the trace in the same pass."""
    if active not in ACTIVE:
        raise UserError(f"active must be one of {', '.join(ACTIVE)}, not {active!r}")
    t0, t1 = _span(path, between)
    spans = int(group_ranges(path, "switch_spans")[0].sum()) > 0  # decided for the whole file, not per chunk
    crit = run = None
    idle = 0.0
    windows = plan(path, t0, t1, max_rows)
    for k, (a, b, part) in enumerate(_chunks(path, windows, progress)):
        res = _criticality(part, active, a, b, spans)
        crit = res.criticality_ns if crit is None else crit + res.criticality_ns
        run = res.running_ns if run is None else run + res.running_ns
        idle += res.idle_ns
        if also is not None:
            also(k, len(windows), a, b, part)
        th = part.threads  # every chunk has the whole thread table
        del part, res  # before the next chunk loads: one chunk at a time
    return CriticalityResult(tids=th.tid.copy(), names=th.name.copy(), roles=th.role.copy(), criticality_ns=crit,
                             running_ns=run, idle_ns=idle, span_ns=t1 - t0, active=active, t0_ns=t0), th


def criticality(path: str | os.PathLike, *, active: str = "running", between: tuple[int, int] | None = None,
                max_rows: int = CHUNK_ROWS, progress: Progress | None = None) -> CriticalityResult:
    """`analysis.criticality.criticality` of the trace stored at `path`, in chunks of about
    `max_rows` rows (`between`: absolute ns, as there)."""
    return _sums(path, active, between, max_rows, progress)[0]


def bottle(path: str | os.PathLike, *, group_by=None, active: str = "running", between: tuple[int, int] | None = None,
           window: int | str | None = None, max_rows: int = CHUNK_ROWS,
           progress: Progress | None = None) -> BottleResult | WindowedBottleResult:
    """`analysis.bottle.bottle` of the trace stored at `path`, in chunks of about `max_rows` rows;
    with `window`, the chunks' edges fall on the windows' edges and their windows are joined."""
    if window is None:
        res, th = _sums(path, active, between, max_rows, progress)
        group, labels, roles = group_threads(th.tid.tolist(), th.name.tolist(), th.role.tolist(), group_by)
        return BottleResult(_boxes(res.criticality_ns, res.running_ns, group, labels, roles, th.tid),
                            res.idle_ns, res.span_ns, res.t0_ns, active)
    w = parse_duration_ns(window, what="--window")
    t0, t1 = _span(path, between)
    windows = []
    for a, b, part in _chunks(path, plan(path, t0, t1, max_rows, grid=w), progress):
        windows.extend(_bottle(part, group_by=group_by, active=active, between=(a, b), window=w).windows)
        del part
    return WindowedBottleResult(w, tuple(windows))


def whatif(path: str | os.PathLike, tid: int, factor: float = 2.0, *, max_rows: int = CHUNK_ROWS,
           progress: Progress | None = None) -> WhatIfResult:
    """`analysis.whatif.whatif` of the trace stored at `path`, in chunks of about `max_rows` rows,
    in one pass: the criticality stack and the blocked time add up over chunks, and the replay,
    which re-times the segment ends in time order, walks each chunk's ends with its state carried
    from the last (`whatif.ReplayWalk`): the same events in the same order, so the same span."""
    return _whatif(path, tid, factor, max_rows, progress, None)


def whatif_and_phases(path: str | os.PathLike, tid: int, factor: float = 2.0, *, max_rows: int = CHUNK_ROWS,
                      progress: Progress | None = None) -> tuple[WhatIfResult, PhaseGain]:
    """`whatif` and `phase_gain` (factor > 1) in the same pass over the chunks (what the whatif
    command prints)."""
    phases = _ChunkedPhases("running", factor)
    return _whatif(path, tid, factor, max_rows, progress, phases), phases.result()


def _whatif(path, tid: int, factor: float, max_rows: int, progress: Progress | None, phases) -> WhatIfResult:
    replay = _ChunkedReplay([tid], factor)

    def each(k: int, n: int, a: int, b: int, part) -> None:
        replay(k, n, a, b, part)
        if phases is not None:
            phases(k, n, a, b, part)

    cr, _ = _sums(path, "running", None, max_rows, progress, also=each)
    return whatif_result(tid, factor, cr.span_ns, cr, replay.walks[0].span(), replay.blocked, replay.unknown)


class _ChunkedReplay:
    """The replay's walks (one per accelerated thread) over a trace read in chunks. Chunk k of n,
    of window [a, b), walks the rows that end in (a, b] and the births there (the first chunk also
    those before, the last those after): every row and birth once, in the whole trace's order
    (births before the ends at their instant). A row's successor starts where it ends, by b, so the
    chunk holds it too (states tile each thread's life; `_chunks` reads the rows that begin at b),
    and a thread's first row starts at its birth."""

    def __init__(self, tids: list[int], factor: float):
        self.tids, self.factor = tids, factor
        self.walks: list[ReplayWalk] = []
        self.blocked = self.unknown = 0

    def __call__(self, k: int, n: int, a: int, b: int, part, waker: np.ndarray | None = None) -> None:
        """`waker`: the part's waker column to replay with (default its own)."""
        th, st = part.threads, part.states
        if not self.walks:
            for t in self.tids:
                whatif_check(th.tid, t, self.factor)
            self.walks = [ReplayWalk(part, {t: self.factor}) for t in self.tids]
            self.births = np.argsort(th.start_ns, kind="stable")
            self.born = th.start_ns[self.births]
        first = np.flatnonzero(np.r_[True, st.tid[1:] != st.tid[:-1]]) if len(st) else np.zeros(0, np.int64)
        ks = part.thread_index(st.tid[first])
        at_birth = st.start_ns[first] == th.start_ns[ks]
        for walk in self.walks:
            walk.first_running[ks[at_birth]] = st.state[first[at_birth]] == State.RUNNING
        rows = np.flatnonzero(_ends_in(st, k, n, a, b))
        nxt = _next_running(st.tid, st.state)[rows]
        tid, ends, state, start = (c[rows] for c in (st.tid, st.end_ns, st.state, st.start_ns))
        waker = (st.waker if waker is None else waker)[rows]
        runs = _runs(tid, ends, state)
        stop = np.append(runs[1:], len(rows)).astype(np.int64)
        run_k = part.thread_index(tid[runs]).astype(np.int64, copy=False)
        lo = 0 if k == 0 else int(np.searchsorted(self.born, a, side="right"))
        hi = len(self.born) if k == n - 1 else int(np.searchsorted(self.born, b, side="right"))
        for walk in self.walks:
            walk.step(*merge_args(runs, stop, run_k, self.births[lo:hi], th.start_ns, ends, state), start, waker, nxt)
        blocked, unknown = _blocked_ns(start, ends, state, waker)
        self.blocked += int(blocked)
        self.unknown += int(unknown)


def _ends_in(st, k: int, n: int, a: int, b: int) -> np.ndarray:
    """The rows chunk k of n (window [a, b)) counts: those ending in (a, b], the first chunk's also
    those before, the last's those after."""
    keep = np.ones(len(st), bool)
    if k > 0:
        keep &= st.end_ns > a
    if k < n - 1:
        keep &= st.end_ns <= b
    return keep


def advise(path: str | os.PathLike, factor: float = 2.0, max_threads: int = 3, *, sweep=None,
           max_rows: int = CHUNK_ROWS, progress: Progress | None = None) -> AdviceResult:
    """`analysis.advice.advise` of the trace stored at `path`, in chunks of about `max_rows` rows,
    in two passes: the first adds up the facts (`advice.Facts`: criticality, alone time, the waits'
    sums with the wakers inferred as the whole trace's would be), the findings then say which
    threads need a replay, and the second pass replays them (and finds the phases, if the findings
    ask). A trace with call stacks is read whole: the code findings (`analysis.where`) need it."""
    if has_call_stacks(path):
        return advise_whole(load(path), factor, max_threads, sweep)
    first = _AdviceFacts()
    cr, th = _sums(path, "running", None, max_rows, progress, also=first)
    meta = read_meta(path)

    def pool_bottle(rules) -> BottleResult:
        group, labels, roles = group_threads(th.tid.tolist(), th.name.tolist(), th.role.tolist(), rules)
        return BottleResult(_boxes(cr.criticality_ns, cr.running_ns, group, labels, roles, th.tid), cr.idle_ns,
                            cr.span_ns, cr.t0_ns, "running")

    replays: dict[int, float | None] = {}  # the threads the findings ask to replay, then their speedups
    phases: dict[str, PhaseGain | None] = {}  # "found" once the findings ask for the phases

    def replay(t: int) -> float:
        return replays.setdefault(int(t), None) or 1.0

    def phase_gain() -> PhaseGain:
        return phases.setdefault("found", None) or _no_phases(th.tid, factor)

    facts = Facts(th, meta, cr, first.alone_of(th), WaitSums.join(first.waits), first.runnable, None, pool_bottle,
                  phase_gain, replay)
    findings(facts, factor, max_threads, sweep)  # which replays (and phases) the findings ask for
    if replays or phases:
        walk = _ChunkedReplay(list(replays), factor)
        cut = _ChunkedPhases("running+runnable", factor) if phases else None
        infer = _InferredWakers()
        t0, t1 = _span(path, None)
        windows = plan(path, t0, t1, max_rows)
        for k, (a, b, part) in enumerate(_chunks(path, windows, progress)):
            if replays:
                walk(k, len(windows), a, b, part, infer(k, len(windows), a, b, part))
            if cut is not None:
                cut(k, len(windows), a, b, part)
            del part
        for t, w in zip(list(replays), walk.walks, strict=True):
            span = w.span()
            replays[t] = cr.span_ns / span if span > 0 else 1.0  # WhatIfResult.replay_speedup
        if cut is not None:
            phases["found"] = cut.result()
    return findings(facts, factor, max_threads, sweep)


def has_call_stacks(path: str | os.PathLike) -> bool:
    """Whether the stored trace has what `advice`'s code findings need (samples with call stacks,
    `where`): those read the whole trace."""
    return bool(read_meta(path).get("sample_hz")) and all(
        int(group_ranges(path, m)[0].sum()) > 0 for m in ("stacks", "samples"))


def _no_phases(tids: np.ndarray, factor: float) -> PhaseGain:
    """What the findings see of the phases before they are found: none."""
    zero = np.zeros(len(tids), np.int64)
    return PhaseGain(tids=tids.copy(), gain_ns=zero.astype(float), factor=float(factor), span_ns=0, phases=0,
                     lead_phases=zero, lead_ns=zero)


class _AdviceFacts:
    """The first pass of `advise`: per chunk, the alone time inside its window, and the waits and
    the runnable time of the rows it counts (`_ends_in`), wakers inferred (`_InferredWakers`)."""

    def __init__(self):
        self.infer = _InferredWakers()
        self.waits: list[WaitSums] = []
        self.runnable = 0
        self.alone: dict[int, int] = {}

    def __call__(self, k: int, n: int, a: int, b: int, part) -> None:
        st = part.states
        waker = self.infer(k, n, a, b, part)
        self.waits.append(WaitSums.of(st, part.threads.tid, a if k > 0 else None, b if k < n - 1 else None, waker))
        rows = _ends_in(st, k, n, a, b) & (st.state == int(State.RUNNABLE))
        self.runnable += int((st.end_ns[rows] - st.start_ns[rows]).sum())
        for t, ns in alone_time(part, a, b).items():
            self.alone[t] = self.alone.get(t, 0) + ns

    def alone_of(self, th: ThreadTable) -> dict[int, int]:
        """The alone times in thread-table order, as `advice.alone_time` gives them."""
        return {int(t): self.alone[int(t)] for t in th.tid.tolist() if int(t) in self.alone}


class _InferredWakers:
    """`advice.with_inferred_wakers` over a trace read in chunks. A wait that ends at t gets the
    one thread among the 64 running rows that started last by t (by start, then thread) that ran
    until `WAKER_SLACK_NS` before t or later; chunk k answers for the waits that end in it from its
    own running rows and the 64 that started last before it (carried), which are all it needs."""

    def __init__(self):
        self.carry = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))  # start, end, tid

    def __call__(self, k: int, n: int, a: int, b: int, part) -> np.ndarray:
        st, tids = part.states, part.threads.tid
        waker = st.waker.copy()
        run = np.flatnonzero(st.state == int(State.RUNNING))
        if k > 0:
            run = run[st.start_ns[run] >= a]  # the earlier ones are in the carry, if they matter
        lost = np.flatnonzero(_ends_in(st, k, n, a, b) & (st.state == int(State.SYNC_WAIT)) & ~np.isin(st.waker, tids))
        start = np.concatenate([self.carry[0], st.start_ns[run], st.start_ns[lost]])
        end = np.concatenate([self.carry[1], st.end_ns[run], st.end_ns[lost]])
        tid = np.concatenate([self.carry[2], st.tid[run], st.tid[lost]]).astype(np.int64)
        m = len(self.carry[0]) + len(run)
        order = np.lexsort((tid[:m], start[:m]))  # the whole trace's order: by start, then table (thread) order
        if len(lost) and m:
            out = np.full(len(start), -1, np.int64)
            _infer_wakers(np.arange(m, len(start), dtype=np.int64), order, start, end, tid, out, WAKER_SLACK_NS)
            got = out[m:] >= 0
            waker[lost[got]] = out[m:][got]
        before = order[start[order] < b][-64:]  # the 64 that started last before the next chunk
        self.carry = (start[before], end[before], tid[before])
        return waker


def phase_gain(path: str | os.PathLike, *, factor: float = 2.0, active: str = "running",
               max_rows: int = CHUNK_ROWS, progress: Progress | None = None) -> PhaseGain:
    """The gain `analysis.phase_criticality.phase_criticality` predicts, of the trace stored at
    `path` (its own phases), in chunks of about `max_rows` rows: each chunk's phases are cut where
    the whole trace's are, the pieces of a phase that spans chunks are added, and a phase's capped
    gain is summed once it is complete (a trace may have a phase per switch: 12.5 M here)."""
    phases = _ChunkedPhases(active, factor)
    t0, t1 = _span(path, None)
    for k, (a, b, part) in enumerate(_chunks(path, plan(path, t0, t1, max_rows), progress)):
        phases(k, 0, a, b, part)
        del part
    return phases.result()


class _ChunkedPhases:
    """Per-phase gains over a trace read in chunks. Inside a chunk, whether an interval's start
    cuts (at most one thread active just before) is the whole trace's answer, since the active
    count at an instant depends on that instant alone; at a chunk's first instant it takes the
    count the last chunk ended with, and an interval that truly starts there (not one cut by the
    window). A chunk's last phase stays open until the next chunk says whether its start cuts."""

    def __init__(self, active: str, factor: float):
        if factor <= 1:
            raise UserError("factor must be greater than 1")
        self.active, self.factor = active, factor
        self.r_end = 0
        self.open: np.ndarray | None = None  # criticality of the phase the last chunk ended in
        self.open_start = 0
        self.gain: np.ndarray | None = None
        self.lead_phases = self.lead_ns = 0
        self.phases = 0
        self.span = [0, 0]

    def __call__(self, k: int, n: int, a: int, b: int, part) -> None:
        _, starts, _, tl, _ = sweep(part, self.active, a, b)
        inner, r_end = phase_cuts(starts, tl, before=b)
        bounds = np.r_[a, inner[inner > a], b].astype(np.int64)  # phase_cuts' are sorted and distinct
        st = part.states
        pieces = per_phase_criticality(part, bounds, self.active)
        begin = bounds[:-1].copy()
        if self.open is None:
            self.span[0] = a
        elif self.r_end <= 1 and bool(np.any((st.start_ns == a) & np.isin(st.state, [int(x) for x in ACTIVE[self.active]])
                                             & np.isin(st.tid, part.threads.tid))):
            self._done(self.open[None, :], np.array([a - self.open_start]))
        else:
            pieces[0] = self.open + pieces[0]  # in time order, as the whole trace's sums
            begin[0] = self.open_start
        self._done(pieces[:-1], bounds[1:-1] - begin[:-1])
        self.open, self.open_start = pieces[-1].copy(), int(begin[-1])
        self.r_end = r_end
        self.span[1] = b
        self.tids = part.threads.tid

    def _done(self, c: np.ndarray, length: np.ndarray) -> None:
        gain = capped_gain(c, self.factor).sum(axis=0)
        self.gain = gain if self.gain is None else self.gain + gain
        count, total = phase_leads(c, length)
        self.lead_phases, self.lead_ns = self.lead_phases + count, self.lead_ns + total
        self.phases += len(c)

    def result(self) -> PhaseGain:
        self._done(self.open[None, :], np.array([self.span[1] - self.open_start]))
        return PhaseGain(tids=self.tids.copy(), gain_ns=self.gain, factor=float(self.factor),
                         span_ns=int(self.span[1] - self.span[0]), phases=self.phases, lead_phases=self.lead_phases,
                         lead_ns=self.lead_ns)


def time_in_states(path: str | os.PathLike, *, max_rows: int = CHUNK_ROWS,
                   progress: Progress | None = None) -> tuple[ThreadTable, np.ndarray]:
    """The thread table and `Trace.time_in_states()` of the trace stored at `path` (rows as the
    table's), reading about `max_rows` state rows at a time and no switch span.

    A window's load holds every row that overlaps it, so rows are read again by each window they
    cross but counted only in the one they start in: the first window counts all rows starting
    before its end, the last all from its start on (rows lie inside the meta's range, but one that
    did not would still count once). A window's sums are float64 sums of integer ns, as the whole
    trace's, exact below 2^53 ns (104 days) a thread and state, so the totals are the same ints."""
    threads, meta = load_threads(path)
    if "start_ns" not in meta or "end_ns" not in meta:
        raise UserError(f"{path} does not give its time range; read it whole (scalestack.load)")
    t0, t1 = int(meta["start_ns"]), int(meta["end_ns"])  # not clip_span's: an empty range is one window
    windows = plan(path, t0, t1, max_rows, members=("states",)) or [(t0, t1)]
    order = np.argsort(threads.tid, kind="stable")
    sorted_tids = threads.tid[order]
    out = np.zeros((len(threads), len(State)), np.int64)
    for k, (a, b) in enumerate(windows):
        a = np.iinfo(np.int64).min if k == 0 else a
        b = np.iinfo(np.int64).max if k == len(windows) - 1 else b
        _trim()
        part = load_states(path, window=(a, b))
        for rows in _starting_in(part.tid, part.start_ns, a, b):
            sums = state_sums(part.tid[rows], part.start_ns[rows], part.end_ns[rows], part.state[rows],
                              sorted_tids, order, len(State))
            if sums is not None:
                out.ravel()[:] += sums.astype(np.int64)
            else:  # a tid that is no thread or a state beyond State: fail (or not) as the whole trace does
                out += Trace(threads, part.take(rows), NameTable.empty(), meta).time_in_states()
        del part  # before the next chunk loads: one chunk at a time
        if progress is not None:
            progress(k + 1, len(windows))
    return threads, out


def _starting_in(tid: np.ndarray, start: np.ndarray, a: int, b: int) -> list:
    """The rows starting in [a, b) of a state table in (tid, start_ns) order: one slice per thread,
    whose columns are views where a masked copy of them took 88 MB a chunk of 4 M rows; the mask
    itself if a thread's rows are out of time order."""
    edges = np.r_[0, np.flatnonzero(tid[1:] != tid[:-1]) + 1, len(tid)].tolist()
    out = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        s = start[lo:hi]
        if np.any(s[1:] < s[:-1]):
            return [(start >= a) & (start < b)]
        i, j = np.searchsorted(s, np.array([a, b], np.int64)).tolist()
        if j > i:
            out.append(slice(lo + i, lo + j))
    return out
