"""The ftrace ring buffer's binary pages (tracefs `per_cpu/cpuN/trace_pipe_raw`) as RawEvents.

Each page starts with a header (a u64 timestamp and the committed data size, layout from
`events/header_page`) followed by records, each with a 32-bit header: `type_len` (5 bits) and
`time_delta` (27 bits). type_len 1..28 means a data record of type_len*4 bytes, 0 a data record
whose length is the next u32, 29 padding, 30 a time extension, 31 an absolute time stamp
(`events/header_event`). One compiled walk over the pages finds every record's time and
payload; the payloads are then decoded by `scalestack.ingest.tracepoint.decode_records`.
"""

from __future__ import annotations

import os

import numba
import numpy as np

from scalestack.errors import TraceFormatError
from scalestack.ingest.tracepoint import EventFormat, decode_records, decode_table
from scalestack.trace.events import COLUMNS, RawEvents


@numba.njit(cache=True)
def _walk_pages(buf, page_size, commit_offset, data_offset):
    """(time, payload offset, payload length) of every data record; error offset or -1."""
    n_pages = buf.shape[0] // page_size
    cap = buf.shape[0] // 8 + 1
    t_out = np.empty(cap, np.int64)
    off_out = np.empty(cap, np.int64)
    len_out = np.empty(cap, np.int64)
    m = 0
    for p in range(n_pages):
        base = p * page_size
        ts = np.int64(0)
        for b in range(8):
            ts |= np.int64(buf[base + b]) << (8 * b)
        commit = np.int64(0)
        for b in range(8):
            commit |= np.int64(buf[base + commit_offset + b]) << (8 * b)
        commit &= 0xFFFFF  # upper bits carry flags (missed events)
        if commit > page_size - data_offset:
            return t_out[:m], off_out[:m], len_out[:m], base + commit_offset
        i = base + data_offset
        end = i + commit
        while i + 4 <= end:
            hdr = np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8) | (np.int64(buf[i + 2]) << 16) | (np.int64(buf[i + 3]) << 24)
            type_len = hdr & 31
            delta = hdr >> 5
            if type_len == 29:  # padding: the rest of the page, or `array` bytes
                if delta == 0:
                    break
                if i + 8 > end:
                    break
                ln = np.int64(buf[i + 4]) | (np.int64(buf[i + 5]) << 8) | (np.int64(buf[i + 6]) << 16) | (np.int64(buf[i + 7]) << 24)
                i += 4 + ln  # a discarded record: no time update
                continue
            if type_len == 30:  # time extend
                if i + 8 > end:
                    return t_out[:m], off_out[:m], len_out[:m], i
                arr = np.int64(buf[i + 4]) | (np.int64(buf[i + 5]) << 8) | (np.int64(buf[i + 6]) << 16) | (np.int64(buf[i + 7]) << 24)
                ts += delta + (arr << 27)
                i += 8
                continue
            if type_len == 31:  # absolute time stamp
                if i + 8 > end:
                    return t_out[:m], off_out[:m], len_out[:m], i
                arr = np.int64(buf[i + 4]) | (np.int64(buf[i + 5]) << 8) | (np.int64(buf[i + 6]) << 16) | (np.int64(buf[i + 7]) << 24)
                ts = (ts & ~((np.int64(1) << 59) - 1)) | (delta + (arr << 27))
                i += 8
                continue
            ts += delta
            if type_len == 0:
                if i + 8 > end:
                    return t_out[:m], off_out[:m], len_out[:m], i
                ln = (np.int64(buf[i + 4]) | (np.int64(buf[i + 5]) << 8) | (np.int64(buf[i + 6]) << 16) | (np.int64(buf[i + 7]) << 24)) - 4
                start = i + 8
            else:
                ln = type_len * 4
                start = i + 4
            if ln <= 0 or start + ln > end:
                return t_out[:m], off_out[:m], len_out[:m], i
            t_out[m] = ts
            off_out[m] = start
            len_out[m] = ln
            m += 1
            i = start + ln
    return t_out[:m], off_out[:m], len_out[:m], -1


class _Types:
    """Each record's row of the decode table from its type id (`of`; -1: a type not decoded)."""

    def __init__(self, formats: dict[int, EventFormat]):
        ids = sorted(formats)
        self.table = decode_table([formats[i] for i in ids])
        self.row_of = np.full(max(ids, default=0) + 1, -1, np.int64)
        self.row_of[ids] = np.arange(len(ids))

    def of(self, buf: np.ndarray, off: np.ndarray) -> np.ndarray:
        type_id = (buf[off] | buf[off + 1].astype(np.int64) << 8) if len(off) else np.empty(0, np.int64)
        return np.where(type_id < len(self.row_of), self.row_of[np.minimum(type_id, len(self.row_of) - 1)], -1)

    def decoded(self, typ: np.ndarray) -> np.ndarray:
        """Whether each record is of a type decoded into an event (kind != 0)."""
        return (typ >= 0) & (self.table.kind[np.maximum(typ, 0)] != 0)


def _walked(buf: np.ndarray, cpu: int, page_size: int, commit_offset: int, data_offset: int):
    if len(buf) % page_size:
        raise TraceFormatError(f"cpu {cpu}: {len(buf)} bytes is not a whole number of {page_size}-byte pages")
    t, off, ln, err = _walk_pages(buf, page_size, commit_offset, data_offset)
    if err >= 0:
        raise TraceFormatError(f"cpu {cpu}: corrupt ftrace page data at byte {err}")
    return t, off, ln


def _decoded(buf, off, ln, typ, types: _Types, cpu: int, order=None):
    cols, comms, bad = decode_records(buf, off, ln, typ, types.table, order)
    if bad >= 0:
        raise TraceFormatError(f"cpu {cpu}: a {types.table.names[typ[bad]]} record at byte {int(off[bad])} is shorter "
                               "than its format")
    return cols, comms


CHUNK_PAGES = 4096  # pages of one CPU walked at a time by `FtraceWindows` (16 MiB): each page has its own time base


class FtraceWindows:
    """Each CPU's pages (a file of them, `{cpu: path}`) as RawEvents windows in time order of
    about `max_rows` events each, which concatenated equal `read_cpu_buffers` of the same pages:
    for a recording whose events memory cannot hold at once. A first pass walks every page, a
    chunk of `CHUNK_PAGES` at a time, and keeps per chunk its events' count and time range and
    every 64th time (for small windows every max_rows / 16th); each window then walks again the
    chunks whose range meets it and decodes its events. `events`: how many; `stats` as
    `read_cpu_buffers`' (and the caller's)."""

    def __init__(self, files: dict[int, str], formats: dict[int, EventFormat], max_rows: int = 1 << 20, *,
                 page_size: int = 4096, commit_offset: int = 8, data_offset: int = 16):
        self.files, self.types = dict(sorted(files.items())), _Types(formats)
        self.max_rows = max(1, int(max_rows))
        self._layout = (page_size, commit_offset, data_offset)
        self._chunks: list[tuple[int, int, int, int, int]] = []  # cpu, first byte, bytes, tmin, tmax
        every = max(1, min(64, self.max_rows // 16))  # a window is planned from ~16 or more kept times
        kept, unknown, self.events = [], 0, 0
        for cpu in self.files:
            for at, buf in self._pages(cpu):
                t, off, _ = _walked(buf, cpu, *self._layout)
                keep = self.types.decoded(self.types.of(buf, off))
                t = t[keep]
                unknown += int(len(keep) - len(t))
                if len(t):
                    self._chunks.append((cpu, at, len(buf), int(t.min()), int(t.max())))
                    kept.append(t[::every].copy())
                    self.events += len(t)
        self.stats = {"unknown_events": unknown, "source_format": "ftrace"}
        times = np.sort(np.concatenate([np.zeros(0, np.int64), *kept]))
        step = max(1, self.max_rows // every)
        self._bounds = np.unique(times[step::step]) if len(times) > step else np.zeros(0, np.int64)

    def _pages(self, cpu: int, lo: int = 0, hi: int | None = None):
        """(first byte, pages) of the CPU's file from byte lo to hi, CHUNK_PAGES at a time, mapped."""
        path = self.files[cpu]
        size = os.path.getsize(path) if hi is None else hi
        if size == 0:
            return
        mapped = np.memmap(path, np.uint8, mode="r")
        step = CHUNK_PAGES * self._layout[0]
        for at in range(lo, size, step):
            yield at, mapped[at:min(at + step, size)]

    def __iter__(self):
        edges = [-(1 << 63), *self._bounds.tolist(), (1 << 63) - 1]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            parts, strings = [], {}
            for cpu, at, n, tmin, tmax in self._chunks:
                if tmax < lo or tmin >= hi:
                    continue
                for _, buf in self._pages(cpu, at, at + n):
                    t, off, ln = _walked(buf, cpu, *self._layout)
                    typ = self.types.of(buf, off)
                    pick = np.flatnonzero(self.types.decoded(typ) & (t >= lo) & (t < hi))
                    if len(pick) == 0:
                        continue
                    cols, comms = _decoded(buf, off, ln, typ, self.types, cpu, pick)
                    parts.append(_columns(cols, comms, strings, t[pick], cpu))
            if not parts:
                continue
            ev = _events(parts, strings)
            ev.stats = {**self.stats, "window_ns": [lo, hi]}
            yield ev


def most_events(files: dict[int, str], formats: dict[int, EventFormat]) -> int:
    """The most events the page files can hold: their bytes over the fewest a decoded record takes
    (a 4-byte header and its format's fields; a shorter one is refused), without walking a page."""
    table = _Types(formats).table
    least = [4 + int(table.min_len[r]) for r in range(len(table.kind)) if table.kind[r] != 0]
    size = sum(os.path.getsize(f) for f in files.values() if os.path.exists(f))
    return -(-size // max(min(least), 4)) if least else 0


def _columns(cols: dict, comms: list[str], strings: dict[str, int], t: np.ndarray, cpu: int) -> dict:
    """A CPU's decoded records as RawEvents columns, their strings in the table shared by all CPUs."""
    n = len(t)
    cols["tid"], cols["pid"] = cols["pid"], np.full(n, -1, np.int32)  # common_pid is the thread
    cols["comm0"] = _global_ids(cols["comm0"], comms, strings)
    cols["comm1"] = _global_ids(cols["comm1"], comms, strings)
    cols["time"], cols["cpu"] = t, np.full(n, cpu, np.int32)
    return cols


def _events(parts: list[dict], strings: dict[str, int]) -> RawEvents:
    """The CPUs' columns (in CPU order) as one RawEvents, decoded events only, stably sorted by time."""
    cat = {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in COLUMNS}
    keep = np.flatnonzero(cat["kind"] != 0)
    keep = keep[np.argsort(cat["time"][keep], kind="stable")]  # each CPU's buffer order breaks time ties
    ev = RawEvents(**{k: cat[k][keep] for k in COLUMNS})
    ev.comms = list(strings)
    return ev


def read_cpu_buffers(
    pages: dict[int, bytes | np.ndarray], formats: dict[int, EventFormat], *, page_size: int = 4096,
    commit_offset: int = 8, data_offset: int = 16,
) -> RawEvents:
    """RawEvents from the raw pages read from each CPU's buffer ({cpu: bytes, or a uint8 array: a mapped file})."""
    types = _Types(formats)
    strings: dict[str, int] = {}
    parts, total = [], 0
    for cpu, data in sorted(pages.items()):
        buf = np.frombuffer(data, dtype=np.uint8)
        t, off, ln = _walked(buf, cpu, page_size, commit_offset, data_offset)
        typ = types.of(buf, off)
        cols, comms = _decoded(buf, off, ln, typ, types, cpu)
        parts.append(_columns(cols, comms, strings, t, cpu))
        total += len(t)
    ev = _events(parts, strings)
    ev.stats = {"unknown_events": int(total - len(ev)), "source_format": "ftrace"}
    return ev


def _global_ids(local: np.ndarray, comms: list[str], strings: dict[str, int]) -> np.ndarray:
    """Map one CPU's string ids onto the table shared by all CPUs (insertion-ordered dict)."""
    lut = np.array([strings.setdefault(c, len(strings)) for c in comms] + [-1], np.int32)
    return lut[local]
