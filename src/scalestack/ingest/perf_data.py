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
2. One compiled walk over the record headers of the data section finds each
   PERF_RECORD_SAMPLE's id, pid/tid, time, cpu and raw tracepoint payload, following the
   sample_type of the event it belongs to, and sums LOST / LOST_SAMPLES. It runs twice: once
   to count, once to fill arrays of exactly that size. ``perf record -z`` data
   (PERF_RECORD_COMPRESSED, one zstd stream) is decompressed first and walked the same way.
3. One compiled pass decodes every payload by its event's format
   (`scalestack.ingest.tracepoint.decode_records`, shared with the tracefs reader); one stable
   time sort puts the per-CPU buffers in order.

The RawEvents equal those of the perf-script text path (same rows, same order), which a
test checks on real recordings. Side-band records (COMM, FORK, MMAP of perf's dummy event) and
non-tracepoint samples are counted in ``stats`` and skipped, as the text path skips them.
Bad input gives one `TraceFormatError` line with the byte offset.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import re
import struct
import subprocess
import tempfile

import numba
import numpy as np

from scalestack.errors import TraceFormatError, UserError
from scalestack.ingest.tracepoint import (
    EventFormat,
    decode_records,
    decode_table,
    le_u32,
    parse_format,
)
from scalestack.tools import last_line, which
from scalestack.trace import Trace
from scalestack.trace.events import MAX_CPUS, RawEvents

MAGIC = b"PERFILE2"
MAGIC_SWAPPED = b"2ELIFREP"
HEADER_SIZE = 104
PERF_TYPE_TRACEPOINT = 2
FEAT_TRACING_DATA = 1
FEAT_BITS = 256
_FEATURE_NAMES = {3: "hostname", 4: "os_release", 5: "perf_version", 6: "arch", 7: "nr_cpus",
                  11: "cmdline", 23: "clockid", 27: "compressed"}

# sample_type bits (include/uapi/linux/perf_event.h), in the order fields appear in a sample
S_IP, S_TID, S_TIME, S_ADDR, S_READ, S_CALLCHAIN, S_ID, S_CPU, S_PERIOD, S_STREAM_ID, S_RAW = (
    1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10)
S_IDENTIFIER = 1 << 16
# read_format bits
R_TOTAL_TIME_ENABLED, R_TOTAL_TIME_RUNNING, R_ID, R_GROUP, R_LOST = 1, 2, 4, 8, 16
# record types
REC_LOST, REC_SAMPLE, REC_LOST_SAMPLES, REC_FINISHED_ROUND, REC_COMPRESSED = 2, 9, 13, 68, 81
REC_HEADER_ATTR = 64  # pipe-mode files carry their attrs as records

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
    size = len(buf)
    if size < 16 or bytes(buf[:8]) not in (MAGIC, MAGIC_SWAPPED):
        raise _err(path, 0, "no PERFILE2 magic (is it a perf.data file?)")
    if bytes(buf[:8]) == MAGIC_SWAPPED:
        raise TraceFormatError(f"{path}: byte 0 says big-endian perf.data; convert it on the machine that recorded it "
                               "(`perf script` there) and import the text")
    hdr_size = struct.unpack_from("<Q", buf, 8)[0]
    if hdr_size == 16:
        raise TraceFormatError(f"{path}: byte 8 says pipe-mode perf.data (`perf record -o -`); write it to a file with "
                               "`perf inject -i FILE -o perf.data` and import that")
    if hdr_size != HEADER_SIZE or size < HEADER_SIZE:
        raise _err(path, 8, f"header size {hdr_size}, expected {HEADER_SIZE}")
    attr_size, a_off, a_size, d_off, d_size = struct.unpack_from("<QQQQQ", buf, 16)
    feat_bits = int.from_bytes(bytes(buf[72:104]), "little")
    if attr_size < 80 or a_off + a_size > size or a_size % attr_size:
        raise _err(path, 24, f"attr section ({a_size} bytes at {a_off}, {attr_size} each) does not fit the file")
    attrs = []
    for k in range(a_size // attr_size):
        o = a_off + k * attr_size
        typ, _asz, config, _period, sample_type, read_format, flags = struct.unpack_from("<IIQQQQQ", buf, o)
        ids_off, ids_size = struct.unpack_from("<QQ", buf, o + attr_size - 16)
        if ids_off + ids_size > size or ids_size % 8:
            raise _err(path, o + attr_size - 16, "an event's id list does not fit the file")
        ids = tuple(struct.unpack_from(f"<{ids_size // 8}Q", buf, ids_off)) if ids_size else ()
        attrs.append(Attr(typ, config, sample_type, read_format, bool(flags >> 18 & 1), ids))
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
    for k, bit in enumerate(bits):
        f_off, f_size = struct.unpack_from("<QQ", buf, table + 16 * k)
        if f_off + f_size > size:
            raise _err(path, table + 16 * k, f"feature {bit} ({f_size} bytes at {f_off}) does not fit the file")
        if bit == FEAT_TRACING_DATA:
            formats = parse_tracing_data(bytes(buf[f_off:f_off + f_size]), f_off, path)
            tracing_offset = f_off
        elif bit in _FEATURE_NAMES:
            features[_FEATURE_NAMES[bit]] = _feature_value(bit, bytes(buf[f_off:f_off + f_size]))
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
        return le_u32(buf, i) | le_u32(buf, i + 4) << np.uint64(32)
    if n == 4:
        return le_u32(buf, i)
    return np.uint64(buf[i]) | np.uint64(buf[i + 1]) << np.uint64(8)


@numba.njit(cache=True)
def _walk(buf, start, end, fill, ids, id_attr, sample_types, read_formats, t, cpu, pid, tid, attr, roff, rlen):
    """Walk the records in buf[start:end]. Returns (n samples, lost, lost samples, other
    records, compressed records, error code, error offset). With fill=False only counts."""
    n = 0  # with fill, t, cpu, ... have room for every sample (the caller sizes them)
    lost = np.int64(0)
    lost_samples = np.int64(0)
    other = 0
    compressed = 0
    i = start
    single = sample_types.shape[0] == 1
    while i < end:
        if i + 8 > end:
            return n, lost, lost_samples, other, compressed, 2, i
        typ = np.int64(_rd(buf, i, 4))
        size = np.int64(_rd(buf, i + 6, 2))
        if size < 8:
            return n, lost, lost_samples, other, compressed, 1, i
        if i + size > end:
            return n, lost, lost_samples, other, compressed, 2, i
        rec_end = i + size
        if typ == 9:  # PERF_RECORD_SAMPLE
            a = 0
            if not single:
                if i + 16 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                sid = _rd(buf, i + 8, 8)
                k = np.searchsorted(ids, sid)
                if k >= ids.shape[0] or ids[k] != sid:
                    return n, lost, lost_samples, other, compressed, 3, i
                a = id_attr[k]
            st = sample_types[a]
            p = i + 8
            s_pid = np.int64(-1)
            s_tid = np.int64(-1)
            s_time = np.int64(0)
            s_cpu = np.int64(-1)
            r_off = np.int64(-1)
            r_len = np.int64(0)
            if st & 0x10000:
                p += 8
            if st & 0x1:
                p += 8
            if st & 0x2:
                if p + 8 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                s_pid = np.int64(np.int32(np.uint32(_rd(buf, p, 4))))
                s_tid = np.int64(np.int32(np.uint32(_rd(buf, p + 4, 4))))
                p += 8
            if st & 0x4:
                if p + 8 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                s_time = np.int64(_rd(buf, p, 8))
                p += 8
            if st & 0x8:
                p += 8
            if st & 0x40:
                p += 8
            if st & 0x200:
                p += 8
            if st & 0x80:
                if p + 8 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                s_cpu = np.int64(_rd(buf, p, 4))
                p += 8
            if st & 0x100:
                p += 8
            if st & 0x10:  # READ
                rf = read_formats[a]
                if p + 8 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                per = 8 + (8 if rf & 4 else 0) + (8 if rf & 16 else 0)
                if rf & 8:
                    nr = np.int64(_rd(buf, p, 8))
                    if nr < 0 or nr > size:
                        return n, lost, lost_samples, other, compressed, 4, i
                    p += 8 + (8 if rf & 1 else 0) + (8 if rf & 2 else 0) + nr * per
                else:
                    p += per + (8 if rf & 1 else 0) + (8 if rf & 2 else 0)
            if st & 0x20:  # CALLCHAIN
                if p + 8 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                nr = np.int64(_rd(buf, p, 8))
                if nr < 0 or nr > size:
                    return n, lost, lost_samples, other, compressed, 4, i
                p += 8 + 8 * nr
            if st & 0x400:  # RAW
                if p + 4 > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
                r_len = np.int64(_rd(buf, p, 4))
                r_off = p + 4
                if r_off + r_len > rec_end:
                    return n, lost, lost_samples, other, compressed, 4, i
            elif p > rec_end:
                return n, lost, lost_samples, other, compressed, 4, i
            if fill:
                t[n] = s_time
                cpu[n] = s_cpu
                pid[n] = s_pid
                tid[n] = s_tid
                attr[n] = a
                roff[n] = r_off
                rlen[n] = r_len
            n += 1
        elif typ == 2:  # LOST: u64 id, u64 lost
            if size < 24:
                return n, lost, lost_samples, other, compressed, 5, i
            lost += np.int64(_rd(buf, i + 16, 8))
        elif typ == 13:  # LOST_SAMPLES: u64 lost
            if size < 16:
                return n, lost, lost_samples, other, compressed, 5, i
            lost_samples += np.int64(_rd(buf, i + 8, 8))
        elif typ == 81:
            compressed += 1
        else:
            other += 1
        i = rec_end
    return n, lost, lost_samples, other, compressed, 0, -1


def _decompress(buf: np.ndarray, start: int, end: int, path: str) -> np.ndarray:
    """The records inside PERF_RECORD_COMPRESSED payloads (one zstd stream), concatenated."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency; say what to do if it is missing
        raise UserError(f"{path} is compressed (perf record -z); install the zstandard package "
                        "or record without -z") from None
    dec = zstandard.ZstdDecompressor().decompressobj()
    parts = []
    i = start
    raw = buf
    while i < end:
        typ = int(raw[i]) | int(raw[i + 1]) << 8 | int(raw[i + 2]) << 16 | int(raw[i + 3]) << 24
        size = int(raw[i + 6]) | int(raw[i + 7]) << 8
        if typ == REC_COMPRESSED:
            try:
                parts.append(dec.decompress(raw[i + 8:i + size].tobytes()))
            except zstandard.ZstdError as exc:
                raise _err(path, i, f"compressed record does not decompress ({exc})") from None
        i += size
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def read_perf_data(path: str | os.PathLike) -> RawEvents:
    """RawEvents from a perf.data file of tracepoint samples (see the module docstring)."""
    path = os.fspath(path)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise TraceFormatError(f"{path}: empty file")
        # No `with`: an error's traceback may still hold views of the map; it closes when collected.
        # MAP_POPULATE maps every page at once: faulting them in one by one cost as much as
        # decoding them (measured: 0.28 s against 0.16 s for a 100 MB file in a VM)
        mm = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                       prot=mmap.PROT_READ)
    return _read(np.frombuffer(mm, dtype=np.uint8), memoryview(mm), path)


def parse_perf_data(data: bytes, name: str = "<bytes>") -> RawEvents:
    """RawEvents from the bytes of a perf.data (`name` is used in error messages)."""
    return _read(np.frombuffer(data, dtype=np.uint8), memoryview(data), name)


def _read(buf: np.ndarray, view: memoryview, path: str) -> RawEvents:
    info = read_header(view, path)
    del view
    attrs = info.attrs
    sample_types = np.array([a.sample_type for a in attrs], np.uint64).view(np.int64)
    read_formats = np.array([a.read_format for a in attrs], np.uint64).view(np.int64)
    if len(attrs) > 1 and not np.all(sample_types & S_IDENTIFIER):
        raise _err(path, 24, "several events whose samples carry no PERF_SAMPLE_IDENTIFIER (perf before 3.12?): "
                   "cannot tell which event a sample belongs to")
    pairs = sorted((i, k) for k, a in enumerate(attrs) for i in a.ids)
    ids = np.array([p[0] for p in pairs], np.uint64)
    id_attr = np.array([p[1] for p in pairs], np.int64)
    if len(sample_types) > 1 and len(ids) == 0:
        raise _err(path, 24, "several events but no sample ids")
    start, end = info.data_offset, info.data_offset + info.data_size
    # One pass fills arrays sized for the most samples the bytes could hold: pages never written
    # are never committed, so memory follows the samples found, not this bound.
    fixed = 0x103CF  # the 8-byte fields a sample may start with (IDENTIFIER, IP, TID, TIME, ... PERIOD)
    min_sample = 8 + 8 * min(bin(int(st) & fixed).count("1") for st in sample_types)
    compressed = False
    while True:
        cap = (end - start) // max(min_sample, 8) + 1
        t, attr, roff, rlen = (np.empty(cap, np.int64) for _ in range(4))
        cpu, pid, tid = (np.empty(cap, np.int32) for _ in range(3))
        n, lost, lost_samples, other, n_compressed, code, where = _walk(
            buf, start, end, True, ids, id_attr, sample_types, read_formats, t, cpu, pid, tid, attr, roff, rlen)
        if code:
            inside = " (offset inside the decompressed data)" if compressed else ""
            raise _err(path, where, _ERR[code] + inside)
        if not n_compressed or compressed:
            break
        buf, compressed = _decompress(buf, start, end, path), True  # `perf record -z`
        start, end = 0, len(buf)
    t, cpu, pid, tid, attr, roff, rlen = (x[:n] for x in (t, cpu, pid, tid, attr, roff, rlen))
    # each event's row in the decode table: its tracepoint format, if it is one we decode
    formats = [info.formats.get(at.config) if at.type == PERF_TYPE_TRACEPOINT and at.sample_type & S_RAW else None
               for at in attrs]
    try:
        table = decode_table(formats)
    except TraceFormatError as exc:
        raise _err(path, info.tracing_offset, f"tracing data: {exc}") from None
    keep = np.flatnonzero(table.kind[attr] != 0)
    unknown = int(n - len(keep))
    if len(keep) > 1 and not bool(np.all(t[keep][1:] >= t[keep][:-1])):
        keep = keep[np.argsort(t[keep], kind="stable")]  # per-CPU buffers interleave; ties keep file order
    cols, comms, bad = decode_records(buf, roff, rlen, attr, table, order=keep)
    if bad >= 0:
        inside = " (offset inside the decompressed data)" if compressed else ""
        raise _err(path, int(roff[bad]), f"a {table.names[int(attr[bad])]} sample has {int(rlen[bad])} bytes of "
                   f"tracepoint data, its format needs {int(table.min_len[int(attr[bad])])}{inside}")
    cpus = int((info.features.get("nr_cpus") or {}).get("available") or 0)
    wild = np.flatnonzero(cpu[keep] >= (min(cpus, MAX_CPUS) if cpus > 0 else MAX_CPUS))
    if len(wild):  # a corrupt CPU field would size the state builder's per-CPU tables
        k = int(keep[wild[0]])
        inside = " (offset inside the decompressed data)" if compressed else ""
        limit = f"the machine had {cpus} CPUs" if cpus > 0 else f"no Linux machine has more than {MAX_CPUS}"
        raise _err(path, int(roff[k]), f"a {table.names[int(attr[k])]} sample names CPU {int(cpu[k])}, but "
                   f"{limit}{inside}")
    columns = {"time": t[keep], "cpu": cpu[keep], "tid": tid[keep], "pid": pid[keep],
               **{k: cols[k] for k in ("kind", "arg0", "arg1", "arg2", "comm0", "comm1")}}
    ev = RawEvents(**columns)
    ev.comms = comms
    ev.stats = {"lost_events": int(lost), "lost_samples": int(lost_samples), "unknown_events": unknown,
                "sideband_records": int(other), "source_format": "perf-data", **info.features}
    return ev


def load(path: str, *, pid: int | None = None, comm: str | None = None, progress=None) -> Trace:
    """Import a system-wide perf.data as the Trace of the process tree of `pid` (or `comm`).

    `progress(done_bytes, total_bytes, stage)` is called as the stages start and end."""
    from scalestack.trace.builder import build_trace

    size = os.path.getsize(path)
    if progress is not None:
        progress(0, size, "reading")
    events = read_events(path, which("perf") or "perf", reader="perf-data")  # perf only to cross-check
    if progress is not None:  # the read is one compiled pass; the state builder follows
        progress(size, size, f"building the trace from {len(events):,} events")
    st = events.stats
    meta = {"source": "perf-data", "input": os.path.abspath(path), "reader": "perf-data",
            "cores": (st.get("nr_cpus") or {}).get("online"), "kernel": st.get("os_release"),
            "host": st.get("hostname"), "perf_version": st.get("perf_version"), "recorded_with": st.get("cmdline")}
    return build_trace(events, root_pids=[pid] if pid else None, comm=comm,
                       meta={k: v for k, v in meta.items() if v is not None})


LOST_RE = re.compile(r"lost (\d+) chunks", re.I)


def read_events(perf_data: str, perf: str, reader: str = "auto", samples: bool = False) -> RawEvents:
    """RawEvents from a perf.data file, by the direct reader (default) or via `perf script` text.

    Samples need perf's symbol resolution, so a recording with samples is read as text. With
    SCALESTACK_CHECK_READERS=1 in the environment (the test suite sets it) every file is read
    both ways and any difference is an error: the two readers are proven equal on every
    recording the tests make.
    """
    if samples:
        reader = "perf-script"
    if reader not in ("auto", "perf-data", "perf-script"):
        raise UserError(f"unknown reader {reader!r}; choose perf-data or perf-script")
    if reader == "perf-script":
        return _read_text(perf_data, perf, samples)
    from scalestack.ingest.perf_data import read_perf_data

    events = read_perf_data(perf_data)
    if os.environ.get("SCALESTACK_CHECK_READERS") == "1":
        text = _read_text(perf_data, perf, False)
        if not events.equals(text) or events.stats["lost_events"] != text.stats["lost_events"]:
            raise RuntimeError(f"the perf.data reader and perf script disagree on {perf_data} "
                               f"({len(events)} vs {len(text)} events)")
    return events


def _read_text(perf_data: str, perf: str, samples: bool) -> RawEvents:
    from scalestack.ingest.perf_script import parse_perf_script

    with tempfile.TemporaryDirectory(prefix="scalestack-") as tmp:
        text = os.path.join(tmp, "perf.txt")
        with open(text, "wb") as fh:
            fields = ["-F", "trace:comm,pid,tid,cpu,time,event,trace"]
            if samples:
                fields += ["-F", "sw:comm,pid,tid,cpu,time,event,ip,sym,symoff,dso", "-G"]  # -G: callchains elsewhere
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
