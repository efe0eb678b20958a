"""The ftrace ring buffer's binary pages (tracefs `per_cpu/cpuN/trace_pipe_raw`) as RawEvents.

Each page starts with a header (a u64 timestamp and the committed data size, layout from
`events/header_page`) followed by records, each with a 32-bit header: `type_len` (5 bits) and
`time_delta` (27 bits). type_len 1..28 means a data record of type_len*4 bytes, 0 a data record
whose length is the next u32, 29 padding, 30 a time extension, 31 an absolute time stamp
(`events/header_event`). One compiled walk over the pages finds every record's time and
payload; the payloads are then decoded by `scalestack.ingest.tracepoint.decode_records`.
"""

from __future__ import annotations

import numba
import numpy as np

from scalestack.errors import TraceFormatError
from scalestack.ingest.tracepoint import EventFormat, decode_records, decode_table
from scalestack.trace.events import RawEvents


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


def read_cpu_buffers(
    pages: dict[int, bytes | np.ndarray], formats: dict[int, EventFormat], *, page_size: int = 4096,
    commit_offset: int = 8, data_offset: int = 16,
) -> RawEvents:
    """RawEvents from the raw pages read from each CPU's buffer ({cpu: bytes, or a uint8 array: a mapped file})."""
    strings: dict[str, int] = {}
    # event type id -> row of the decode table (-1: an event we do not decode)
    ids = sorted(formats)
    table = decode_table([formats[i] for i in ids])
    row_of = np.full(max(ids, default=0) + 1, -1, np.int64)
    row_of[ids] = np.arange(len(ids))
    parts = []
    for cpu, data in sorted(pages.items()):
        buf = np.frombuffer(data, dtype=np.uint8)
        if len(buf) % page_size:
            raise TraceFormatError(f"cpu {cpu}: {len(buf)} bytes is not a whole number of {page_size}-byte pages")
        t, off, ln, err = _walk_pages(buf, page_size, commit_offset, data_offset)
        if err >= 0:
            raise TraceFormatError(f"cpu {cpu}: corrupt ftrace page data at byte {err}")
        type_id = (buf[off] | buf[off + 1].astype(np.int64) << 8) if len(off) else np.empty(0, np.int64)
        typ = np.where(type_id < len(row_of), row_of[np.minimum(type_id, len(row_of) - 1)], -1)
        cols, comms, bad = decode_records(buf, off, ln, typ, table)
        if bad >= 0:
            raise TraceFormatError(f"cpu {cpu}: a {table.names[typ[bad]]} record at byte {int(off[bad])} is shorter "
                                   "than its format")
        cols["tid"], cols["pid"] = cols["pid"], np.full(len(off), -1, np.int32)  # common_pid is the thread
        cols["comm0"] = _global_ids(cols["comm0"], comms, strings)
        cols["comm1"] = _global_ids(cols["comm1"], comms, strings)
        cols["time"], cols["cpu"] = t, np.full(len(off), cpu, np.int32)
        parts.append(cols)
    names = ("time", "cpu", "tid", "pid", "kind", "arg0", "arg1", "arg2", "comm0", "comm1")
    cat = {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in names}
    keep = np.flatnonzero(cat["kind"] != 0)
    unknown = len(cat["kind"]) - len(keep)
    keep = keep[np.argsort(cat["time"][keep], kind="stable")]  # each CPU's buffer order breaks time ties
    ev = RawEvents(**{k: cat[k][keep] for k in names})
    comms = list(strings)
    ev.comms = comms
    ev.stats = {"unknown_events": int(unknown), "source_format": "ftrace"}
    return ev


def _global_ids(local: np.ndarray, comms: list[str], strings: dict[str, int]) -> np.ndarray:
    """Map one CPU's string ids onto the table shared by all CPUs (insertion-ordered dict)."""
    lut = np.array([strings.setdefault(c, len(strings)) for c in comms] + [-1], np.int32)
    return lut[local]
