"""The ftrace ring buffer's binary pages (tracefs `per_cpu/cpuN/trace_pipe_raw`) as RawEvents.

Each page starts with a header (a u64 timestamp and the committed data size, layout from
`events/header_page`) followed by records, each with a 32-bit header: `type_len` (5 bits) and
`time_delta` (27 bits). type_len 1..28 means a data record of type_len*4 bytes, 0 a data record
whose length is the next u32, 29 padding, 30 a time extension, 31 an absolute time stamp
(`events/header_event`). One compiled walk over the pages finds every record's time and
payload; the payloads are then decoded per event type by `scalestack.ingest.tracepoint`.
"""

from __future__ import annotations

import numba
import numpy as np

from scalestack.errors import TraceFormatError
from scalestack.events import RawEvents
from scalestack.ingest.tracepoint import LAYOUT, EventFormat, decode


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
    pages: dict[int, bytes], formats: dict[int, EventFormat], *, page_size: int = 4096,
    commit_offset: int = 8, data_offset: int = 16,
) -> RawEvents:
    """RawEvents from the raw pages read from each CPU's buffer ({cpu: bytes})."""
    strings: dict[bytes, int] = {}
    comms: list[str] = []
    parts = []
    unknown = 0
    seq0 = 0
    for cpu, data in sorted(pages.items()):
        buf = np.frombuffer(data, dtype=np.uint8)
        if len(buf) % page_size:
            raise TraceFormatError(f"cpu {cpu}: {len(buf)} bytes is not a whole number of {page_size}-byte pages")
        t, off, ln, err = _walk_pages(buf, page_size, commit_offset, data_offset)
        if err >= 0:
            raise TraceFormatError(f"cpu {cpu}: corrupt ftrace page data at byte {err}")
        if len(off) == 0:
            continue
        type_id = buf[off[:, None] + np.arange(2)].reshape(-1).view(np.uint16).astype(np.int64)
        for eid in np.unique(type_id):
            fmt = formats.get(int(eid))
            sel = np.flatnonzero(type_id == eid)
            if fmt is None or fmt.name not in LAYOUT:
                unknown += len(sel)
                continue
            cols = decode(buf, off[sel], ln[sel], fmt, strings, comms)
            cols["time"] = t[sel]
            cols["cpu"] = np.full(len(sel), cpu, np.int32)
            cols["seq"] = seq0 + sel  # the record's place in its CPU's buffer breaks time ties
            parts.append(cols)
        seq0 += len(off)
    if not parts:
        ev = RawEvents.empty()
    else:
        names = ("time", "cpu", "tid", "kind", "arg0", "arg1", "arg2", "comm0", "comm1")
        cat = {k: np.concatenate([p[k] for p in parts]) for k in (*names, "seq")}
        order = np.lexsort((cat.pop("seq"), cat["time"]))
        ev = RawEvents(pid=np.full(len(order), -1, np.int32), **{k: cat[k][order] for k in names})
    ev.comms = comms
    ev.stats = {"unknown_events": unknown, "source_format": "ftrace"}
    return ev
