"""perf.data read directly: the way past `perf script`'s ~0.4 M events/s.

Record what scalestack needs, on any machine, with::

    perf record -k CLOCK_MONOTONIC -a -e sched:sched_switch,sched:sched_wakeup,sched:sched_wakeup_new,\\
      sched:sched_process_fork,sched:sched_process_exec,sched:sched_process_exit,task:task_rename,\\
      syscalls:sys_enter_futex,syscalls:sys_exit_futex,sched:sched_stat_runtime,sched:sched_migrate_task

(``-z`` compression is read too) and import it with ``scalestack import perf.data --pid PID``.

The file (tools/perf/Documentation/perf.data-file-format.txt) is read in three steps:

1. Python reads the small parts: the file header, the attr section (each event's
   ``perf_event_attr`` and its sample ids), and the feature sections after the data, chiefly
   HEADER_TRACING_DATA, whose per-event ``format`` texts give every tracepoint field's offset
   and size (they change between kernels, so nothing is hard-coded).
2. A first compiled pass over the data section, one window of `WINDOW` bytes at a time, checks
   every record header, finds each PERF_RECORD_SAMPLE's event by its id (following the
   sample_type of the event it belongs to), sums LOST / LOST_SAMPLES, and notes the time of
   every sample it will decode. One stable time sort of those times (per-CPU buffers
   interleave) gives each sample its row before any is decoded.
3. A second compiled pass decodes each window's samples straight into their rows by their
   events' formats (the steps of `scalestack.ingest.tracepoint.decode_one`, shared with the
   tracefs reader), windows shared out among threads (one per core; the compiled code releases
   the GIL), each thread interning comm strings in its own table, merged at the end.

So memory holds the events and one window per thread (mapped, not copied), never the file, and
no column is copied to sort it. ``perf record -z`` data (PERF_RECORD_COMPRESSED, one zstd stream) is decompressed
whole and read the same way.

A file whose events memory cannot hold is read by `read_perf_data_windows` as RawEvents windows
in time order, memory bounded by a window: its first pass keeps per window of bytes only a count,
a time range and every 64th time, and each time window reads again only the byte windows whose
times meet it, then ranks and decodes its own events the same way.

The RawEvents equal those of the perf-script text path (same rows, same order), which a
test checks on real recordings. Side-band records (COMM, FORK, MMAP of perf's dummy event) and
non-tracepoint samples are counted in ``stats`` and skipped, as the text path skips them.
Bad input gives one `TraceFormatError` line with the byte offset.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
from collections.abc import Callable

import numba
import numpy as np

from scalestack.errors import TraceFormatError, UserError
from scalestack.ingest.parts import (
    build_part,
    events_between,
    part_bounds,
    part_read_from,
    part_stats,
)
from scalestack.ingest.perf_abi import (
    HEADER_SIZE,
    MAGIC,
    MAGIC_SWAPPED,
    R_GROUP,
    R_ID,
    R_LOST,
    R_TOTAL_TIME_ENABLED,
    R_TOTAL_TIME_RUNNING,
    REC_COMPRESSED,
    S_ADDR,
    S_CALLCHAIN,
    S_CPU,
    S_ID,
    S_IDENTIFIER,
    S_IP,
    S_PERIOD,
    S_RAW,
    S_READ,
    S_STACK_USER,
    S_STREAM_ID,
    S_TID,
    S_TIME,
)
from scalestack.ingest.perf_data_copy import copy_for_processes
from scalestack.ingest.tracepoint import (
    EventFormat,
    Strings,
    _int_at,
    byte_at,
    comm_span,
    decode_table,
    intern_at,
    le_u32,
    le_u64,
    parse_format,
    strings_full,
    switch_state,
)
from scalestack.ingest.windows import (
    MAP_BYTES,
    mapped,
    rank_by_time,
    readonly,
    shared_strings,
    streamed,
    thread_count,
)
from scalestack.tools import last_line, which
from scalestack.trace import Trace
from scalestack.trace.events import COLUMNS, MAX_CPUS, Kind, RawEvents
from scalestack.trace.lookup import find_sorted
from scalestack.trace.parallel import on_threads
from scalestack.trace.store import FULL_DISK, save_or_keep

PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_DUMMY = 9  # the software event perf record adds for its side-band records: it samples nothing
CLOCK_EVENTS = (0, 1)  # cpu-clock, task-clock: a sample every `period` ns of CPU time
FEAT_TRACING_DATA = 1
FEAT_BITS = 256
_FEATURE_NAMES = {3: "hostname", 4: "os_release", 5: "perf_version", 6: "arch", 7: "nr_cpus",
                  11: "cmdline", 21: "sample_time", 23: "clockid", 27: "compressed"}
_ALL = (-(1 << 63), (1 << 63) - 1)  # every time: lo <= t < hi

# perf's largest PERF_RECORD_COMPRESSED: PERF_SAMPLE_MAX_SIZE (64 KiB) - 1 (builtin-record.c, zstd_compress)
COMPRESSED_MAX = (1 << 16) - 1

_ERR = {1: "record size smaller than its header", 2: "record runs past the end of the data",
        3: "sample with an id that no event declares", 4: "sample shorter than its sample_type says",
        5: "a LOST (24 bytes) or LOST_SAMPLES (16 bytes) record cut short"}


def sniff(head: bytes) -> bool:
    return head[:8] in (MAGIC, MAGIC_SWAPPED)


@dataclasses.dataclass(frozen=True)
class Attr:
    """One recorded event: its perf_event_attr fields that decoding needs, and its sample ids."""

    type: int
    config: int
    sample_type: int
    read_format: int
    sample_id_all: bool
    ids: tuple[int, ...]
    period: int = 0  # sample_period, or sample_freq when `freq`
    freq: bool = False


@dataclasses.dataclass
class PerfData:
    """What the small sections of a perf.data say: events, formats, features."""

    attrs: list[Attr]
    data_offset: int
    data_size: int
    formats: dict[int, EventFormat]  # tracepoint id -> format
    features: dict[str, object]
    tracing_offset: int = -1  # where HEADER_TRACING_DATA starts


def _err(path: str, offset: int, what: str) -> TraceFormatError:
    return TraceFormatError(f"{path}: not a readable perf.data at byte {offset}: {what}")


def read_header(buf: memoryview | bytes, path: str) -> PerfData:
    """Header, attrs and features of a perf.data in `buf` (the whole file)."""
    return _header(lambda off, n: bytes(buf[off:off + n]), len(buf), path)


def _header(get, size: int, path: str) -> PerfData:
    """Header, attrs and features of a perf.data of `size` bytes; get(offset, n) reads its bytes,
    so a file is read piecewise (these sections are small; the data section is not read here)."""
    head = get(0, HEADER_SIZE)
    if size < 16 or head[:8] not in (MAGIC, MAGIC_SWAPPED):
        raise _err(path, 0, "no PERFILE2 magic (is it a perf.data file?)")
    if head[:8] == MAGIC_SWAPPED:
        raise TraceFormatError(f"{path}: byte 0 says big-endian perf.data; convert it on the machine that recorded it "
                               "(`perf script` there) and import the text")
    hdr_size = struct.unpack_from("<Q", head, 8)[0]
    if hdr_size == 16:
        raise TraceFormatError(f"{path}: byte 8 says pipe-mode perf.data (`perf record -o -`); write it to a file with "
                               "`perf inject -i FILE -o perf.data` and import that")
    if size < HEADER_SIZE:
        raise _err(path, size, f"the file ends inside perf's {HEADER_SIZE}-byte header (cut short while written "
                               "or copied)")
    if hdr_size != HEADER_SIZE:
        raise _err(path, 8, f"header size {hdr_size}, expected {HEADER_SIZE}")
    attr_size, a_off, a_size, d_off, d_size = struct.unpack_from("<QQQQQ", head, 16)
    feat_bits = int.from_bytes(head[72:104], "little")
    if attr_size < 80 or a_off + a_size > size or a_size % attr_size:
        raise _err(path, 24, f"attr section ({a_size} bytes at {a_off}, {attr_size} each) does not fit the file")
    attrs = []
    section = get(a_off, a_size)
    for k in range(a_size // attr_size):
        o = k * attr_size
        typ, _asz, config, period, sample_type, read_format, flags = struct.unpack_from("<IIQQQQQ", section, o)
        ids_off, ids_size = struct.unpack_from("<QQ", section, o + attr_size - 16)
        if ids_off + ids_size > size or ids_size % 8:
            raise _err(path, a_off + o + attr_size - 16, "an event's id list does not fit the file")
        ids = tuple(struct.unpack(f"<{ids_size // 8}Q", get(ids_off, ids_size))) if ids_size else ()
        attrs.append(Attr(typ, config, sample_type, read_format, bool(flags >> 18 & 1), ids, period, bool(flags >> 10 & 1)))
    if not attrs:
        raise _err(path, 24, "no events in the attr section")
    if d_off + d_size > size:
        raise TraceFormatError(f"{path}: truncated: the data section ends at byte {d_off + d_size} but the file "
                               f"has {size} bytes (was perf killed before it finished writing?)")
    features: dict[str, object] = {}
    formats: dict[int, EventFormat] = {}
    tracing_offset = -1
    bits = [b for b in range(FEAT_BITS) if feat_bits >> b & 1]
    table = d_off + d_size
    if table + 16 * len(bits) > size:
        raise TraceFormatError(f"{path}: truncated: the feature table at byte {table} is cut off")
    entries = get(table, 16 * len(bits))
    for k, bit in enumerate(bits):
        f_off, f_size = struct.unpack_from("<QQ", entries, 16 * k)
        if f_off + f_size > size:
            raise _err(path, table + 16 * k, f"feature {bit} ({f_size} bytes at {f_off}) does not fit the file")
        if bit == FEAT_TRACING_DATA:
            formats = parse_tracing_data(get(f_off, f_size), f_off, path)
            tracing_offset = f_off
        elif bit in _FEATURE_NAMES:
            features[_FEATURE_NAMES[bit]] = _feature_value(bit, get(f_off, f_size))
    return PerfData(attrs, d_off, d_size, formats, features, tracing_offset)


def _feature_value(bit: int, raw: bytes) -> object:
    """The few header features shown in metadata (perf strings: u32 len, then NUL-padded text)."""
    try:
        if bit in (3, 4, 5, 6):
            n = struct.unpack_from("<I", raw, 0)[0]
            return raw[4:4 + n].split(b"\0", 1)[0].decode("utf-8", "replace")
        if bit == 7:
            return dict(zip(("online", "available"), struct.unpack_from("<II", raw, 0), strict=True))
        if bit == 11:
            count = struct.unpack_from("<I", raw, 0)[0]
            out, o = [], 4
            for _ in range(count):
                n = struct.unpack_from("<I", raw, o)[0]
                out.append(raw[o + 4:o + 4 + n].split(b"\0", 1)[0].decode("utf-8", "replace"))
                o += 4 + n
            return out
        if bit == 23:
            return struct.unpack_from("<Q", raw, 0)[0]
        if bit == 21:  # the first and last sample's time
            return list(struct.unpack_from("<QQ", raw, 0))
        if bit == 27:
            return dict(zip(("version", "type", "level", "ratio", "mmap_len"), struct.unpack_from("<IIIII", raw, 0),
                            strict=True))
    except struct.error:
        return None
    return None


def parse_tracing_data(raw: bytes, base: int, path: str) -> dict[int, EventFormat]:
    """Tracepoint formats from HEADER_TRACING_DATA (tools/perf/util/trace-event-read.c layout)."""
    pos = 0

    def fail(what: str) -> TraceFormatError:
        return _err(path, base + pos, f"tracing data: {what}")

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(raw):
            raise fail("cut off")
        out = raw[pos:pos + n]
        pos += n
        return out

    def cstr() -> bytes:
        nonlocal pos
        end = raw.find(b"\0", pos)
        if end < 0:
            raise fail("unterminated string")
        out = raw[pos:end]
        pos = end + 1
        return out

    if take(10) != b"\x17\x08Dtracing":
        raise fail("bad magic")
    version = cstr()
    if take(1) != b"\0":
        raise fail("big-endian tracing data is not supported")
    take(1)  # sizeof(long)
    take(4)  # page size
    for name in (b"header_page", b"header_event"):
        if cstr() != name:
            raise fail(f"expected {name.decode()}")
        take(struct.unpack("<Q", take(8))[0])
    for _ in range(struct.unpack("<I", take(4))[0]):  # ftrace's own events
        take(struct.unpack("<Q", take(8))[0])
    formats: dict[int, EventFormat] = {}
    for _ in range(struct.unpack("<I", take(4))[0]):
        system = cstr().decode("utf-8", "replace")
        for _ in range(struct.unpack("<I", take(4))[0]):
            text = take(struct.unpack("<Q", take(8))[0]).decode("utf-8", "replace")
            try:
                fmt = parse_format(text, system)
            except TraceFormatError as exc:
                raise fail(str(exc)) from None
            formats[fmt.id] = fmt
    del version  # kallsyms, printk formats and saved cmdlines follow; not needed
    return formats


@numba.njit(cache=True, inline="always")
def _rd(buf, i, n):
    """Little-endian unsigned integer of n = 2, 4 or 8 bytes at buf[i]."""
    if n == 8:
        return le_u64(buf, i)
    if n == 4:
        return le_u32(buf, i)
    return byte_at(buf, i) | byte_at(buf, i + 1) << np.uint64(8)


_MORE, _GROW, _SHORT, _WILD_CPU = 6, 7, 8, 9  # codes besides 0 (done) and the errors of _ERR


@numba.njit(cache=True, inline="always")
def _sample(buf, i, rec_end, single, ids, id_attr, sample_types, read_formats):
    """(error code, event, pid, tid, time, cpu, raw offset, raw length) of the PERF_RECORD_SAMPLE
    at buf[i:rec_end], its fields laid out by its event's sample_type.

    One exit (an error sets `code` and skips the rest): with a `return` per error, numba gave the
    arrays passed in reference counts that cost more than the parsing (see tracepoint.intern_at)."""
    code = 0
    a = 0
    size = rec_end - i
    p = i + 8
    s_pid = np.int64(-1)
    s_tid = np.int64(-1)
    s_time = np.int64(0)
    s_cpu = np.int64(-1)
    r_off = np.int64(-1)
    r_len = np.int64(0)
    if not single:
        if i + 16 > rec_end:
            code = 4
        else:
            k = find_sorted(ids, _rd(buf, i + 8, 8))
            if k < 0:
                code = 3
            else:
                a = id_attr[k]
    st = sample_types[a]
    if st & 0x10000:
        p += 8
    if st & 0x1:
        p += 8
    if st & 0x2 and code == 0:
        if p + 8 > rec_end:
            code = 4
        else:
            s_pid = np.int64(np.int32(np.uint32(_rd(buf, p, 4))))
            s_tid = np.int64(np.int32(np.uint32(_rd(buf, p + 4, 4))))
        p += 8
    if st & 0x4 and code == 0:
        if p + 8 > rec_end:
            code = 4
        else:
            s_time = np.int64(_rd(buf, p, 8))
        p += 8
    if st & 0x8:
        p += 8
    if st & 0x40:
        p += 8
    if st & 0x200:
        p += 8
    if st & 0x80 and code == 0:
        if p + 8 > rec_end:
            code = 4
        else:
            s_cpu = np.int64(_rd(buf, p, 4))
        p += 8
    if st & 0x100:
        p += 8
    if st & 0x10 and code == 0:  # READ
        rf = read_formats[a]
        if p + 8 > rec_end:
            code = 4
        else:
            per = 8 + (8 if rf & 4 else 0) + (8 if rf & 16 else 0)
            if rf & 8:
                nr = np.int64(_rd(buf, p, 8))
                if nr < 0 or nr > size:
                    code = 4
                else:
                    p += 8 + (8 if rf & 1 else 0) + (8 if rf & 2 else 0) + nr * per
            else:
                p += per + (8 if rf & 1 else 0) + (8 if rf & 2 else 0)
    if st & 0x20 and code == 0:  # CALLCHAIN
        if p + 8 > rec_end:
            code = 4
        else:
            nr = np.int64(_rd(buf, p, 8))
            if nr < 0 or nr > size:
                code = 4
            else:
                p += 8 + 8 * nr
    if code == 0:
        if st & 0x400:  # RAW
            if p + 4 > rec_end:
                code = 4
            else:
                r_len = np.int64(_rd(buf, p, 4))
                r_off = p + 4
                if r_off + r_len > rec_end:
                    code = 4
        elif p > rec_end:
            code = 4
    if code:
        a, s_pid, s_tid, s_time, s_cpu, r_off, r_len = 0, 0, 0, 0, 0, 0, 0
    return code, a, s_pid, s_tid, s_time, s_cpu, r_off, r_len


@numba.njit(cache=True, nogil=True)
def _index(buf, end, last, ids, id_attr, id_keys, id_events, sample_types, read_formats, layout, kind_tab, lo, hi,
           t_out, j, counts, more, min_len, max_cpu):
    """First pass over a window buf[:end]: check every record, count LOST, LOST_SAMPLES,
    side-band, COMPRESSED records and samples of events not decoded into counts[0:5], keep the
    first and last time of those decoded in counts[5:7], and note the time of each that will be
    decoded, the ones at lo <= time < hi (t_out[j], t_out[j + 1], ...).

    `more` (empty: skipped) is for a reader that decodes later, window by window, yet must know
    now what the decode will find: per event the samples noted (more[:events]), their largest
    CPU (more[events]), and the first that `_decode_window` would refuse (more[events + 1:
    events + 5]: its code, byte in buf, event, value; code 0 = none yet), by the same tests.

    Returns (j, pos, code, at): code 0 = done; _MORE = the record at pos runs past `end` but the
    data goes on (the next window starts there); 1-5 = _ERR at byte `at`."""
    i = 0
    na = sample_types.shape[0]
    single = na == 1
    while i < end:
        if i + 8 > end:
            return j, i, _MORE if not last else 2, i
        typ = np.int64(_rd(buf, i, 4))
        size = np.int64(_rd(buf, i + 6, 2))
        if size < 8:
            return j, i, 1, i
        if i + size > end:
            return j, i, _MORE if not last else 2, i
        if typ == 9:  # PERF_RECORD_SAMPLE; events of a fixed layout are checked here, others by _sample
            code, a = 0, 0
            s_cpu = np.int64(-1)
            r_len = np.int64(0)
            if not single:
                if size < 16:
                    code = 4
                else:
                    a = event_of(le_u64(buf, i + 8), id_keys, id_events)
                    code = 3 if a < 0 else 0
            if code == 0 and layout[a, 0] != _VARIABLE:
                s_time = np.int64(le_u64(buf, i + layout[a, 1])) if layout[a, 1] >= 0 else 0
                r_off = i + layout[a, 3] + 4 if layout[a, 3] >= 0 else -1
                if size < layout[a, 4] or (r_off >= 0 and r_off + np.int64(le_u32(buf, r_off - 4)) > i + size):
                    code = 4
            elif code == 0:
                code, a, _pid, _tid, s_time, s_cpu, r_off, r_len = _sample(buf, i, i + size, single, ids, id_attr,
                                                                           sample_types, read_formats)
            if code:
                return j, i, code, i
            if kind_tab[a] == 0 or r_off < 0:
                counts[4] += 1
            else:
                counts[5] = min(counts[5], s_time)
                counts[6] = max(counts[6], s_time)
                if lo <= s_time < hi:
                    t_out[j] = s_time
                    j += 1
                    if more.shape[0]:  # as _decode_window reads them
                        if layout[a, 0] != _VARIABLE:
                            s_cpu = np.int64(le_u32(buf, i + layout[a, 2])) if layout[a, 2] >= 0 else -1
                            r_len = np.int64(le_u32(buf, r_off - 4))
                        more[a] += 1
                        more[na] = max(more[na], s_cpu)
                        if more[na + 1] == 0 and (r_len < min_len[a] or s_cpu >= max_cpu):
                            more[na + 1] = _SHORT if r_len < min_len[a] else _WILD_CPU
                            more[na + 2] = r_off
                            more[na + 3] = a
                            more[na + 4] = r_len if r_len < min_len[a] else s_cpu
        elif typ == 2:  # LOST: u64 id, u64 lost
            if size < 24:
                return j, i, 5, i
            counts[0] += np.int64(_rd(buf, i + 16, 8))
        elif typ == 13:  # LOST_SAMPLES: u64 lost
            if size < 16:
                return j, i, 5, i
            counts[1] += np.int64(_rd(buf, i + 8, 8))
        elif typ == 81:
            counts[3] += 1
        else:
            counts[2] += 1
        i += size
    return j, i, 0, -1


_VARIABLE = -2  # a sample_type whose fields move from sample to sample (callchains, read groups)


@functools.lru_cache(maxsize=64)
def sample_layout(sample_type: int, read_format: int) -> tuple[int, int, int, int, int]:
    """Where a sample's pid/tid, time, cpu and raw-size fields start, counted from its record
    header, in the order `_sample` walks them (-1: absent), and the fewest bytes such a record
    has (`_sample` finds it short otherwise); all `_VARIABLE` if the fields move."""
    if sample_type & S_CALLCHAIN or (sample_type & S_READ and read_format & R_GROUP):
        return (_VARIABLE,) * 5
    p, out = 8, {}
    for bit in (S_IDENTIFIER, S_IP, S_TID, S_TIME, S_ADDR, S_ID, S_STREAM_ID, S_CPU, S_PERIOD):
        if sample_type & bit:
            out[bit] = p
            p += 8
    if sample_type & S_READ:
        per = 8 + (8 if read_format & R_ID else 0) + (8 if read_format & R_LOST else 0)
        p += per + (8 if read_format & R_TOTAL_TIME_ENABLED else 0) + (8 if read_format & R_TOTAL_TIME_RUNNING else 0)
    raw = p if sample_type & S_RAW else -1
    return out.get(S_TID, -1), out.get(S_TIME, -1), out.get(S_CPU, -1), raw, p + 4 if raw >= 0 else p


def id_table(ids: np.ndarray, id_attr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sample id -> event as an open-addressing hash table (keys, events; event -1 = empty slot)
    at most half full, for `event_of`."""
    cap = 1 << max(2, (2 * len(ids)).bit_length())
    keys, events = [0] * cap, [-1] * cap
    for sid, a in zip(ids.tolist(), id_attr.tolist(), strict=True):
        k = ((sid * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) >> 40 & (cap - 1)  # event_of's first slot
        while events[k] >= 0:
            k = (k + 1) & (cap - 1)
        keys[k], events[k] = sid, a
    return np.array(keys, np.uint64), np.array(events, np.int64)


@numba.njit(cache=True, inline="always")
def event_of(sid, keys, events):
    """The event of sample id sid (-1: none) by `id_table`'s table. One exit and no helper
    given the arrays: either costs reference counts in the loops (see `_decode_window`)."""
    m = keys.shape[0] - 1
    k = np.int64((sid * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & m
    a = -2
    while a == -2:
        if events[k] < 0:
            a = -1
        elif keys[k] == sid:
            a = events[k]
        k = (k + 1) & m
    return a


@numba.njit(cache=True, nogil=True)
def _decode_window(buf, i, end, j, rank, ids, id_attr, id_keys, id_events, sample_types, read_formats, layout, kind_tab,
                   ints, strs, preempt, min_len, max_cpu, lo, hi, o_t, o_cpu, o_pid, o_tid, o_kind, o_a0, o_a1, o_a2,
                   o_c0, o_c1, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used, tag, n_tags):
    """Second pass over a window `_index` checked: decode the j-th, (j+1)-th, ... decoded sample
    at lo <= time < hi into its row in time order, rank[j]; skip the others undecoded. Windows
    are independent, so threads share them out.

    Returns (i, j, code, at, event, value): 0 = done; _GROW = the string table may be full (grow
    it, call again from i, j); _SHORT = a sample of `event` at byte `at` has `value` bytes of
    payload, fewer than its format needs; _WILD_CPU = it names CPU `value` >= max_cpu. Comm ids
    are thread `tag`'s own, written as id * n_tags + tag (`_relabel` maps them).

    Samples are read at their event's fixed `layout` (`sample_layout`; `_sample` for the others)
    and the record's fields by the tracepoint helpers called here, in the loop itself: numba
    gives the arrays of a helper that calls further helpers reference counts (two atomic
    operations per array per call), which were three quarters of this loop's time."""
    single = sample_types.shape[0] == 1
    code, at, event, value = 0, -1, 0, 0
    while i < end and code == 0:
        size = np.int64(_rd(buf, i + 6, 2))
        if le_u32(buf, i) == 9:
            a = 0 if single else event_of(le_u64(buf, i + 8), id_keys, id_events)  # _index found each id
            kind = kind_tab[a]
            off_tid = layout[a, 0]
            if off_tid == _VARIABLE:
                _code, a, s_pid, s_tid, s_time, s_cpu, r_off, r_len = _sample(buf, i, i + size, single, ids, id_attr,
                                                                              sample_types, read_formats)
            else:
                s_pid = np.int64(np.int32(np.uint32(le_u32(buf, i + off_tid)))) if off_tid >= 0 else -1
                s_tid = np.int64(np.int32(np.uint32(le_u32(buf, i + off_tid + 4)))) if off_tid >= 0 else -1
                s_time = np.int64(le_u64(buf, i + layout[a, 1])) if layout[a, 1] >= 0 else 0
                s_cpu = np.int64(le_u32(buf, i + layout[a, 2])) if layout[a, 2] >= 0 else -1
                r_off = i + layout[a, 3] + 4 if layout[a, 3] >= 0 else -1
                r_len = np.int64(le_u32(buf, i + layout[a, 3])) if layout[a, 3] >= 0 else 0
            if kind != 0 and r_off >= 0 and lo <= s_time < hi:
                if r_len < min_len[a]:
                    code, at, event, value = _SHORT, r_off, a, r_len
                elif s_cpu >= max_cpu:
                    code, at, event, value = _WILD_CPU, r_off, a, s_cpu
                elif strings_full(h_id, arena, used):
                    code, at = _GROW, i
                else:  # decode_one, spelt out (see there why)
                    a0 = _int_at(buf, r_off + ints[a, 0, 0], ints[a, 0, 1], ints[a, 0, 2]) if ints[a, 0, 1] else 0
                    a1 = _int_at(buf, r_off + ints[a, 1, 0], ints[a, 1, 1], ints[a, 1, 2]) if ints[a, 1, 1] else 0
                    a2 = _int_at(buf, r_off + ints[a, 2, 0], ints[a, 2, 1], ints[a, 2, 2]) if ints[a, 2, 1] else 0
                    if preempt[a]:
                        a2 = switch_state(a2, preempt[a])
                    c0 = -1
                    c1 = -1
                    if strs[a, 0, 1]:
                        start, n = comm_span(buf, r_off, r_len, strs[a, 0, 0], strs[a, 0, 1], strs[a, 0, 2])
                        c0 = intern_at(buf, start, n, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used)
                    if strs[a, 1, 1]:
                        start, n = comm_span(buf, r_off, r_len, strs[a, 1, 0], strs[a, 1, 1], strs[a, 1, 2])
                        c1 = intern_at(buf, start, n, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used)
                    row = rank[j] if rank.shape[0] else j  # empty rank: already in time order
                    o_t[row] = s_time
                    o_cpu[row] = s_cpu
                    o_pid[row] = s_pid
                    o_tid[row] = s_tid
                    o_kind[row] = kind
                    o_a0[row] = a0
                    o_a1[row] = a1
                    o_a2[row] = a2
                    o_c0[row] = c0 * n_tags + tag if c0 >= 0 else -1
                    o_c1[row] = c1 * n_tags + tag if c1 >= 0 else -1
                    j += 1
        if code == 0:
            i += size
    return i, j, code, at, event, value


def _decompress(buf: np.ndarray, start: int, end: int, path: str) -> tuple[np.ndarray, bool]:
    """The records inside PERF_RECORD_COMPRESSED payloads (one zstd stream), concatenated, and whether
    the last PERF_RECORD_COMPRESSED is as large as perf makes them (its compressor's output was full)."""
    dec = _decompressor(path)
    parts = []
    last_full = False
    for i, size, payload in _compressed_records(buf[start:end]):
        if payload is not None:
            parts.append(_inflate(dec, payload, path, start + i))
            last_full = size == COMPRESSED_MAX
    return np.frombuffer(b"".join(parts), dtype=np.uint8), last_full


def _compressed_records(buf: np.ndarray):
    """(offset, size, payload) of each whole record from the start of `buf` (the payload of a
    PERF_RECORD_COMPRESSED, else None), as far as a record is cut by its end (or has size 0)."""
    i = 0
    while i + 8 <= len(buf):
        size = int(buf[i + 6]) | int(buf[i + 7]) << 8
        if size == 0 or i + size > len(buf):
            return
        typ = int(buf[i]) | int(buf[i + 1]) << 8 | int(buf[i + 2]) << 16 | int(buf[i + 3]) << 24
        yield i, size, buf[i + 8:i + size] if typ == REC_COMPRESSED else None
        i += size


def _decompressor(path: str):
    """One zstd stream's decompressor (perf record -z writes one stream across its records)."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency; say what to do if it is missing
        raise UserError(f"{path} is compressed (perf record -z); install the zstandard package "
                        "or record without -z") from None
    return zstandard.ZstdDecompressor().decompressobj()


def _inflate(dec, payload: np.ndarray, path: str, at: int) -> bytes:
    """One PERF_RECORD_COMPRESSED's payload through the stream's decompressor."""
    import zstandard

    try:
        return dec.decompress(payload.tobytes())
    except zstandard.ZstdError as exc:
        raise _err(path, at, f"compressed record does not decompress ({exc})") from None


WINDOW = 32 << 20  # bytes of the data section read at a time, per thread
_NO_MORE = np.zeros(0, np.int64)  # `_index` without its `more`


@contextlib.contextmanager
def _opened(path: str):
    """(size, get(offset, n), window(pos, n, scratch)) of the file at `path`, open until the exit."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise TraceFormatError(f"{path}: empty file")

        def read(pos: int, n: int, scratch: np.ndarray) -> np.ndarray:
            """The window mapped, not copied (a copy cost ~40 ns/event over both passes); the file
            is read into `scratch` if it has shrunk since, where a mapping would fault."""
            if n < MAP_BYTES or pos + n > os.fstat(fd).st_size:  # (small: a copy is cheaper than a mapping)
                return scratch[:os.preadv(fd, [memoryview(scratch)[:n]], pos)]
            return mapped(fd, pos, n)

        yield size, (lambda off, n: os.pread(fd, n, off)), read
    finally:
        os.close(fd)


def read_perf_data(path: str | os.PathLike, threads: int | None = None, window: int = WINDOW,
                   progress=None, between: tuple | None = None) -> RawEvents:
    """RawEvents from a perf.data file of tracepoint samples (see the module docstring), read
    `window` bytes at a time (at least 64 KiB, the largest record) by `threads` threads (default:
    one per CPU this process may use). `progress(done_bytes, total_bytes, stage)` follows each pass.
    `between` (T0, T1): only the events at T0 <= time < T1 and those of the context before T0
    (`parts.PART_CONTEXT_NS`), times from the first event ("1.5s") or absolute ns; memory then
    follows those events, not the file."""
    path = os.fspath(path)
    with _opened(path) as (size, get, read):
        info = _header(get, size, path)
        return _read(info, path, read, lambda: np.fromfile(path, np.uint8, info.data_size, offset=info.data_offset),
                     threads, window, progress, between)


def parse_perf_data(data: bytes, name: str = "<bytes>", threads: int | None = None, window: int = WINDOW) -> RawEvents:
    """RawEvents from the bytes of a perf.data (`name` is used in error messages)."""
    info = read_header(data, name)
    buf = np.frombuffer(data, dtype=np.uint8)
    return _read(info, name, lambda pos, n, scratch: buf[pos:pos + n],
                 lambda: buf[info.data_offset:info.data_offset + info.data_size], threads, window)


class _Scan:
    """A data section read `window_bytes` at a time, with what both passes need to read its
    samples (the events' ids, layouts and decode table): `check` is the first pass, `decode` the
    second. Shared by the whole read (`_read`) and the windowed one (`PerfDataWindows`)."""

    def __init__(self, info: PerfData, path: str, window, whole, window_bytes: int, spill_z: bool = False):
        attrs = info.attrs
        self.info, self.path, self.window, self.whole = info, path, window, whole
        self.spill_z, self.z_file = spill_z, None  # -z: decompressed to a temporary file, not held
        self.sample_types = np.array([a.sample_type for a in attrs], np.uint64).view(np.int64)
        self.read_formats = np.array([a.read_format for a in attrs], np.uint64).view(np.int64)
        if len(attrs) > 1 and not np.all(self.sample_types & S_IDENTIFIER):
            raise _err(path, 24, "several events whose samples carry no PERF_SAMPLE_IDENTIFIER (perf before 3.12?): "
                       "cannot tell which event a sample belongs to")
        self.layout = np.array([sample_layout(a.sample_type, a.read_format) for a in attrs], np.int64).reshape(-1, 5)
        pairs = sorted((i, k) for k, a in enumerate(attrs) for i in a.ids)
        self.ids = np.array([p[0] for p in pairs], np.uint64)
        self.id_attr = np.array([p[1] for p in pairs], np.int64)
        self.id_keys, self.id_events = id_table(self.ids, self.id_attr)
        if len(self.sample_types) > 1 and len(self.ids) == 0:
            raise _err(path, 24, "several events but no sample ids")
        # each event's row in the decode table: its tracepoint format, if it is one we decode
        formats = [info.formats.get(at.config) if at.type == PERF_TYPE_TRACEPOINT and at.sample_type & S_RAW else None
                   for at in attrs]
        try:
            self.table = decode_table(formats)
        except TraceFormatError as exc:
            raise _err(path, info.tracing_offset, f"tracing data: {exc}") from None
        self.cpus = int((info.features.get("nr_cpus") or {}).get("available") or 0)
        # a corrupt CPU field would size per-CPU tables
        self.max_cpu = min(self.cpus, MAX_CPUS) if self.cpus > 0 else MAX_CPUS
        fixed = 0x103CF  # the 8-byte fields a sample may start with (IDENTIFIER, IP, TID, TIME, ... PERIOD)
        self.min_sample = 8 + 8 * min(bin(int(st) & fixed).count("1") for st in self.sample_types)
        self.start, self.end, self.inside = info.data_offset, info.data_offset + info.data_size, ""
        window_bytes = max(int(window_bytes), 1 << 16)  # a window holds the largest record (u16 size)
        self.step = min(window_bytes, max(self.end - self.start, 1))  # bytes read at a time
        self.open_tail = False  # perf record -z: the stream may end inside a record (check)
        self.partial = 0  # bytes of such a record, not read

    def most_events(self) -> int:
        """The most samples to decode the data section can hold, from its size and the fewest bytes
        such a sample has (its event's fixed fields, raw size and the decoded fields' end: a shorter
        one is refused), without reading a record; a `perf record -z` section is not bounded."""
        if self.info.features.get("compressed") is not None:
            return 1 << 62
        least = [(self.layout[a, 4] if self.layout[a, 0] != _VARIABLE else self.min_sample + 4) + self.table.min_len[a]
                 for a in range(len(self.sample_types)) if self.table.kind[a] != 0 and self.sample_types[a] & S_RAW]
        return -(-(self.end - self.start) // int(min(least))) if least else 0

    def index(self, buf: np.ndarray, last: bool, lo: int, hi: int, t: np.ndarray, j: int, counts: np.ndarray,
              more: np.ndarray = _NO_MORE) -> tuple[int, int, int, int]:
        """`_index` over buf by this file's tables."""
        return _index(readonly(buf), len(buf), last, self.ids, self.id_attr, self.id_keys, self.id_events, self.sample_types,
                      self.read_formats, self.layout, self.table.kind, lo, hi, t, j, counts, more,
                      self.table.min_len, self.max_cpu)

    def check(self, lo: int, hi: int, sketch: _Sketch | None = None, progress=None):
        """The first pass: every record checked, (counts, spans, t, n) with `_index`'s counts, the
        (file offset, bytes, first sample) of each window read, and the times of the n samples at
        lo <= time < hi in t[:n] in file order; with a `sketch`, t holds one window's times at a
        time, and the sketch keeps what it needs of them. Runs again over the records before a
        partial last record of a -z stream, and over the records decompressed from a -z file."""
        while True:
            scratch = np.empty(self.step, np.uint8)
            # times sized for the most samples the bytes could hold: pages never written are never
            # committed, so memory follows the samples found, not this bound
            room = (self.end - self.start if sketch is None else self.step) // max(self.min_sample, 8) + 1
            t = np.empty(room, np.int64)
            counts = np.array([0, 0, 0, 0, 0, _ALL[1], _ALL[0]], np.int64)
            more = sketch.start() if sketch is not None else _NO_MORE
            spans = []  # (file offset, bytes, first sample) of each window
            n, pos = 0, self.start
            while pos < self.end:
                buf = self.window(pos, min(len(scratch), self.end - pos), scratch)
                if len(buf) == 0:
                    raise _err(self.path, pos, "the file ends inside its data section")
                first = n
                j, used, code, at = self.index(buf, pos + len(buf) >= self.end, lo, hi, t,
                                               n if sketch is None else 0, counts, more)
                if code == 2 and self.open_tail and self.end - (pos + at) <= COMPRESSED_MAX:
                    # perf's compressor (zstd_compress_stream_to_records) stops once its input is taken, with
                    # the rest of a flush that did not fit a full-size record still inside it for the next
                    # record; after the last one that never comes, and the stream ends inside a record (seen
                    # with `perf record -z` of a busy program on a loaded machine). perf script keeps such a
                    # partial record for the next compressed record and so never reads it: neither do we.
                    # Only after a full-size last record, and in the last record's bytes (u16 sizes).
                    self.partial = self.end - (pos + at)
                    self.end, self.open_tail = pos + at, False
                    break
                if code not in (0, _MORE):
                    raise _err(self.path, pos + at, _ERR[code] + self.inside)
                if sketch is None:
                    n = j
                else:
                    sketch.span(pos, t[:j], first)
                    n += j
                spans.append((pos, used, first))
                pos += used
                if progress is not None:
                    progress(pos - self.start, self.end - self.start,
                             "checking records" + (" (decompressed)" if self.inside else ""))
            else:
                self.open_tail = False
            if pos < self.end:  # cut before a partial last record: the pass again over the records before it
                continue
            if counts[3] and not self.inside:  # `perf record -z`: the records are inside
                if self.spill_z:
                    size, self.open_tail, self.window = self._decompressed_file(progress)
                else:
                    data, self.open_tail = _decompress(self.whole(), 0, self.info.data_size, self.path)
                    size, self.window = len(data), lambda pos, n, scratch, data=data: data[pos:pos + n]
                self.start, self.end, self.inside = 0, size, " (offset inside the decompressed data)"
                continue
            return counts, spans, t, n

    def _decompressed_file(self, progress=None):
        """`_decompress` of the data section read a window at a time into an unnamed temporary file
        (gone when closed; kept open by this scan): (its size, whether the last compressed record
        was full-size, a reader of it as `window` reads the file)."""
        out = tempfile.TemporaryFile(prefix="scalestack-z-")
        self.z_file = out
        dec, size, last_full = _decompressor(self.path), 0, False
        scratch = np.empty(self.step, np.uint8)
        start, end = self.info.data_offset, self.info.data_offset + self.info.data_size
        pos = start
        while pos < end:
            buf = self.window(pos, min(len(scratch), end - pos), scratch)
            used = 0
            for i, n, payload in _compressed_records(buf):
                if payload is not None:
                    size += out.write(_inflate(dec, payload, self.path, pos + i))
                    last_full = n == COMPRESSED_MAX
                used = i + n
            if used == 0:
                raise _err(self.path, pos, "the file ends inside its data section")
            pos += used
            if progress is not None:
                progress(pos - start, end - start, "decompressing records")
        out.flush()
        fd = out.fileno()

        def read(pos: int, n: int, scratch: np.ndarray) -> np.ndarray:
            got = os.preadv(fd, [memoryview(scratch)[:n]], pos)
            return scratch[:got]
        return size, last_full, read

    def refusal(self, code: int, a: int, value: int) -> str:
        """What is wrong with a sample `_decode_window` refused (_SHORT, _WILD_CPU) of event a."""
        names = self.table.names
        if code == _SHORT:
            return (f"a {names[a]} sample has {value} bytes of tracepoint data, its format "
                    f"needs {int(self.table.min_len[a])}{self.inside}")
        limit = f"the machine had {self.cpus} CPUs" if self.cpus > 0 else f"no Linux machine has more than {MAX_CPUS}"
        return f"a {names[a]} sample names CPU {value}, but {limit}{self.inside}"

    def decode(self, window, spans: list, rank: np.ndarray, n: int, lo: int, hi: int, threads: int | None,
               progress=None) -> RawEvents:
        """The second pass: the n samples at lo <= time < hi of `spans` ((offset, bytes, first
        sample) each), the j-th into row rank[j] (`_rows`), decoded by `window(pos, n, scratch)`
        on `threads` threads sharing out the spans. The RawEvents have no stats yet."""
        table = self.table
        cols = [np.empty(n, dt) for dt in (np.int64, np.int32, np.int32, np.int32, np.uint8, np.int64, np.int64,
                                           np.int64, np.int32, np.int32)]
        n_threads = thread_count(len(spans), threads)
        tables = [Strings() for _ in range(n_threads)]
        errors: list[tuple[int, str]] = []
        done, lock = [0], threading.Lock()

        def decode(k: int) -> None:
            own = np.empty(self.step, np.uint8) if spans else None
            for pos, nbytes, j in spans[k::n_threads]:
                buf = readonly(window(pos, nbytes, own))
                i = 0
                while True:
                    i, j, code, at, a, value = _decode_window(
                        buf, i, len(buf), j, rank, self.ids, self.id_attr, self.id_keys, self.id_events,
                        self.sample_types, self.read_formats, self.layout, table.kind, table.ints, table.strs,
                        table.preempt, table.min_len, self.max_cpu, lo, hi, *cols, *tables[k].arrays(), k, n_threads)
                    if code != _GROW:
                        break
                    tables[k].grow()
                if code in (_SHORT, _WILD_CPU):
                    errors.append((pos + at, self.refusal(code, a, value)))
                    return
                if progress is not None:
                    with lock:
                        done[0] += nbytes
                        progress(done[0], self.end - self.start, "decoding events")

        on_threads(n_threads, decode)
        if errors:
            at, what = min(errors)
            raise _err(self.path, at, what)
        comms = shared_strings(tables, cols[8], cols[9])
        names = ("time", "cpu", "pid", "tid", "kind", "arg0", "arg1", "arg2", "comm0", "comm1")
        ev = RawEvents(**dict(zip(names, cols, strict=True)))
        ev.comms = comms
        return ev

    def stats(self, counts: np.ndarray) -> dict:
        """The RawEvents' stats: what the first pass counted, and the header's features."""
        stats = {"lost_events": int(counts[0]), "lost_samples": int(counts[1]), "unknown_events": int(counts[4]),
                 "sideband_records": int(counts[2]), "source_format": "perf-data", **self.info.features}
        if self.partial:
            stats["partial_record_bytes"] = self.partial
        return stats


def _rows(t: np.ndarray, n: int) -> np.ndarray:
    """Each of the times t[:n]'s row in time order, written over t (`rank_by_time`), in 4 bytes
    when they fit (beside the events' 53 bytes through the decode: -0.4 GB at 10^8)."""
    rank = rank_by_time(t[:n])
    if n < 2**31 - 1:  # (empty, too: one compiled decoder for both)
        rank = rank.astype(np.int32)
    return rank


def _read(info: PerfData, path: str, window, whole, threads: int | None, window_bytes: int,
          progress=None, between: tuple | None = None) -> RawEvents:
    """Two passes over the data section, `window(pos, n, scratch)` bytes at a time: the first
    checks every record and notes the decoded samples' times, so each sample's row in time order
    is known before the second pass decodes it there, window by window, on every core. For
    `perf record -z` both passes run over the records decompressed from `whole()`."""
    scan = _Scan(info, path, window, whole, window_bytes)
    lo, hi = _ALL
    zero = int((info.features.get("sample_time") or [0])[0]) if between is not None else 0
    if zero > 0:  # perf's header gives the first sample's time
        lo, hi = part_bounds(between, zero)
    counts, spans, t, n = scan.check(part_read_from(lo), hi, progress=progress)
    if between is not None and zero <= 0:  # no time in the header: this pass found the first event's
        if counts[5] > counts[6]:
            raise UserError(f"{path} holds no scheduler events")
        lo, hi = part_bounds(between, int(counts[5]))
        del t
        counts, spans, t, n = scan.check(part_read_from(lo), hi, progress=progress)  # again, the part's times only
    in_part = int(np.count_nonzero(t[:n] >= lo)) if between is not None else n
    rank = _rows(t, n)  # t's memory now holds each sample's row
    del t
    ev = scan.decode(scan.window, spans, rank, n, part_read_from(lo), hi, threads, progress)
    ev.stats = scan.stats(counts)
    if between is not None:
        ev.stats.update(part_stats(between, lo, hi, int(counts[5]), int(counts[6]), in_part, path))
    return ev


class _Sketch:
    """What the windowed reader's first pass keeps of the samples' times instead of an array of
    them all: each span's sample count and time range, every `every`-th time in file order (to
    plan windows from: ~1/8 byte a sample at 64), and `_index`'s `more` for `events` events."""

    def __init__(self, events: int, every: int):
        self.events, self.every = events, every

    def start(self) -> np.ndarray:
        """Forget an earlier pass (the first pass runs again); the `more` array for `_index`."""
        self.count, self.lo, self.hi, self.times = [], [], [], []
        self.refused: tuple[int, int, int, int] | None = None  # (byte, code, event, value)
        self.more = np.zeros(self.events + 5, np.int64)
        self.more[self.events] = -1
        return self.more

    def span(self, pos: int, t: np.ndarray, first: int) -> None:
        """The times t of the span at byte `pos`, the first the `first`-th sample of the pass."""
        self.count.append(len(t))
        self.lo.append(int(t.min()) if len(t) else 0)
        self.hi.append(int(t.max()) if len(t) else -1)
        self.times.append(t[-first % self.every::self.every].copy())  # t is the next span's too
        code, at, a, value = self.more[self.events + 1:].tolist()
        if code and self.refused is None:
            self.refused = (pos + at, code, a, value)


class PerfDataWindows:
    """A perf.data read as RawEvents windows in time order, memory bounded by a window (see
    `read_perf_data_windows`). Known after the first pass: `stats` (as `read_perf_data`'s),
    `events` (samples decoded), `first_ns`, `last_ns` (their first and last time; None when there
    are none), `max_cpu` (the largest CPU of a sample, -1 when none says) and `kinds` (Kind ->
    samples, counted per event in the first pass from the decode table's kind of each).
    Iterating reads the windows: each holds the samples at lo <= time < hi (`stats["window_ns"]`,
    the first from -2**63, the last to 2**63 - 1), consecutive, at most `max_rows` samples unless
    they all share one time (one time's samples are never split). Each iteration reads the file
    again, window by window."""

    def __init__(self, scan: _Scan, max_rows: int, threads: int | None, progress, source):
        if int(max_rows) < 1:
            raise UserError(f"max_rows must be at least 1, not {max_rows}")
        self.max_rows, self.threads, self._progress = int(max_rows), threads, progress
        every = max(1, min(64, self.max_rows // 16))  # a window is planned from ~16 or more kept times
        sketch = _Sketch(len(scan.sample_types), every)
        counts, spans, t, _ = scan.check(*_ALL, sketch, progress)
        del t
        if sketch.refused is not None:  # what read_perf_data's decode would refuse, after every record checks
            at, code, a, value = sketch.refused
            raise _err(scan.path, at, scan.refusal(code, a, value))
        self._scan = scan
        # the windows read the decompressed records of a -z file (their temporary file), else the file again
        self._source = (lambda: contextlib.nullcontext(scan.window)) if scan.inside else source
        self.stats = scan.stats(counts)
        self._spans = ([p for p, _, _ in spans], [u for _, u, _ in spans], np.array(sketch.count, np.int64),
                       np.array(sketch.lo, np.int64), np.array(sketch.hi, np.int64))
        count, lo, hi = self._spans[2:]
        self.events = int(count.sum())
        self.first_ns = int(lo[count > 0].min()) if self.events else None
        self.last_ns = int(hi[count > 0].max()) if self.events else None
        more = sketch.more
        self.max_cpu = int(more[len(scan.sample_types)])
        per_kind = np.zeros(256, np.int64)
        np.add.at(per_kind, scan.table.kind.astype(np.int64), more[:len(scan.sample_types)])
        self.kinds = {Kind(k): int(per_kind[k]) for k in np.flatnonzero(per_kind)}
        self._times = np.sort(np.concatenate([np.zeros(0, np.int64), *sketch.times]))
        self._every, self._ahead = every, max(1, self.max_rows // every)
        self._ends: dict[int, int] = {}  # a window's start -> its end, once a reading has cut it

    def _bound(self, lo: int) -> int:
        """Where the window from lo ends: after about max_rows samples by the kept times, after
        the next time that differs from lo at least, and at the end of time after the last."""
        s = self._times
        q = int(np.searchsorted(s, lo, "left")) + self._ahead
        if q >= len(s):
            return _ALL[1]
        if s[q] > lo:
            return int(s[q])
        r = int(np.searchsorted(s, lo, "right"))  # the kept times from lo to q are all lo
        return int(s[r]) if r < len(s) else _ALL[1]

    def _index(self, window, scratch: np.ndarray, lo: int, hi: int) -> tuple[list, np.ndarray, int]:
        """The spans with samples at lo <= time < hi, (offset, bytes, first sample) each as
        `_Scan.decode` takes them, and those samples' times in file order, t[:n]; only the spans
        whose time range meets [lo, hi) are read, shared out among threads as the decoding's are
        (each span's times in an array of its own, joined in file order)."""
        pos, used, count, tmin, tmax = self._spans
        meets = np.flatnonzero((count > 0) & (tmin < hi) & (tmax >= lo)).tolist()
        found: list[np.ndarray | None] = [None] * len(meets)
        n_threads = thread_count(len(meets), self.threads)

        def index(k: int) -> None:
            own = scratch if k == 0 else np.empty(len(scratch), np.uint8)
            counts = np.array([0, 0, 0, 0, 0, _ALL[1], _ALL[0]], np.int64)  # the first pass has them
            for i in range(k, len(meets), n_threads):
                s = meets[i]
                buf = window(pos[s], used[s], own)
                t = np.empty(int(count[s]), np.int64)
                j, _, code, at = self._scan.index(buf, True, lo, hi, t, 0, counts)
                if len(buf) < used[s] or code:  # the file changed since the first pass
                    raise _err(self._scan.path, pos[s] + max(at, 0), "the data section changed while it was read")
                found[i] = t[:j]

        on_threads(n_threads, index)
        spans, n = [], 0
        for s, t in zip(meets, found, strict=True):
            if len(t):
                spans.append((pos[s], used[s], n))
                n += len(t)
        t = np.concatenate([np.zeros(0, np.int64), *found])
        return spans, t, n

    def _cut(self, spans: list, t: np.ndarray, n: int, hi: int) -> tuple[int, list, np.ndarray, int]:
        """A window of more than max_rows samples ended before its (max_rows + 1)-th earliest
        time, or, when its max_rows + 1 earliest share one time, after that time's samples (all
        of them): (hi, spans, t, n) of what is left, in `_index`'s form."""
        k = self.max_rows
        part = np.partition(t[:n], k)
        v = part[k]
        if part[:k].min() < v:
            cut = int(v)
        else:
            above = part[k + 1:][part[k + 1:] > v]
            cut = int(above.min()) if len(above) else hi
        del part
        if cut >= hi:
            return hi, spans, t, n
        keep = t[:n] < cut
        kept = np.add.reduceat(keep, [f for _, _, f in spans], dtype=np.int64)
        firsts = np.cumsum(kept) - kept
        spans = [(p, u, int(f)) for (p, u, _), f, c in zip(spans, firsts, kept, strict=True) if c]
        t = t[:n][keep]
        return cut, spans, t, len(t)

    def __iter__(self):
        with self._source() as window:
            scratch = np.empty(self._scan.step, np.uint8)
            lo, done = _ALL[0], 0
            while lo < _ALL[1]:
                hi = self._ends.get(lo)  # (every reading gives the same windows: each is cut once)
                first = hi is None
                if first:
                    hi = self._bound(lo)
                spans, t, n = self._index(window, scratch, lo, hi)
                if first:
                    if n > self.max_rows:
                        hi, spans, t, n = self._cut(spans, t, n, hi)
                    self._ends[lo] = hi
                if n:
                    rank = _rows(t, n)
                    del t
                    ev = self._scan.decode(window, spans, rank, n, lo, hi, self.threads)
                    del rank
                    ev.stats = {**self.stats, "window_ns": [lo, hi]}
                    done += n
                    if self._progress is not None:
                        self._progress(done, self.events, "decoding windows")
                    yield ev
                    del ev  # the caller's to keep: not held while the next window is read
                lo = hi


SPAN = WINDOW // 4  # the windowed reader's bytes read at a time: spans of shorter stretches of time


def read_perf_data_windows(path: str | os.PathLike, max_rows: int = 1_000_000, threads: int | None = None,
                           window: int = SPAN, progress=None) -> PerfDataWindows:
    """A perf.data file as RawEvents windows in time order of at most about `max_rows` events
    each (see `PerfDataWindows`), which concatenated (`trace.events.concat_events`) equal
    `read_perf_data(path)`, for a file whose events memory cannot hold at once.

    The first pass checks every record as `read_perf_data`'s does (same errors, raised here) and
    keeps per `window`-byte span its samples' count and time range, and every 64th time (every
    max_rows / 16th when that is fewer) to plan the windows from; no array per event. Each window
    then reads again only the spans whose time range meets it (perf writes its per-CPU buffers in
    rounds, so a span covers a short stretch of time), notes their samples in the window, ranks
    them by time (stable: ties keep file order) and decodes them, on `threads` threads as
    `read_perf_data` does. Memory: ~70 bytes per event of one window, plus ~1/8 byte per event
    and a few per span. A `perf record -z` file's records are decompressed once, a window at a
    time, into an unnamed temporary file (the zstd stream cannot be entered in the middle), which
    the windows read as they read a plain file. `progress(done, total, stage)` follows the
    first pass (bytes) and the windows (events).

    Spans are 8 MB by default, not read_perf_data's 32: a window reads whole spans, so at its
    edges it reads bytes of the next one's (10^7 events in 10^6-event windows: 1.15 x the data
    section per later pass at 8 MB, 1.44 x at 32), and each thread maps one span at a time."""
    path = os.fspath(path)

    @contextlib.contextmanager
    def source():
        with _opened(path) as (_size, _get, read):
            yield read

    with _opened(path) as (size, get, read):
        info = _header(get, size, path)
        scan = _Scan(info, path, read, lambda: np.fromfile(path, np.uint8, info.data_size, offset=info.data_offset),
                     window, spill_z=True)
        return PerfDataWindows(scan, max_rows, threads, progress, source)


def parse_perf_data_windows(data: bytes, max_rows: int = 1_000_000, name: str = "<bytes>",
                            threads: int | None = None, window: int = SPAN) -> PerfDataWindows:
    """`read_perf_data_windows` of the bytes of a perf.data (`name` is used in error messages)."""
    info = read_header(data, name)
    buf = np.frombuffer(data, dtype=np.uint8)

    def read(pos: int, n: int, scratch: np.ndarray) -> np.ndarray:
        return buf[pos:pos + n]

    scan = _Scan(info, name, read, lambda: buf[info.data_offset:info.data_offset + info.data_size], window)
    return PerfDataWindows(scan, max_rows, threads, None, lambda: contextlib.nullcontext(read))


def load(path: str, *, pid: int | None = None, comm: str | None = None, progress=None,
         between: tuple | None = None, chunk_rows: int | None = None) -> Trace:
    """Import a system-wide perf.data as the Trace of the process tree of `pid` (or `comm`).

    `progress(done_bytes, total_bytes, stage)` is called as the stages start and end. With
    `between` (T0, T1) only that part of the recording is read (see `read_perf_data`). A recording
    of more than 4 `chunk_rows` events (default: of more than `windows.STREAM_EVENTS` events, in
    windows of `windows.WINDOW_EVENTS`; 0: never) is read in time windows of `chunk_rows` events, the trace built pass
    by pass (`trace.streaming`): memory then follows a window and the trace's rows, not the events
    (`import_file` writes the trace as it is built: not even its rows)."""
    size = os.path.getsize(path)
    if between is None:
        trace = _load_in_windows(path, pid, comm, progress, chunk_rows, size)
        if trace is not None:
            return trace
    extras = _Extras(path)
    events = read_events(path, extras.perf or "perf", reader="perf-data", progress=progress, between=between,
                         samples=extras.samples)  # perf: cross-check
    if progress is not None:  # the state builder follows
        progress(size, size, f"building the trace from {len(events):,} events")
    trace = build_part(events, pid=pid, comm=comm, meta=_meta(path, events.stats, extras))
    return extras.with_stacks(trace, path, between is not None, progress)


class _Extras:
    """What a recording holds beyond its tracepoints that only perf can read, and whether it is read:
    CPU samples (a software event that samples the instruction pointer, `perf record -e cpu-clock`;
    perf names their code) and call stacks (events recorded with callchains, `perf record -g` or
    `--call-graph dwarf`; perf unwinds and names them); each needs perf on this machine, else a warning
    says it was left out."""

    def __init__(self, path: str):
        with _opened(path) as (size, get, _read):
            attrs = _header(get, size, path).attrs
        self.perf = which("perf")
        sampling = [a for a in attrs if a.type == PERF_TYPE_SOFTWARE and a.config != PERF_COUNT_SW_DUMMY
                    and a.sample_type & S_IP]
        sampled = bool(sampling)
        clock = [a for a in sampling if a.config in CLOCK_EVENTS and a.period > 0]  # periods in ns, or a rate
        self.sample_hz = (float(clock[0].period) if clock[0].freq else 1e9 / clock[0].period) if clock else None
        chained = any(a.sample_type & S_CALLCHAIN for a in attrs)
        self.unwind = "dwarf" if any(a.sample_type & S_STACK_USER for a in attrs) else "fp"
        self.samples, self.stacks = sampled and self.perf is not None, chained and self.perf is not None
        self.notes = [f"the recording's {what} not read: `perf` (not found) {does}"
                      for there, what, does in ((sampled, "CPU samples were", "names their code"),
                                                (chained, "call stacks were", "unwinds them"))
                      if there and self.perf is None]

    def with_stacks(self, trace: Trace, path: str, part: bool, progress=None) -> Trace:
        """The trace with the recording's call stacks (`perf_stacks.read_stacks` of its processes), if
        it has them; of a part, the futex calls in the part only. Where perf cannot read them, the
        trace without them and a warning saying why (the user asked for the states, not the stacks)."""
        if not self.stacks:
            return trace
        from scalestack.ingest.perf_stacks import attach_stacks

        if progress is not None:
            size = os.path.getsize(path)
            progress(size, size, "reading the call stacks (perf script)")
        try:
            st = read_stacks_of(path, self.perf, np.unique(trace.threads.pid))
        except UserError as exc:  # the states stand without them: kept, with why the stacks are not
            return trace.with_meta(warnings=trace.warnings + [f"the recording's call stacks were not read: {exc}"])
        span = (trace.start_ns, trace.end_ns) if part else None
        return attach_stacks(trace, st, span).with_meta(stacks=self.unwind, stacks_read_by="perf script")


def read_stacks_of(path: str, perf: str, pids):
    """`perf_stacks.read_stacks` of processes `pids`, from a copy of the recording with their records
    only and without the maps each had before its last exec (`perf_data_copy`: with those, perf's
    DWARF unwinding of the C library fails for whole recordings); from `path` itself where no copy
    can be made (no space left, a `perf record -z` file)."""
    from scalestack.ingest.perf_stacks import read_stacks

    with tempfile.TemporaryDirectory(prefix="scalestack-stacks-") as tmp:
        readable = path
        if pids is not None and len(pids):
            copy = os.path.join(tmp, "perf.data")
            try:
                with _opened(path) as (size, get, _read):
                    info = _header(get, size, path)
                if copy_for_processes(path, copy, pids, info):
                    readable = copy
            except OSError:  # no room for the copy: perf reads the whole file
                pass
        return read_stacks(readable, perf, pids, named=path)


def _meta(path: str, st: dict, extras: _Extras) -> dict:
    samples = extras.samples
    meta = {"source": "perf-data", "input": os.path.abspath(path), "reader": "perf-data",
            "cores": (st.get("nr_cpus") or {}).get("online"), "kernel": st.get("os_release"),
            "host": st.get("hostname"), "perf_version": st.get("perf_version"), "recorded_with": st.get("cmdline"),
            "samples_read_by": "perf script" if samples else None,
            "sample_hz": extras.sample_hz if samples else None,
            "warnings": extras.notes or None}
    return {k: v for k, v in meta.items() if v is not None}


def import_file(path: str, output: str, *, pid: int | None = None, comm: str | None = None, progress=None,
                between: tuple | None = None, chunk_rows: int | None = None,
                finish_with: Callable[[Trace], Trace] | None = None, batch_rows: int | None = None) -> Trace:
    """`load` the recording and write its Trace at `output` (`finish_with(trace)` first, if given).
    A recording read in windows is written batch by batch of threads (`trace.streaming`), never
    held (`batch_rows`: see `build_trace_windows`): the Trace returned then has threads, names,
    samples and meta, no states or switch spans.
    A full device stops it in one line, with nothing written (`store.save_or_keep`: elsewhere)."""
    if between is None:
        try:
            small = _load_in_windows(path, pid, comm, progress, chunk_rows, os.path.getsize(path), output=output,
                                     finish_with=finish_with, batch_rows=batch_rows)
        except OSError as exc:
            if exc.errno not in FULL_DISK:  # the input read, or the output and its spills written
                raise UserError(f"cannot import {path} into {output}: {exc.strerror}"
                                + (f" ({exc.filename})" if exc.filename else "")) from None
            free = shutil.disk_usage(os.path.dirname(os.path.abspath(output))).free >> 20
            raise UserError(f"no space left on the device of {output} ({free} MB free) for the trace and the spills "
                            "it is built from; nothing was written: free space there or give -o on another device") from None
        if small is not None:
            return small
    trace = load(path, pid=pid, comm=comm, progress=progress, between=between, chunk_rows=0)
    if finish_with is not None:
        trace = finish_with(trace)
    save_or_keep(trace, output)
    return trace


def _load_in_windows(path: str, pid, comm, progress, chunk_rows: int | None, size: int, output: str | None = None,
                     finish_with=None, batch_rows: int | None = None) -> Trace | None:
    """`load` of a recording of more than 4 windows (written at `output`, if given: see
    `import_file`), or None to read it whole."""
    from scalestack.trace.streaming import build_trace_windows

    windows = windows_if_big(path, chunk_rows, progress)
    if windows is None:
        return None
    extras = _Extras(path)
    if extras.samples:
        windows = SampledWindows(windows, read_samples(path, extras.perf))

    def tell(done: int, total: int, stage: str) -> None:
        if progress is not None:
            progress(int(size * done / max(total, 1)), size, f"{stage}, {windows.events:,} events in windows")

    def finished(small: Trace, _times=None) -> Trace:  # (written as built: the trace of threads and meta)
        small = extras.with_stacks(small, path, False, progress)
        return small if finish_with is None else finish_with(small)

    trace = build_trace_windows(lambda: iter(windows), root_pids=[pid] if pid else None, comm=comm,
                                meta=_meta(path, windows.stats, extras), stats=windows.stats,
                                n_events=windows.events, progress=tell, output=output, finish_with=finished,
                                batch_rows=batch_rows)
    return trace if output is not None else extras.with_stacks(trace, path, False, progress)  # (held: not finished)


def windows_if_big(path: str, chunk_rows: int | None, progress=None) -> PerfDataWindows | None:
    """The recording in time windows (`read_perf_data_windows`) if it has more events than are read
    whole (`ingest.windows.streamed`), else None. A data section too small to hold that many
    (`_Scan.most_events`) is not scanned; `progress` follows the scan."""
    with _opened(path) as (size, get, read):
        info = _header(get, size, path)
        most = _Scan(info, path, read, None, SPAN).most_events()
    rows = streamed(most, chunk_rows)
    if rows is None:
        return None
    checking = [progress is not None]  # the reader's first pass shows; its windows are the builder's passes

    def check(done: int, total: int, stage: str) -> None:
        if checking[0]:
            progress(done, total, stage)

    windows = read_perf_data_windows(path, max_rows=rows, progress=check)
    checking[0] = False
    return windows if streamed(windows.events, chunk_rows) is not None else None


LOST_RE = re.compile(r"lost (\d+) chunks", re.I)


def read_events(perf_data: str, perf: str, reader: str = "auto", samples: bool = False, progress=None,
                between: tuple | None = None) -> RawEvents:
    """RawEvents from a perf.data file, by the direct reader (default) or via `perf script` text.

    Samples need perf's symbol resolution: with `samples`, they alone are read as text
    (`read_samples`) and merged with the events the direct reader decodes (all as text for
    `between` or reader="perf-script"). With
    SCALESTACK_CHECK_READERS=1 in the environment (the test suite sets it) every file is read
    both ways and any difference is an error: the two readers are proven equal on every
    recording the tests make.
    """
    if samples and between is not None:
        reader = "perf-script"
    if reader not in ("auto", "perf-data", "perf-script"):
        raise UserError(f"unknown reader {reader!r}; choose perf-data or perf-script")
    if reader == "perf-script":
        return events_between(_read_text(perf_data, perf, samples), between, perf_data)
    events = read_perf_data(perf_data, progress=progress, between=between)
    if os.environ.get("SCALESTACK_CHECK_READERS") == "1":
        text = _read_text(perf_data, perf, False)
        if between is not None:
            text = events_between(text, tuple(events.stats["between_ns"]), perf_data)
        if not events.equals(text) or events.stats["lost_events"] != text.stats["lost_events"]:
            raise RuntimeError(f"the perf.data reader and perf script disagree on {perf_data} "
                               f"({len(events)} vs {len(text)} events)")
    if not samples:
        return events
    events = with_samples(events, read_samples(perf_data, perf))
    if os.environ.get("SCALESTACK_CHECK_READERS") == "1" and not _same_rows(events, _read_text(perf_data, perf, True)):
        raise RuntimeError(f"the events and samples of {perf_data} differ from perf script's text of both")
    return events


def _same_rows(a: RawEvents, b: RawEvents) -> bool:
    """The same rows, in any order among those of one ns (perf script's order of a sample and a
    tracepoint of the same ns is its own)."""
    if len(a) != len(b):
        return False

    def canonical(e):
        return e.take(np.lexsort((e.arg2, e.arg1, e.arg0, e.cpu, e.tid, e.kind, e.time)))
    return canonical(a).equals(canonical(b))


def read_samples(perf_data: str, perf: str) -> RawEvents:
    """The CPU samples of a recording (cpu-clock, ...), their symbols resolved by `perf script`,
    which alone can: its text of the software events only (`-F trace:` prints no tracepoint,
    which the direct reader decodes 20-30x faster), parsed; time-sorted."""
    events = _script_text(perf_data, perf, ["-F", "trace:", "-F", SAMPLE_FIELDS, "-G"])
    return events.take(np.flatnonzero(events.kind == Kind.SAMPLE))


SAMPLE_FIELDS = "sw:comm,pid,tid,cpu,time,event,ip,sym,symoff,dso"


def with_samples(events: RawEvents, samples: RawEvents) -> RawEvents:
    """The (time-sorted) events with the (time-sorted) samples among them, each sample after the
    events of its ns; the samples' strings added to the events' table. A merge, not a sort."""
    if len(samples) == 0:
        return events
    comms = list(events.comms)
    index = {c: i for i, c in enumerate(comms)}
    lut = np.full(len(samples.comms) + 1, -1, np.int32)  # (the last: comm id -1, none)
    for k, c in enumerate(samples.comms):
        lut[k] = index.setdefault(c, len(comms))
        if lut[k] == len(comms):
            comms.append(c)
    at = np.searchsorted(events.time, samples.time, "right") + np.arange(len(samples))
    is_sample = np.zeros(len(events) + len(samples), bool)
    is_sample[at] = True
    cols = {}
    for name in COLUMNS:
        mine = getattr(events, name)
        theirs = lut[samples.comm0] if name == "comm0" else lut[samples.comm1] if name == "comm1" else \
            getattr(samples, name)
        col = np.empty(len(is_sample), mine.dtype)
        col[is_sample] = theirs
        col[~is_sample] = mine
        cols[name] = col
    return RawEvents(**cols, comms=comms, stats=dict(events.stats))


class SampledWindows:
    """`PerfDataWindows` with a recording's samples (`read_samples`, held: a few per ms of CPU)
    among each window's events: those after the window before and before the window's end; any
    after the last window come as a window of their own."""

    def __init__(self, windows: PerfDataWindows, samples: RawEvents):
        self.windows, self.samples = windows, samples
        self.events = windows.events + len(samples)

    @property
    def stats(self) -> dict:
        return self.windows.stats

    def __iter__(self):
        t, a, hi = self.samples.time, 0, _ALL[0]
        for w in self.windows:
            hi = w.stats["window_ns"][1]
            b = int(np.searchsorted(t, hi, "left"))
            yield with_samples(w, self.samples.take(np.arange(a, b)))
            a = b
        if a < len(t):  # after the last window's end (the time from there is theirs)
            rest = self.samples.take(np.arange(a, len(t)))
            rest.stats = {**self.stats, "window_ns": [hi, _ALL[1]]}
            yield rest


def _read_text(perf_data: str, perf: str, samples: bool) -> RawEvents:
    fields = ["-F", "trace:comm,pid,tid,cpu,time,event,trace", "-G"]  # -G: callchains are read elsewhere
    return _script_text(perf_data, perf, fields + (["-F", SAMPLE_FIELDS] if samples else []))


def _script_text(perf_data: str, perf: str, fields: list[str]) -> RawEvents:
    """`perf script` of the recording with these fields (through a file), parsed; perf's count of
    lost chunks in the stats."""
    from scalestack.ingest.perf_script import parse_perf_script

    with tempfile.TemporaryDirectory(prefix="scalestack-") as tmp:
        text = os.path.join(tmp, "perf.txt")
        with open(text, "wb") as fh:
            proc = subprocess.run(
                [perf, "script", "-i", perf_data, "--show-lost-events", *fields, "--ns"],
                stdout=fh, stderr=subprocess.PIPE,
            )
        if proc.returncode != 0:
            raise UserError(f"`perf script` failed on {perf_data}: {last_line(proc.stderr)}")
        events = parse_perf_script(text)
    lost = LOST_RE.findall(proc.stderr.decode("utf-8", "replace"))
    if lost:
        events.stats["lost_chunks"] = sum(int(x) for x in lost)
    return events
