"""What-if, per-phase gains and advice of a stored trace read in time chunks: the analyses whose
state is carried from one chunk to the next (the replay's cursors, the open phase, the running
rows a waker is inferred from), built on `analysis.chunked`'s plan and chunks. Each gives the
whole trace's answer: the same events in the same order, or sums that add up over chunks.
"""

from __future__ import annotations

import os

import numpy as np

from scalestack.analysis.advice import (
    WAKER_SLACK_NS,
    AdviceResult,
    Facts,
    WaitSums,
    _infer_wakers,
    alone_time,
    findings,
    runnable_beside_free_cores,
    usable_cores,
)
from scalestack.analysis.advice import advise as advise_whole
from scalestack.analysis.bottle import BottleResult
from scalestack.analysis.chunked import CHUNK_ROWS, Progress, _chunks, _span, _sums, bottle_of, plan
from scalestack.analysis.criticality import ACTIVE, CriticalityResult, sweep
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
from scalestack.trace import State, ThreadTable
from scalestack.trace.store import group_ranges, load, read_meta


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
    first = AdviceFacts()
    cr, th = _sums(path, "running", None, max_rows, progress, also=first)
    return advise_from(path, cr, th, first, factor, max_threads, sweep=sweep, max_rows=max_rows, progress=progress)


def advise_from(path: str | os.PathLike, cr: CriticalityResult, th: ThreadTable, first: AdviceFacts,
                factor: float = 2.0, max_threads: int = 3, *, sweep=None, max_rows: int = CHUNK_ROWS,
                progress: Progress | None = None) -> AdviceResult:
    """`advise` after its first pass: `first` (an `AdviceFacts`) was given every chunk of the pass
    that summed `cr` (`_sums` of "running", whose thread table is `th`), which may have summed
    other things on the way (a report's)."""
    meta = read_meta(path)

    def pool_bottle(rules) -> BottleResult:
        return bottle_of(cr, th, rules)

    replays: dict[int, float | None] = {}  # the threads the findings ask to replay, then their speedups
    phases: dict[str, PhaseGain | None] = {}  # "found" once the findings ask for the phases

    def replay(t: int) -> float:
        return replays.setdefault(int(t), None) or 1.0

    def phase_gain() -> PhaseGain:
        return phases.setdefault("found", None) or _no_phases(th.tid, factor)

    facts = Facts(th, meta, cr, first.alone_of(th), WaitSums.join(first.waits), first.runnable, None, pool_bottle,
                  phase_gain, replay, first.runnable_free if usable_cores(meta) else None)
    findings(facts, factor, max_threads, sweep)  # which replays (and phases) the findings ask for
    if replays or phases:
        walk = _ChunkedReplay(list(replays), factor)
        cut = _ChunkedPhases("running+runnable", factor) if phases else None
        infer = _InferredWakers()
        t0, t1 = _span(path, None)
        windows = plan(path, t0, t1, max_rows)
        for k, a, b, part in _chunks(path, windows, progress):
            if replays:
                walk(k, len(windows), a, b, part, infer(k, len(windows), a, b, part))
            if cut is not None:
                cut(k, len(windows), a, b, part)
            del part
        for t, w in zip(list(replays), walk.walks, strict=True):
            replays[t] = whatif_result(t, factor, cr.span_ns, cr, w.span(), 0, 0).replay_speedup
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


class AdviceFacts:
    """The first pass of `advise` (a chunk callback, `_sums`'s `also`): per chunk, the alone time inside its window, and the waits and
    the runnable time of the rows it counts (`_ends_in`), wakers inferred (`_InferredWakers`)."""

    def __init__(self):
        self.infer = _InferredWakers()
        self.waits: list[WaitSums] = []
        self.runnable = 0
        self.runnable_free = 0  # advice.runnable_beside_free_cores, window by window
        self.alone: dict[int, int] = {}

    def __call__(self, k: int, n: int, a: int, b: int, part) -> None:
        st = part.states
        waker = self.infer(k, n, a, b, part)
        self.waits.append(WaitSums.of(st, part.threads.tid, a if k > 0 else None, b if k < n - 1 else None, waker))
        rows = _ends_in(st, k, n, a, b) & (st.state == int(State.RUNNABLE))
        self.runnable += int((st.end_ns[rows] - st.start_ns[rows]).sum())
        cores = usable_cores(part.meta)
        if cores:
            self.runnable_free += runnable_beside_free_cores(part, cores, a, b)
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
    for k, a, b, part in _chunks(path, plan(path, t0, t1, max_rows), progress):
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
