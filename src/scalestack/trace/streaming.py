"""The state builder over a recording read in time windows: memory follows one window and the
trace's rows, not the events (53 bytes each: 5.3 GB at 10^8).

`build_trace` holds every event because its passes after the walk ask about all of them. Here
each pass that reads events is a fold carried from window to window, and the recording is read
again for each question that can only be asked once the answers before it are known:

1. the facts the walk needs (traced threads, forks, CPUs: `event_facts.EventFacts`);
2. the walk (`builder._walk_chunk`), and with it every traced thread's switch spans, names and
   pid (a thread's do not depend on which others are followed), gathering the few events later
   passes need (the traced threads' runtime reports, run-delay reports, code samples);
3. if the runtime reports leave stretches to ask about, whether their CPU ran anything else
   (`cpu_sweeps` witness);
4. the futex calls that name each wait's waker (`futex_wakers`);
5. whether the woken thread's CPU was busy at each such call (`cpu_sweeps` busy).

Every pass gives what the pass over all events gives, so the Trace is `build_trace`'s, bit for
bit (tests/unit/test_streaming_builder.py cuts random recordings into random windows).

With `output`, the walk's rows and switch spans and the runtime reports are spilled to disk by
thread (`trace.spill`), with the traced threads' futex events in time order (`spill.ColumnLog`),
passes 3 to 5 run on a batch of threads at a time (each asks only about its batch's threads: pass
4 reads the futex events kept, passes 3 and 5 the recording again, when they ask anything), and
each batch's states and switch spans go to the trace file as they are finished
(`store.TraceWriter`): memory follows a window and a batch, not the trace.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import numba
import numpy as np

from scalestack.errors import UserError
from scalestack.trace import NameTable
from scalestack.trace.builder import (
    _WAIT_OPS_MASK,
    MAX_CPUS,
    Walked,
    _merge_adjacent,
    _names_chunk,
    _names_end,
    _names_start,
    _pids_chunk,
    _pids_start,
    _reconcile_rows_of,
    _reconcile_steals_by,
    _rows_view,
    _samples,
    _walk_chunk,
    _walk_end,
    _walk_start,
    _walk_states_of,
    finish_threads,
    finish_trace,
    first_run_apart,
    naming_kinds,
    reconcile_runnable,
    run_starts,
    steal_questions,
    traced_slots,
)
from scalestack.trace.cpu_sweeps import witness_chunk, witness_end, witness_start
from scalestack.trace.event_facts import EventFacts
from scalestack.trace.events import CommTable, Kind, RawEvents, concat_events
from scalestack.trace.futex_wakers import FUTEX_COLUMNS, attribute_futex_wakers_windows, futex_rows
from scalestack.trace.lookup import EventIndex, member, row_dtype, state_sums, unique_first
from scalestack.trace.model import State, StateTable, SwitchSpanTable, Trace
from scalestack.trace.rows import RELEASE_EVERY, emit_row, rows_copy, state_table, trim_heap
from scalestack.trace.spill import ColumnLog, ColumnSpill
from scalestack.trace.store import TraceWriter
from scalestack.trace.switch_spans import (
    SwitchSpans,
    _clipped_by_thread,
    _spans_chunk,
    _spans_end,
    _spans_out,
    _spans_start,
)

Windows = Callable[[], Iterable[RawEvents]]


class _Piece(NamedTuple):
    """A time piece of one thread's rows (`_SpilledRows._cuts`): its walk rows [a, b), its
    runtime reports [a, b) (those ending inside it and the last before them: `_Reports.first_for`),
    and its run-delay reports from the piece before it to the one after, with the last report
    before that and the first after it (a gap is sized by the report that ends the run before it
    and the next report, however far: `builder._run_delay_gaps`; a run the thread never left
    begins at the last report before a piece, however far: `builder._current_runs`; extra reports
    at either end pair with nothing); rows of the slot's spills."""
    slot: int
    rows: tuple[int, int]
    reports: tuple[int, int]
    delays: tuple[int, int]
    delays_since: int | None  # the time the delays begin at (None: the thread's first)
    first: bool
    last: bool


def _scheduled(windows: Windows):
    """Each window's events without the run-delay reports, and those reports (eBPF's: not a state
    change); windows left empty skipped. The next window is read while the caller works on this
    one (`read_ahead`)."""
    return read_ahead(_split(windows()))


def _split(windows: Iterable[RawEvents]):
    for w in windows:
        rd = w.kind == Kind.RUN_DELAY
        if not rd.any() and not len(w):
            continue
        box = [(w.take(np.flatnonzero(~rd)), w.take(np.flatnonzero(rd))) if rd.any() else (w, None)]
        del w, rd  # the window is not held beside its two parts, nor they here, while the caller reads them
        yield box.pop()


def read_ahead(items: Iterable, cores: int | None = None) -> Iterator:
    """The items (windows of a recording), the next one made on a second thread while the caller works
    on this one, where the process may use two CPUs or more (`cores`: how many it may): a window's
    decoding releases the GIL, so the reading costs the passes over the windows little wall time.
    One item is made ahead, no more (memory: a window more). An error making an item is raised where
    the caller asks for it; a caller that stops early stops the thread after the item it is making."""
    if (cores or len(os.sched_getaffinity(0))) < 2:
        yield from items
        return
    made: queue.Queue = queue.Queue()
    room, stop, end = threading.Semaphore(1), threading.Event(), object()

    def make() -> None:
        it = iter(items)
        try:
            while True:
                room.acquire()
                if stop.is_set():
                    return
                item = next(it, end)
                made.put((item, None))
                if item is end:
                    return
                del item  # (held by the caller once taken, not here too)
        except BaseException as exc:  # raised in the caller's thread
            made.put((end, exc))
        finally:
            close = getattr(it, "close", None)
            if close is not None and stop.is_set():
                close()

    worker = threading.Thread(target=make, name="scalestack-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item, exc = made.get()
            if exc is not None:
                raise exc
            if item is end:
                return
            room.release()  # the next is made while the caller has this one
            yield item
            del item
    finally:
        stop.set()
        room.release()


BATCH_ROWS = 10 << 20  # walk rows a batch holds with `output` (~70 B each at the peak; a thread with more is cut)
# the same with eBPF's run-delay reports (about a sixth more events, each window read again by every batch): `record`
# of 4.8-4.9 x 10^7 events peaked at 0.72-0.90 GB (docs/speed.md)
BATCH_ROWS_RUN_DELAY = 6 << 20
CALL_ROWS = 1 << 20  # futex events pass 4 reads back at a time (33 MB)
SCAN_ROWS = 1 << 20  # rows of a thread too big for a batch read at a time to choose where to cut it
_ROW_NAMES = ("slot", "start", "end", "state", "cpu", "addr", "waker", "rep")  # `rows.new_rows`' columns
_ROW_DTYPES = dict(zip(_ROW_NAMES, (np.int32, np.int64, np.int64, np.uint8, np.int16, np.int64, np.int32, np.bool_),
                       strict=True))
_SPAN_DTYPES = {"slot": np.int32, "start": np.int64, "end": np.int64, "rep": np.bool_}  # `switch_spans._spans_out`'s
_REPORT_DTYPES = {"slot": np.int32, "seq": np.int64, "time": np.int64, "tid": np.int64, "ns": np.int64}
_DELAY_DTYPES = {"slot": np.int32, "time": np.int64, "tid": np.int64, "delay": np.int64, "count": np.int64}


def _run_delays(time, tid, delay, count) -> RawEvents:
    """Run-delay reports (eBPF's: arg0 the task, arg1 its run delay, arg2 its arrivals) as RawEvents."""
    n = len(time)
    none = np.full(n, -1, np.int32)
    return RawEvents(time=time, cpu=np.zeros(n, np.int32), pid=np.zeros(n, np.int32), tid=np.zeros(n, np.int32),
                     kind=np.full(n, int(Kind.RUN_DELAY), np.uint8), arg0=tid, arg1=delay, arg2=count, comm0=none,
                     comm1=none.copy())


class _HeldRows:
    """The walk's rows and the traced threads' runtime and run-delay reports held in memory: one
    batch, all threads."""

    def __init__(self):
        self.parts, self.reports, self.other, self.span_parts, self.delays = [], [], None, [], []

    def add_rows(self, rows) -> None:
        self.parts.append(rows_copy(rows))  # out of the walk's room for every event's rows

    def add_spans(self, spans) -> None:
        self.span_parts.append(spans)

    def spans_of(self, lo, hi):
        parts, self.span_parts = self.span_parts, []
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))

    def span_chunks(self, lo, hi):
        return None

    def add_calls(self, w: RawEvents, tids: np.ndarray) -> None:
        pass

    def calls(self):
        """The futex events again, a chunk at a time (`futex_wakers.FUTEX_COLUMNS`), or None: the
        recording is read again for them."""
        return None

    def n_calls(self) -> int | None:
        return None

    def add_reports(self, time, tid, ns, slot, seq) -> None:
        self.reports.append((time, tid, ns))

    def add_delays(self, time, tid, delay, count, slot) -> None:
        self.delays.append((time, tid, delay, count))

    def delays_of(self, lo, hi, piece=None, since=None) -> RawEvents:
        parts, self.delays = self.delays, []
        return _run_delays(*(np.concatenate(c) for c in zip(*parts, strict=True))) if parts else RawEvents.empty()

    def batches(self, n_slots, t0, t1, budget):
        return [(0, n_slots, None)]

    def states(self, lo, hi, t0, t1, tids, piece=None):
        *cols, in_order = _walk_states_of(self.parts, t0, t1, tids, RELEASE_EVERY)  # empties `parts`
        return cols, in_order

    def reports_of(self, lo, hi, piece=None):
        rt = self.reports or ([self.other] if self.other is not None else [])
        self.reports = []
        return [np.concatenate(c) for c in zip(*rt, strict=True)] if rt else [np.zeros(0, np.int64)] * 3


class _SpilledRows(_HeldRows):
    """The same on disk, by thread slot (`spill.ColumnSpill`), read a batch of threads at a time."""

    def __init__(self, n_slots, directory):
        super().__init__()
        self.spill = self.report_spill = self.span_spill = self.delay_spill = self.call_log = None
        try:
            self.spill = ColumnSpill(_ROW_DTYPES, "slot", n_slots, directory)
            self.report_spill = ColumnSpill(_REPORT_DTYPES, "slot", n_slots, directory)
            self.span_spill = ColumnSpill(_SPAN_DTYPES, "slot", n_slots, directory)
            self.delay_spill = ColumnSpill(_DELAY_DTYPES, "slot", n_slots, directory)
            self.call_log = ColumnLog(FUTEX_COLUMNS, directory)
        except BaseException:
            self.close()
            raise
        self.first = None  # the first report of all: a batch without reports of its own gets it (see reports_of)

    def close(self) -> None:
        for spill in (self.spill, self.report_spill, self.span_spill, self.delay_spill, self.call_log):
            if spill is not None:
                spill.close()

    def add_rows(self, rows) -> None:
        self.spill.add(dict(zip(_ROW_NAMES, rows, strict=True)))

    def add_spans(self, spans) -> None:
        self.span_spill.add(dict(zip(_SPAN_DTYPES, spans, strict=True)))

    def spans_of(self, lo, hi):
        cols = self.span_spill.read(lo, hi)
        return tuple(cols[k] for k in _SPAN_DTYPES)

    def span_chunks(self, lo, hi):
        """The batch's switch spans SCAN_ROWS at a time (a thread's in the order written), or None
        when the batch holds fewer or a thread's starts are not in order (`spans_of` then: they are
        sorted whole). Checked first on the starts alone, also a chunk at a time."""
        counts = self.span_spill.counts()[lo:hi]
        if counts.sum() <= SCAN_ROWS:
            return None
        for k in np.flatnonzero(counts).tolist():
            last = _NEVER
            for a in range(0, int(counts[k]), SCAN_ROWS):
                st = self.span_spill.read_rows(lo + k, a, a + SCAN_ROWS, ("start",))["start"]
                if st[0] < last or np.any(st[1:] < st[:-1]):
                    return None
                last = int(st[-1])

        def chunks():
            for k in np.flatnonzero(counts).tolist():
                for a in range(0, int(counts[k]), SCAN_ROWS):
                    cols = self.span_spill.read_rows(lo + k, a, a + SCAN_ROWS)
                    yield tuple(cols[c] for c in _SPAN_DTYPES)
        return chunks()

    def add_calls(self, w: RawEvents, tids: np.ndarray) -> None:
        """Keep the window's futex events of traced threads: every batch's pass 4 reads them again,
        where reading the recording again decodes all of it. The others change nothing it finds:
        only a traced thread's wake call names a waker, only a waiting thread's calls answer its
        wait, and an answer given at a later event is the same (nothing it reads changed)."""
        k = futex_rows(w.kind)
        k = k[member(w.tid[k], tids)]
        if len(k):
            self.call_log.add({name: getattr(w, name)[k] for name in FUTEX_COLUMNS})

    def calls(self):
        return lambda: self.call_log.chunks(CALL_ROWS)

    def n_calls(self) -> int | None:
        return len(self.call_log)

    def add_reports(self, time, tid, ns, slot, seq) -> None:
        if self.first is None:
            self.first = (time[:1], tid[:1], ns[:1])
        self.report_spill.add({"slot": slot, "seq": seq, "time": time, "tid": tid, "ns": ns})

    def add_delays(self, time, tid, delay, count, slot) -> None:
        self.delay_spill.add({"slot": slot, "time": time, "tid": tid, "delay": delay, "count": count})

    def delays_of(self, lo, hi, piece=None, since=None) -> RawEvents:
        """The batch's threads' run-delay reports, each thread's in recording order (all that
        `builder.reconcile_runnable` needs); of a piece whose rows begin at `since`, those from the
        piece before it (or from the first, if its rows begin earlier) to the one after (`_Piece`)."""
        if piece is None:
            r = self.delay_spill.read(lo, hi)
        else:
            a, b = piece.delays
            if since is not None and piece.delays_since is not None and since < piece.delays_since:
                a = 0
            r = self.delay_spill.read_rows(piece.slot, a, b)
        return _run_delays(r["time"], r["tid"], r["delay"], r["count"])

    def batches(self, n_slots, t0, t1, budget):
        """Ranges of thread slots of about `budget` rows: (lo, hi, None); a thread with more rows
        cut in time into pieces of about as many, (lo, hi, piece) each, where `_cuts` finds
        instants to cut it at (else it is one batch)."""
        counts = self.spill.counts()
        out = []
        for lo, hi in self.spill.batches(budget):
            pieces = self._cuts(lo + int(np.argmax(counts[lo:hi])), t0, t1, budget) \
                if counts[lo:hi].sum() > budget else []
            out.extend([(lo, hi, p) for p in pieces] or [(lo, hi, None)])
        return out

    def _cuts(self, slot, t0, t1, budget) -> list[_Piece]:
        """The thread's rows as pieces of about `budget` rows that the passes after the walk
        can finish one at a time, or [] where it cannot be cut (rows not in start order, no
        instant fit). A piece begins where the thread switched out (a RUNNING row followed at once
        by one that is not) inside (t0, t1), at an instant c no runtime report spans (each report
        [time - ns, time] ends at or before c, or begins after it) and after such a report met the
        RUNNING row: so that reconciling RUNNING with the reports (`_reconcile_rows_of`: its
        segments, their coverage, the state a dropped stretch takes) and naming futex waits (a
        wait's tail of slivers and the RUNNING row after it: `futex_wakers._wake_cuts`) give each
        piece's rows what they give the whole thread's. What still joins across c, the final join
        of adjacent rows and the run-delay re-cut of the gap after the last run, is finished with
        the next piece (`_batch_passes`' `tail`)."""
        reports = _Reports(self.report_spill, slot)
        n = int(self.spill.counts()[slot])
        size = -(-n // -(-n // budget))  # pieces of equal size, as few as hold at most `budget` rows
        cuts: list[int] = []
        times: list[int] = []
        for lo in range(0, n, SCAN_ROWS):
            a = max(lo - 1, 0)  # with the row before the scan's, to see each instant between two rows
            c = self.spill.read_rows(slot, a, min(lo + SCAN_ROWS, n), ("start", "end", "state"))
            s, e, st = c["start"], c["end"], c["state"]
            if np.any(s[1:] < s[:-1]):  # (each scan begins with the row before it)
                return []
            g = np.flatnonzero((st[:-1] == State.RUNNING) & (st[1:] != State.RUNNING) & (s[1:] == e[:-1])
                               & (s[1:] > t0) & (s[1:] < t1)) + 1
            at = s[g]
            if reports.counted:
                fit = reports.clear_and_met(at, s[g - 1])
                g, at = g[fit], at[fit]
            rows = g + a
            nxt = (cuts[-1] if cuts else 0) + size
            while True:
                i = int(np.searchsorted(rows, nxt, "left"))
                if i == len(rows):
                    break
                cuts.append(int(rows[i]))
                times.append(int(at[i]))
                nxt = cuts[-1] + size
        if not cuts:
            return []
        bounds = [0, *cuts, n]
        edge = [None, *times, None]
        delays = _Sorted(self.delay_spill, slot, ("time",))
        pieces = []
        for k in range(len(bounds) - 1):
            before, after = edge[k - 1] if k > 0 else None, edge[k + 2] if k + 2 < len(edge) else None
            pieces.append(_Piece(
                slot=slot, rows=(bounds[k], bounds[k + 1]),
                reports=(reports.first_for(edge[k]), reports.n if edge[k + 1] is None else reports.position(edge[k + 1], "right")),
                delays=(0 if before is None else max(delays.position(before, "left") - 1, 0), _delays_to(delays, after)),
                delays_since=before,
                first=k == 0, last=k == len(bounds) - 2))
        return pieces

    def states(self, lo, hi, t0, t1, tids, piece=None):
        """The batch's rows read back, clipped in place (no second copy of the batch)."""
        cols = self.spill.read(lo, hi) if piece is None else self.spill.read_rows(piece.slot, *piece.rows)
        part = tuple(cols[k] for k in _ROW_NAMES)
        del cols
        m, in_order = _clipped_in_place(part, t0, t1, tids)
        return [c[:m] for c in part], in_order

    def reports_of(self, lo, hi, piece=None):
        """The batch's reports in recording order; a batch without any gets the recording's first
        (another thread's, or one outside the piece: it changes no row) so that its rows take the
        same path as in one batch."""
        r = self.report_spill.read(lo, hi) if piece is None else self.report_spill.read_rows(piece.slot, *piece.reports)
        seq = r.pop("seq")
        del r["slot"]
        if len(seq):
            if np.all(seq[1:] > seq[:-1]):  # one thread's, or threads' that took turns
                return [r["time"], r["tid"], r["ns"]]
            order = np.argsort(seq, kind="stable")
            del seq
            return [r.pop("time")[order], r.pop("tid")[order], r.pop("ns")[order]]
        probe = self.first if self.first is not None else self.other
        return list(probe) if probe is not None else [np.zeros(0, np.int64)] * 3


def build_trace_windows(
    windows: Windows,
    *,
    root_pids: list[int] | None = None,
    comm: str | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    meta: dict | None = None,
    role_rules=None,
    root_known: bool = False,
    known_names: dict[int, str] | None = None,
    stats: dict | None = None,
    n_events: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    output: str | os.PathLike | None = None,
    finish_with: Callable[[Trace], Trace] | None = None,
    batch_rows: int | None = None,
):
    """`builder.build_trace` of the events `windows()` gives, a fresh iterator of time-sorted
    windows in time order each time it is called (the recording is read twice, then again by the
    passes after the walk: see the module's docstring). `stats`: the
    reader's (lost events ...; default: the first window's); `n_events`: how many events the
    windows hold, if known, for `progress(done, total, stage)`, which follows the passes (after the
    first, the walk's in scheduler events: without eBPF's run-delay reports).

    With `output`, the trace is written there (atomically; spills next to it) in batches of
    threads of about `batch_rows` walk rows (default `BATCH_ROWS`, or `BATCH_ROWS_RUN_DELAY` for a
    recording with run-delay reports; a thread with more is cut in time), and the Trace returned holds its threads, names,
    samples and meta but no states or switch spans (those are in the file); `finish_with(trace,
    times)` may change that small Trace (roles, meta) before it is written, `times` being what
    `trace.time_in_states()` of the whole Trace would be."""
    meta = dict(meta or {})
    tell = progress or (lambda done, total, stage: None)
    # 1: the facts
    facts, seen, read = EventFacts(comm), 0, 0
    for w, rd in _scheduled(windows):
        if stats is None:
            stats = dict(w.stats)
        wild = np.flatnonzero(w.cpu >= MAX_CPUS)
        if len(wild):
            i = int(wild[0])
            raise UserError(f"event {seen + i} (at {int(w.time[i])} ns) names CPU {int(w.cpu[i])}, "
                            f"beyond the {MAX_CPUS} any Linux machine has: the recording is corrupt")
        facts.add(w)
        seen += len(w)
        read += len(w) + (0 if rd is None else len(rd))  # `n_events` counts the run-delay reports too
        tell(read, n_events or read, "1/5 threads")
    if facts.n_events == 0:
        raise UserError("the recording holds no events; was the program too short, or were the tracepoints missing?")
    n = facts.n_events
    tids, parents, slot_of, born_at = traced_slots(facts, root_pids, comm)
    with contextlib.ExitStack() as stack:
        if output is None:
            held = _HeldRows()
        else:
            writer = stack.enter_context(TraceWriter(output))
            held = _SpilledRows(len(tids), os.path.dirname(writer.path) or ".")
            stack.callback(held.close)
        t0, t1, carry, kept = _walk(windows, facts, tids, slot_of, born_at, start_ns, end_ns, held, tell)
        walked = Walked(facts, tids, parents, slot_of, born_at, t0, t1, carry)
        sink = _Sink(tids, writer.states.add if output is not None else None)
        ex = walked.exits(kept.pids)  # (the final rows' waits that exits ended: `exit_wakers`)
        sink.finish_rows = lambda rows: walked.with_exit_wakers(rows, kept.pids, ex)
        spans_sink = writer.switch_spans.add if output is not None else None
        batches = held.batches(len(tids), t0, t1,
                               batch_rows or (BATCH_ROWS_RUN_DELAY if kept.n_run_delay else BATCH_ROWS))
        tail = None  # a cut thread's last rows, finished with its next piece
        n_calls = held.n_calls()  # (pass 4's progress: in the futex events it reads again, when kept)
        for b, (lo, hi, piece) in enumerate(batches):
            stage = "" if len(batches) == 1 else f", threads {b + 1}/{len(batches)}"
            trim_heap()  # the walk's or the last batch's freed memory
            if piece is not None and piece.first:  # a cut thread's names and spans, before its rows are read
                _names_and_spans(sink, spans_sink, kept, held, tids[piece.slot:piece.slot + 1].astype(np.int64), tids,
                                 t0, t1, lo, hi)
                trim_heap()
            batch = [_batch_states(held, lo, hi, t0, t1, tids, piece)]  # a list the passes empty, so that each
            if len(batch[0]) == 0 and piece is None and (b < len(batches) - 1 or sink.present_parts):  # table goes
                continue  # once the next is made (no thread with states at all: the one empty batch goes on, as in
            tail = _batch_passes(  # `build_trace`)
                batch, held.reports_of(lo, hi, piece), windows, facts, tids, t0, t1, kept, held, lo, hi, sink,
                spans_sink, lambda done, name, stage=stage: tell(done, n_calls if n_calls is not None and name.startswith("4/5")
                                                                  else n + kept.n_run_delay, name + stage), piece, tail)
        present = np.concatenate(sink.present_parts)
        sampled = concat_events(kept.samples)
        samples = _samples(sampled, present, t0, t1, EventIndex(sampled))
        names = NameTable.concat(sink.names) if len(sink.names) > 1 else sink.names[0]
        given = dict(pids=kept.pids, reconciled=sink.reconciled, stolen=sink.stolen, unreported=sink.unreported,
                     futex_wakers=sink.futex_wakers, exit_wakers=sink.exit_wakers,
                     runnable_from_wakes=sink.runnable_from_wakes, runnable_reconciled=sink.runnable_reconciled,
                     stats=stats or {}, n_events=n, root_pids=root_pids, root_known=root_known, known_names=known_names,
                     meta=meta)
        if output is None:
            states = sink.held[0]
            spans = sink.spans[0] if sink.spans else None
            return finish_trace(states, walked, names_of=lambda _: names, spans_of=lambda _: spans,
                                samples_of=lambda _: samples, role_rules=role_rules, **given)
        th_start, th_end = np.concatenate(sink.th_start), np.concatenate(sink.th_end)
        if np.any(present[1:] == present[:-1]):  # a cut thread's pieces: its first start, its last end
            new = np.r_[True, present[1:] != present[:-1]]
            present, th_start, th_end = present[new], th_start[new], th_end[np.r_[new[1:], True]]
        threads, meta = finish_threads(present, th_start, th_end, sink.times[:, State.RUNNING], walked, names=names,
                                       **given)
        meta["switch_spans_rebuilt"] = sink.rebuilt
        small = Trace(threads=threads, states=StateTable.empty(), names=names, meta=meta, samples=samples,
                      switch_spans=SwitchSpanTable.empty()).with_roles(role_rules)
        if finish_with is not None:
            small = finish_with(small, sink.times[np.searchsorted(tids, small.threads.tid)])
        writer.finish(small.threads, small.names, small.meta, samples=small.samples, frames=small.frames,
                      stacks=small.stacks, futex_calls=small.futex_calls)
        return small


class _Kept:
    """What the walk's pass keeps besides the rows: code samples, how many run-delay reports the
    recording has, and of every traced thread its pid, its names and the counts of its switch spans
    (the spans and the traced threads' run-delay reports go to the rows' store)."""

    def __init__(self):
        self.samples, self.n_run_delay = [], 0
        self.pids = self.names = self.span_counts = None


def _walk(windows, facts, tids, slot_of, born_at, start_ns, end_ns, held, tell):
    """Pass 2: the walk, its rows and the runtime reports into `held`; the switch spans, names and
    pids of every traced thread (a thread's do not depend on which others are followed: the passes
    after keep those of the threads with states); the window [t0, t1), the walk's final state and
    what it kept."""
    n_slots = len(tids)
    n_cpus = max(facts.cpu_max + 1, 1)
    t_first, t_last = facts.t_first, facts.t_last
    win_start = t_first - 1 if start_ns is None else int(start_ns)
    t0 = t_first if start_ns is None else int(start_ns)
    carry = _walk_start(n_slots, n_cpus, born_at, t_first)
    kept = _Kept()
    names, strings, naming = _names_start(slot_of), CommTable(), naming_kinds()
    pids = _pids_start(n_slots)
    spans = _spans_start(n_slots, n_cpus) if facts.count(Kind.SWITCH) else None
    done = 0
    for w, rd in _scheduled(windows):
        rows = _walk_chunk(w.time, w.cpu, w.tid, w.kind, w.arg0, w.arg1, w.arg2, slot_of, n_slots, n_cpus,
                           _WAIT_OPS_MASK, win_start, carry)
        held.add_rows(rows)
        del rows
        held.add_calls(w, tids)
        if spans is not None:
            out = _spans_out(len(w), n_slots)
            m = _spans_chunk(w.time, w.cpu, w.kind, w.tid, w.arg0, w.arg1, slot_of, n_slots, n_cpus, spans, out, 0)
            held.add_spans(tuple(c[:m].copy() for c in out))
            del out
        comm0, comm1 = strings.relabel(w)  # the names' comm ids, of one table for all windows
        names = _names_chunk(w.time, w.kind, w.arg0, w.arg1, comm0, comm1, naming, slot_of, names)
        side = np.flatnonzero((w.kind == Kind.TASK_COMM) | (w.kind == Kind.TASK_FORK))
        side = side.astype(row_dtype(len(w.time)))  # EventIndex.rows' width: one compile
        _pids_chunk(w.tid, w.pid, w.arg0, w.arg1, side, slot_of, pids)
        r = np.flatnonzero((w.kind == Kind.STAT_RUNTIME) & (w.arg1 > 0))
        if len(r):
            mine = member(w.arg0[r], tids)
            if mine.any():
                k = r[mine]
                held.add_reports(w.time[k], w.arg0[k], w.arg1[k], slot_of[w.arg0[k]].astype(np.int32), done + k)
            elif held.other is None:
                held.other = (w.time[r[:1]], w.arg0[r[:1]], w.arg1[r[:1]])
        if rd is not None:
            kept.n_run_delay += len(rd)
            k = np.flatnonzero(member(rd.arg0, tids))
            if len(k):
                task = rd.arg0[k]
                held.add_delays(rd.time[k], task, rd.arg1[k], rd.arg2[k], slot_of[task].astype(np.int32))
        s = np.flatnonzero((w.kind == Kind.SAMPLE) & (w.time >= t0))
        if len(s):
            kept.samples.append(w.take(s[member(w.tid[s], tids)]))
        done += len(w)
        tell(done, facts.n_events, "2/5 states, spans and names")
    held.add_rows(_walk_end(t_last if end_ns is None else max(t_last, int(end_ns)), n_slots, carry))
    dead, end_time = carry[11], carry[12]
    t1 = t_last if end_ns is None else int(end_ns)
    if end_ns is None and np.all(dead):
        t1 = int(end_time.max())
    if t1 <= t0:
        raise UserError("the chosen time window is empty")
    if spans is not None:
        out = _spans_out(0, n_slots)
        m = _spans_end(t1, n_slots, spans, out, 0)
        held.add_spans(tuple(c[:m] for c in out))
        kept.span_counts = spans[-1]
    kept.pids = pids[0]
    n_slot, n_t, n_c = _names_end(names)
    comms = strings.strings()
    kept.names = NameTable(tid=tids[n_slot], time_ns=n_t, name=[comms[i] for i in n_c])
    return t0, t1, carry, kept


def _delays_to(delays: _Sorted, at) -> int:
    """Where a piece's run-delay reports end: before the first at or after `at` (None: the
    thread's end), and that one with them (the report after the last run's, however far)."""
    return delays.n if at is None else min(delays.position(at, "left") + 1, delays.n)


REPORT_ROWS = SCAN_ROWS  # a cut thread's runtime or run-delay reports read at a time (`_Sorted`)
_NEVER, _ALWAYS = np.iinfo(np.int64).min, np.iinfo(np.int64).max


class _Sorted:
    """One thread's rows of a spill whose first column (`names[0]`) is a time in order, read
    REPORT_ROWS at a time, never whole: `position` finds where a time falls among all of them
    holding one chunk (its last times, one a chunk, say which)."""

    def __init__(self, spill: ColumnSpill, slot: int, names: tuple[str, ...]):
        self.spill, self.slot, self.names = spill, slot, names
        self.n = int(spill.counts()[slot])
        self.step = max(int(REPORT_ROWS), 1)
        self.starts = np.arange(0, self.n, self.step, dtype=np.int64)
        self._at, self._cols = -1, None
        self.last = np.array([self._summary(c) for c in range(len(self.starts))], np.int64)

    def _summary(self, c: int) -> int:
        return int(self.chunk(c)[self.names[0]][-1])

    def chunk(self, c: int) -> dict[str, np.ndarray]:
        """Chunk c's rows (the last one read is kept)."""
        if c != self._at:
            self._cols = None  # the one held is let go before the next is read
            a = int(self.starts[c])
            self._cols = self.spill.read_rows(self.slot, a, min(a + self.step, self.n), self.names)
            self._at = c
        return self._cols

    def position(self, t: int, side: str) -> int:
        """np.searchsorted(all the times, t, side)."""
        c = int(np.searchsorted(self.last, t, side))
        if c == len(self.starts):
            return self.n
        return int(self.starts[c]) + int(np.searchsorted(self.chunk(c)[self.names[0]], t, side))


class _Reports(_Sorted):
    """A cut thread's runtime reports [time - ns, time] (`_Sorted` over (time, ns)), for `_cuts`,
    with per chunk what its reports that charge ns ("counted") say: the last end up to it, the
    earliest start from it on, and the last counted report's row up to it; so that for an instant
    the counted reports ending at or before it and the earliest start of all those after it are
    found reading one chunk."""

    def __init__(self, spill: ColumnSpill, slot: int):
        self._p_last, self._p_from, self._p_row, self._p_count = [], [], [], []
        super().__init__(spill, slot, ("time", "ns"))
        self.counted = int(sum(self._p_count))
        self._derived = (-1, None)  # (chunk, its counted reports: `_local`)
        self.p_last = np.maximum.accumulate(np.array(self._p_last, np.int64)) if self._p_last else np.zeros(0, np.int64)
        self.p_row = np.maximum.accumulate(np.array(self._p_row, np.int64)) if self._p_row else np.zeros(0, np.int64)
        self.from_on = np.r_[np.minimum.accumulate(np.array(self._p_from, np.int64)[::-1])[::-1], _ALWAYS]

    def _summary(self, c: int) -> int:
        ch = self.chunk(c)
        t, ns = ch["time"], ch["ns"]
        k = np.flatnonzero(ns > 0)
        self._p_count.append(len(k))
        self._p_last.append(int(t[k[-1]]) if len(k) else _NEVER)
        self._p_row.append(int(self.starts[c]) + int(k[-1]) if len(k) else -1)
        self._p_from.append(int((t[k] - ns[k]).min()) if len(k) else _ALWAYS)
        return int(t[-1])

    def _local(self, c: int):
        """Chunk c's counted reports: ends, starts' minimum from each on, rows in the chunk (kept
        with the chunk: consecutive scans and cuts ask about the same one)."""
        if self._derived[0] != c:
            ch = self.chunk(c)
            k = np.flatnonzero(ch["ns"] > 0)
            p_time = ch["time"][k]
            later_from = np.minimum.accumulate((p_time - ch["ns"][k])[::-1])[::-1]
            self._derived = (c, (p_time, later_from, k))
        return self._derived[1]

    def clear_and_met(self, at: np.ndarray, prev_start: np.ndarray) -> np.ndarray:
        """Per instant (in order): no counted report spans it (each ends at or before it or
        begins after it), and the last ending at or before it ends after `prev_start`."""
        c = np.searchsorted(self.p_last, at, "right")  # the chunk of the first counted report ending after
        clear = np.ones(len(at), bool)
        prev = np.where(c > 0, self.p_last[np.maximum(c - 1, 0)], _NEVER)  # the last end before that chunk
        for ci in np.unique(c[c < len(self.starts)]).tolist():
            sel = np.flatnonzero(c == ci)
            p_time, later_from, _ = self._local(ci)
            j = np.searchsorted(p_time, at[sel], "right")  # < len(p_time): one ends after
            clear[sel] = np.minimum(later_from[j], self.from_on[ci + 1]) > at[sel]
            prev[sel] = np.where(j > 0, p_time[np.maximum(j - 1, 0)], prev[sel])
        return clear & (prev != _NEVER) & (prev > prev_start)

    def first_for(self, at) -> int:
        """The first of the thread's runtime reports a piece beginning at `at` takes: those ending
        after `at`, and the last before them that charges any ns (the first piece: all). That one
        is clipped to nothing by the piece's start, but says, as in the whole thread, that the
        thread has reports: RUNNING none covers is dropped even in a piece with no report of its own."""
        if at is None:
            return 0
        c = int(np.searchsorted(self.p_last, at, "right"))
        if c < len(self.starts):
            p_time, _, rows = self._local(c)
            j = int(np.searchsorted(p_time, at, "right"))
            if j:
                return int(self.starts[c]) + int(rows[j - 1])
        if c > 0 and self.p_row[c - 1] >= 0:  # the last counted one is in an earlier chunk
            return int(self.p_row[c - 1])
        return self.position(at, "right")  # none counted before it


def _batch_states(held, lo, hi, t0, t1, tids, piece=None) -> StateTable:
    """The walk's rows of thread slots [lo, hi) (or of a piece of one) inside [t0, t1), clipped, in
    (tid, start) order."""
    cols, in_order = held.states(lo, hi, t0, t1, tids, piece)
    if not in_order:
        order = np.lexsort((cols[1], cols[0]))
        cols = [c[order] for c in cols]
    return state_table(cols)


@numba.njit(cache=True)
def _clipped_in_place(part, t0, t1, tids):
    """`_walk_states_of` of one part whose rows come slot by slot (slots ascending), in place: the
    rows inside [t0, t1) clipped, moved to the front, their slot replaced by the tid; how many, and
    whether each thread's rows are in start order."""
    slot, start, end, state, cpu, addr, waker, rep = part
    m = 0
    in_order = True
    for i in range(slot.shape[0]):
        if end[i] > t0 and start[i] < t1:
            tid = tids[slot[i]]
            a = max(start[i], t0)
            if m > 0 and slot[m - 1] == tid and a < start[m - 1]:
                in_order = False
            m = emit_row(part, m, tid, a, min(end[i], t1), state[i], cpu[i], addr[i], waker[i], rep[i])
    return m, in_order


class _Sink:
    """Each batch's results: its states (held, or given to `put`), and the sums and tables the
    trace's threads and meta are made of."""

    def __init__(self, tids, put):
        self.tids, self.put = tids, put
        self.held, self.present_parts, self.th_start, self.th_end = [], [], [], []
        self.times = np.zeros((len(tids), len(State)), np.int64)  # written: each thread's ns per state
        self.names, self.spans, self.rebuilt = [], [], {}
        self.reconciled, self.stolen, self.unreported, self.runnable_reconciled = {}, {}, {}, {}
        self.futex_wakers = self.runnable_from_wakes = self.exit_wakers = 0
        self.finish_rows = None  # final rows -> (rows, waits given a waker): `Walked.with_exit_wakers`

    def add(self, states: StateTable) -> None:
        if len(states) == 0:  # a piece whose rows all went to the next one
            return
        if self.finish_rows is not None:
            states, n = self.finish_rows(states)
            self.exit_wakers += n
        present, first_idx = unique_first(states.tid)
        last_idx = np.r_[first_idx[1:] - 1, len(states) - 1]
        self.present_parts.append(present.astype(np.int64))
        self.th_start.append(states.start_ns[first_idx])
        self.th_end.append(states.end_ns[last_idx])
        if self.put is None:
            self.held.append(states)
        else:
            sums = state_sums(states.tid, states.start_ns, states.end_ns, states.state, self.tids,
                              np.arange(len(self.tids)), len(State))
            self.times += sums.reshape(len(self.tids), len(State)).astype(np.int64)
            self.put(states)


def _batch_passes(batch, reports, windows, facts, tids, t0, t1, kept, held, lo, hi, sink, spans_sink, tell,
                  piece=None, tail=None):
    """Passes 3 to 5 for the threads of one batch (`batch`: [their states, sorted], taken out; thread
    slots [lo, hi)), or for a piece of one thread: their RUNNING reconciled with their runtime
    reports and the stretches asked about (a reading, if any is); their switch spans and names
    (found by the walk; a cut thread's before its first piece); the futex calls (a reading); the CPUs
    the woken ran on (a reading, if any is asked). The final states go to `sink`, but of a piece
    before the thread's last, its rows from its last RUNNING row that follows the row before it
    (returned: the `tail` the next piece finishes, since the run-delay re-cut of the gap after that
    run and the joins of adjacent rows need the rows after it)."""
    states = batch.pop()
    present = unique_first(states.tid)[0].astype(np.int64)
    n_rep = len(reports[0])  # rows in EventIndex.rows' width: one compiled cut for both builders
    cut = _reconcile_rows_of(states, np.arange(n_rep, dtype=row_dtype(n_rep)), *reports, release=RELEASE_EVERY,
                             open_end=t1)
    del reports

    # 3: the stretches the runtime reports took from RUNNING: did the CPU run anything else
    if cut is None:
        states, room = _merge_adjacent(states), None
    else:
        del states
        questions = steal_questions(cut)
        answers = np.zeros(0, bool)
        if len(questions[0]):
            witness = witness_start(*questions, _WAIT_OPS_MASK)
            done = 0
            for w in windows():  # (its run-delay reports among them: the sweeps skip them)
                witness_chunk(w.time, w.cpu, w.kind, w.arg0, w.arg1, w.tid, witness)
                done += len(w)
                del w  # not held while the next window is read
                tell(done, "3/5 CPUs of the stretches asked about")
            answers = witness_end(witness)
        del questions
        states, reconciled, stolen, unreported, room = _reconcile_steals_by(cut, lambda *q: answers)
        del cut
        _add_into(sink.reconciled, reconciled)
        _add_into(sink.stolen, stolen)
        _add_into(sink.unreported, unreported)
    if piece is None:  # (a cut thread's: before its first piece)
        _names_and_spans(sink, spans_sink, kept, held, present, tids, t0, t1, lo, hi)

    # 4, 5: the futex calls, then the CPUs woken threads ran on
    states, futex_wakers, runnable_from_wakes = attribute_futex_wakers_windows(
        states, windows, tids, kept.pids, join=kept.n_run_delay == 0, room=room,
        progress=tell, calls=held.calls())
    del room
    sink.futex_wakers += futex_wakers
    sink.runnable_from_wakes += runnable_from_wakes
    since = int(tail.start_ns[0]) if tail is not None and len(tail) else None
    delays = held.delays_of(lo, hi, piece, since)
    parts = [states]
    if tail is not None:  # the tail finished with the piece's rows up to the first run that is apart from it
        h = first_run_apart(states)
        parts = [StateTable.concat([tail, _rows_view(states, 0, h + 1)]), _rows_view(states, h, len(states))]
        if h == len(states) - 1:
            parts.pop()
    del states
    done = []
    for j, part in enumerate(parts):
        parts[j] = None  # the list keeps no part alive once it is re-cut (its rows are given back as they are read)
        part, runnable_reconciled = reconcile_runnable(part, delays, release=True)
        _add_into(sink.runnable_reconciled, runnable_reconciled)
        if j == 0 and len(parts) == 2:  # the run the second part begins with: not joined, not in a gap
            part = _rows_view(part, 0, len(part) - 1)
        done.append(_merge_adjacent(part, release=True))
    del parts, delays
    if not np.array_equal(unique_first(np.concatenate([d.tid for d in done]))[0], present):
        raise AssertionError("the threads with states changed after the walk")  # no pass adds or drops a thread
    tail = None
    if piece is not None and not piece.last:
        last = done.pop()
        starts = run_starts(last)  # (no run-delay gap spans one: `builder._pieces`' rule)
        k = int(starts[-1]) if len(starts) else 0
        done.append(_rows_view(last, 0, k))
        tail = last.take(np.arange(k, len(last)))  # a copy: a view would keep the piece's rows
    for d in done:
        sink.add(d)
    return tail


def _add_into(total: dict, part: dict) -> None:
    """Per-thread figures of a piece added to the thread's (ns, or lists of ns)."""
    for key, value in part.items():
        if key not in total:
            total[key] = value
        elif isinstance(value, list):
            total[key] = [a + b for a, b in zip(total[key], value, strict=True)]
        else:
            total[key] += value


def _names_and_spans(sink, spans_sink, kept, held, present, tids, t0, t1, lo, hi) -> None:
    """The batch's threads' names and switch spans (found by the walk) to `sink`."""
    sink.names.append(kept.names.take(np.flatnonzero(member(kept.names.tid.astype(np.int64), present))))
    if kept.span_counts is None:
        return
    counts = kept.span_counts[np.searchsorted(tids, present)]
    chunks = held.span_chunks(lo, hi) if spans_sink is not None else None  # a big batch's a chunk at a time
    for part in chunks if chunks is not None else [held.spans_of(lo, hi)]:
        tid, a, b, rep, in_order = _clipped_by_thread(part, t0, t1, tids, RELEASE_EVERY)
        del part
        if len(present) < hi - lo:  # threads with spans but no states inside the window
            keep = np.flatnonzero(member(tid.astype(np.int64), present))
            tid, a, b, rep = tid[keep], a[keep], b[keep], rep[keep]
        if not in_order:  # (whole: chunks are in order)
            order = np.lexsort((a, tid))
            tid, a, b, rep = tid[order], a[order], b[order], rep[order]
        found = SwitchSpans(tid=tid, start_ns=a, end_ns=b, repaired=rep, tids=present, complete=counts[:, 0],
                            lost_in=counts[:, 1], lost_out=counts[:, 2], lost_whole=counts[:, 3])
        if spans_sink is None:
            sink.spans.append(found)
        else:
            spans_sink(found.table())
            sink.rebuilt.update({str(t): k for t, k in found.gaps().items()})  # (the threads' counts: each chunk's)
        del found, tid, a, b, rep
