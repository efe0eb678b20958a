"""The eBPF trace collector: `scalestack record --collector ebpf`.

The same events as the perf and tracefs collectors (scalestack.trace.events.RECORD_TRACEPOINTS),
system-wide, taken by BTF tracepoint programs (`bpf/trace.bpf.c`) into a BPF ring buffer and
written to a file by a small loader (`bpf/trace_loader.c`). Why: on these VMs perf and ftrace
lose switches out of idle with no LOST record, which a BPF program on the same tracepoint
receives (docs/top.md, "Missed switch-ins"); the state builder repairs such gaps, within bounds,
but a collector that does not lose them needs no repair. The loader writes the records to a file
as they arrive (memory does not grow with the recording's length); they are fixed 80-byte structs,
read back a window at a time by compiled code: no per-event Python.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile

import numba
import numpy as np

from scalestack.collect import bpf_build
from scalestack.collect.run import Run, root_pid, run_or_watch, sigint_for_the_program
from scalestack.errors import UserError
from scalestack.ingest.tracepoint import Strings, intern_at, le_u32, strings_full
from scalestack.ingest.windows import (
    MAP_BYTES,
    mapped,
    rank_by_time,
    readonly,
    shared_strings,
    streamed,
    thread_count,
)
from scalestack.trace.events import Kind, RawEvents
from scalestack.trace.parallel import on_threads

# trace.bpf.c's struct rec
RECORD = np.dtype([("time", "<u8"), ("a0", "<i8"), ("a1", "<i8"), ("a2", "<i8"), ("cpu", "<i4"), ("tid", "<i4"),
                   ("pid", "<i4"), ("kind", "<u4"), ("c0", "S16"), ("c1", "S16")])
assert RECORD.itemsize == 80
_NO_COMM = np.array([Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV, Kind.RUN_DELAY], np.uint32)
_TWO_COMMS = np.array([Kind.SWITCH, Kind.FORK, Kind.RENAME], np.uint32)
DEFAULT_BUFFER = 64 << 20
NAME, HINT = "the eBPF trace collector", "; use --collector perf"  # in its error messages


def unavailable() -> str | None:
    """None when the eBPF collector can run here, else one line saying why not."""
    return bpf_build.unavailable(NAME, HINT)


WINDOW_RECORDS = 1 << 18  # records read at a time per thread (20 MiB)


@numba.njit(cache=True, nogil=True)
def _decode(buf, first, m, j, rank, no_comm, two_comms, o_t, o_cpu, o_pid, o_tid, o_kind, o_a0, o_a1, o_a2, o_c0,
            o_c1, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used, tag, n_tags):
    """Records first .. m-1 of buf (RECORD layout) into rows rank[j], rank[j + 1], ... (row j
    itself when rank is empty; a record whose rank is negative is skipped). Returns the records
    done: fewer than m when the string table may be full (grow it and call again from there)."""
    for r in range(first, m):
        if strings_full(h_id, arena, used):
            return r
        b = r * 80
        row = rank[j] if rank.shape[0] else j
        if row < 0:
            j += 1
            continue
        o_t[row] = np.int64(_u64(buf, b))
        o_a0[row] = np.int64(_u64(buf, b + 8))
        o_a1[row] = np.int64(_u64(buf, b + 16))
        o_a2[row] = np.int64(_u64(buf, b + 24))
        o_cpu[row] = np.int32(np.uint32(le_u32(buf, b + 32)))
        o_tid[row] = np.int32(np.uint32(le_u32(buf, b + 36)))
        o_pid[row] = np.int32(np.uint32(le_u32(buf, b + 40)))
        kind = le_u32(buf, b + 44)
        o_kind[row] = np.uint8(kind & np.uint64(0xFF))
        c0 = -1
        c1 = -1
        if not (kind < 256 and no_comm[kind]):
            c0 = intern_at(buf, b + 48, 16, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used) * n_tags + tag
        if kind < 256 and two_comms[kind]:
            c1 = intern_at(buf, b + 64, 16, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used) * n_tags + tag
        o_c0[row] = c0
        o_c1[row] = c1
        j += 1
    return m


def _decode_all(buf, first: int, end: int, base: int, rank, cols, table: Strings, tag: int, n_tags: int) -> None:
    """Records first .. end - 1 of buf, record i into row rank[base + i] (`_decode`), the string
    table grown whenever it may be full."""
    r = first
    buf = readonly(buf)
    while r < end:
        r = _decode(buf, r, end, base + r, rank, _NO_COMM_OF, _TWO_COMMS_OF, *cols, *table.arrays(), tag, n_tags)
        if r < end:
            table.grow()


@numba.njit(cache=True, inline="always")
def _u64(buf, i):
    return le_u32(buf, i) | le_u32(buf, i + 4) << np.uint64(32)


_NO_COMM_OF, _TWO_COMMS_OF = np.zeros(256, np.bool_), np.zeros(256, np.bool_)  # by kind
_NO_COMM_OF[_NO_COMM] = True
_TWO_COMMS_OF[_TWO_COMMS] = True
_COLUMNS = (("time", np.int64), ("cpu", np.int32), ("pid", np.int32), ("tid", np.int32), ("kind", np.uint8),
            ("arg0", np.int64), ("arg1", np.int64), ("arg2", np.int64), ("comm0", np.int32), ("comm1", np.int32))


def record_count(path: str) -> int:
    """How many records the loader's file holds; a user's error when it ends mid-record."""
    size = os.path.getsize(path)
    if size % RECORD.itemsize:
        raise UserError(f"{path}: {size} bytes is not a whole number of {RECORD.itemsize}-byte eBPF records; "
                        "the recording was cut short")
    return size // RECORD.itemsize


def read_records(path: str, threads: int | None = None, window: int = WINDOW_RECORDS) -> RawEvents:
    """The loader's file as RawEvents, sorted by time (each CPU submits in order; the ring buffer
    interleaves CPUs): read a window at a time, in rows by time, on every core (ingest.windows)."""
    n = record_count(path)
    window = max(1, min(int(window), n))
    spans = [(j, min(window, n - j)) for j in range(0, n, window)]
    fd = os.open(path, os.O_RDONLY)
    try:
        def read(j: int, m: int, scratch: np.ndarray) -> np.ndarray:
            want = m * RECORD.itemsize
            got = os.preadv(fd, [memoryview(scratch)[:want]], j * RECORD.itemsize)
            if got != want:
                raise UserError(f"{path} changed while it was read; record again")
            return scratch[:want]

        t = np.empty(n, np.int64)
        scratch = np.empty(window * RECORD.itemsize, np.uint8)
        for j, m in spans:
            t[j:j + m] = read(j, m, scratch).view(RECORD)["time"]
        del scratch
        rank = rank_by_time(t)  # t's memory now holds each record's row
        cols = [np.empty(n, dt) for _, dt in _COLUMNS]
        n_threads = thread_count(len(spans), threads)
        tables = [Strings() for _ in range(n_threads)]

        def decode(k: int) -> None:
            own = np.empty(window * RECORD.itemsize, np.uint8)
            for j, m in spans[k::n_threads]:
                _decode_all(read(j, m, own), 0, m, j, rank, cols, tables[k], k, n_threads)

        on_threads(n_threads, decode)
    finally:
        os.close(fd)
    comms = shared_strings(tables, cols[8], cols[9])
    return RawEvents(**dict(zip((name for name, _ in _COLUMNS), cols, strict=True)), comms=comms)


class OutOfOrder(UserError):
    """A record earlier than a window already given: `RecordWindows` cannot go on."""


class RecordWindows:
    """The loader's file as RawEvents windows in time order of about `max_rows` records each, for a
    recording whose events memory cannot hold at once; each iteration reads the file again, and
    the windows concatenated (`trace.events.concat_events`) equal `read_records(path)`.

    The ring buffer interleaves the CPUs' records a little out of time order (each CPU's own are
    in order). A window's records are ordered (stably) together with those held back from the one
    before, and the ones not earlier than the next window's earliest are held back in turn (as
    records), so ties keep file order as in `read_records`; the others are decoded straight into
    their rows. A record earlier than a window already given (out of order by more than a window)
    raises `OutOfOrder`: the caller reads the file whole. Memory: one window of records, mapped
    from the page cache (80 bytes each), while it is decoded, then its events and the window
    given before (which the caller's loop holds while the next is made); the earliest time of
    each window, needed to cut the one before it, is read in slices the first time and kept."""

    def __init__(self, path: str, max_rows: int = WINDOW_RECORDS, threads: int | None = None):
        self.path, self.max_rows, self.threads = path, max(1, int(max_rows)), threads
        self.events = record_count(path)
        self.stats: dict = {}
        self._earliest: dict[int, int] = {}  # window's first record -> its earliest time

    def _raw(self, j: int, m: int) -> np.ndarray:
        """Records j .. j + m - 1, mapped (never copied: page-cache pages, not fresh memory) where
        they are big enough to be worth a mapping."""
        want, at = m * RECORD.itemsize, j * RECORD.itemsize
        if os.path.getsize(self.path) < at + want:  # (a mapping past the end would fault)
            raise UserError(f"{self.path} changed while it was read; record again")
        if want < MAP_BYTES:
            return np.fromfile(self.path, np.uint8, want, offset=at)
        with open(self.path, "rb") as fh:
            return mapped(fh.fileno(), at, want)

    def _earliest_of(self, j: int) -> int:
        if j not in self._earliest:
            end, step = min(j + self.max_rows, self.events), EARLIEST_SLICE
            self._earliest[j] = min(int(self._raw(a, min(step, end - a)).view(RECORD)["time"].min())
                                    for a in range(j, end, step))
        return self._earliest[j]

    def __iter__(self):
        n, w = self.events, self.max_rows
        held, given = _NO_RECORDS, None  # records held back (raw, in file order); the latest time given
        for j in range(0, n, w):
            raw = self._raw(j, min(w, n - j))
            k = len(held) // RECORD.itemsize
            times = np.concatenate([held.view(RECORD)["time"], raw.view(RECORD)["time"]]).view(np.int64)
            if given is not None and len(times) > k and int(times[k:].min()) < given:
                raise OutOfOrder(f"{self.path}: record {j + int(np.argmin(times[k:]))} is earlier than records "
                                 f"{self.max_rows:,} or more before it")
            order = np.argsort(times, kind="stable")
            cut = len(order) if j + w >= n else int(np.searchsorted(times[order], self._earliest_of(j + w)))
            if cut:
                given = int(times[order[cut - 1]])
            rank = np.full(len(order), -1, np.int64)  # each record's row in the window given; -1: held back
            rank[order[:cut]] = np.arange(cut)
            del order, times
            out = [_decoded((held, raw), rank, cut, self.threads)] if cut else []
            held = np.concatenate([held.reshape(-1, RECORD.itemsize)[rank[:k] < 0],
                                   raw.reshape(-1, RECORD.itemsize)[rank[k:] < 0]]).reshape(-1)
            del raw, rank  # before the window is given: the caller holds it while the next is made
            if out:
                out[0].stats = dict(self.stats)
                yield out.pop()  # (held by the caller alone)


EARLIEST_SLICE = 1 << 16  # records read at a time for a window's earliest time (5 MiB)


def _decoded(bufs: tuple[np.ndarray, ...], rank: np.ndarray, rows: int, threads: int | None = None) -> RawEvents:
    """The records of `bufs` (read as one run of records) whose rank is not negative, each into
    its row rank[i] of `rows`, with their own string table; decoded on `threads` threads (default:
    one per CPU this process may use), each a stretch of at least SHARE records."""
    cols = [np.empty(rows, dt) for _, dt in _COLUMNS]
    sizes = [len(buf) // RECORD.itemsize for buf in bufs]
    total = sum(sizes)
    n_threads = thread_count(max(1, total // SHARE), threads)
    tables = [Strings() for _ in range(n_threads)]
    bounds = [total * k // n_threads for k in range(n_threads + 1)]

    def decode(k: int) -> None:
        base = 0
        for buf, m in zip(bufs, sizes, strict=True):
            first, end = min(max(bounds[k] - base, 0), m), min(max(bounds[k + 1] - base, 0), m)
            _decode_all(buf, first, end, base, rank, cols, tables[k], k, n_threads)
            base += m

    on_threads(n_threads, decode)
    comms = shared_strings(tables, cols[8], cols[9])
    return RawEvents(**dict(zip((name for name, _ in _COLUMNS), cols, strict=True)), comms=comms)


SHARE = 1 << 17  # the fewest records a thread decodes of a window (10 MiB)
_NO_RECORDS = np.empty(0, np.uint8)


class TraceSession:
    """The loaded trace programs writing to `path` from construction until `stop()`."""

    def __init__(self, path: str, buffer_bytes: int = DEFAULT_BUFFER, timeout: float = 60.0, futex: bool = True):
        obj, loader = bpf_build.build(program="trace")
        self.path = path
        argv = [loader, obj, path, str(buffer_bytes)] + ([] if futex else ["nofutex"])
        self.proc = bpf_build.start_loader(argv, timeout, NAME, HINT)

    def stop(self, timeout: float = 60.0) -> tuple[int, int]:
        """Detach, drain, and return (records written, records lost for want of buffer room)."""
        try:
            out, err = self.proc.communicate("q\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise UserError(f"{NAME} did not stop within {timeout:.0f} s") from None
        done = [ln.split() for ln in out.splitlines() if ln.startswith("done ")]
        if self.proc.returncode != 0 or not done:
            last = err.strip().splitlines()
            raise UserError(f"{NAME} failed: " + (last[-1] if last else f"status {self.proc.returncode}"))
        return int(done[-1][1]), int(done[-1][2])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def collect(command, pid, duration, futex: bool, on_ready=None, *, hold: contextlib.ExitStack | None = None,
            chunk_rows: int | None = None) -> Run:
    """BTF tracepoint programs into a BPF ring buffer around the command (or for `duration` s).
    With `hold`, a recording of more than 4 `chunk_rows` records (default: `windows.STREAM_EVENTS`)
    is not read: the Run's `windows` reads it a window at a time from a file kept until `hold`
    closes."""
    with contextlib.ExitStack() as own:
        tmp = (hold or own).enter_context(tempfile.TemporaryDirectory(prefix="scalestack-rec-"))
        data, pidfile = os.path.join(tmp, "events.bin"), os.path.join(tmp, "pid")
        with sigint_for_the_program(), TraceSession(data, DEFAULT_BUFFER, futex=futex) as session:
            rc = run_or_watch(command, pid, duration, pidfile, on_ready)
            written, lost = session.stop()
        root = root_pid(pidfile) if command is not None else None
        rows = streamed(record_count(data), chunk_rows) if hold is not None else None
        events, windows = (read_records(data), None) if rows is None else (None, RecordWindows(data, rows))
    (events.stats if windows is None else windows.stats)["lost_events"] = lost
    warnings = [f"the eBPF ring buffer had no room for {lost} events"] if lost else []
    return Run(events, rc, root, {"ebpf_buffer_bytes": DEFAULT_BUFFER, "ebpf_records": written}, warnings,
               windows=windows)
