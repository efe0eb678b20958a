"""A copy of a perf.data with only what `perf script` needs to unwind some processes' stacks: their
records (and the kernel's, and perf's own bookkeeping), without the maps each one had before its
last exec.

Why: a command started by `perf record -a -- CMD` is perf's forked child, whose maps the recording
holds as perf (written at the start: the perf binary and its libraries), then as the shell, then as
the program. Read with the maps from before the program's exec, perf's (6.1) DWARF unwinding of the
C library fails for the whole file in some recordings (which ones varies from run to run): 6 of
12 `record --stacks` of `pigz -p 2` gave every futex call a stack of one C-library frame. Read from
this copy, those files unwound every stack (docs/where.md). Reading fewer records, `perf script`
is also faster.
"""

from __future__ import annotations

import mmap
import struct

from scalestack.ingest.perf_abi import (
    HEADER_SIZE,
    MISC_COMM_EXEC,
    REC_COMM,
    REC_EXIT,
    REC_FORK,
    REC_MMAP,
    REC_MMAP2,
    REC_SAMPLE,
    S_CPU,
    S_ID,
    S_IDENTIFIER,
    S_IP,
    S_STREAM_ID,
    S_TID,
    S_TIME,
)

# records naming a process in their first u32 (pid): they are kept for the chosen processes only
_OF_A_PROCESS = (REC_MMAP, REC_COMM, REC_EXIT, REC_FORK, REC_MMAP2)


class _Layout:
    """Where a record's pid and time are, from its event's sample_type."""

    def __init__(self, attrs: list, buf):
        self.attrs, self.buf = attrs, buf
        self.by_id = {i: a for a in attrs for i in a.ids}
        self.identified = all(a.sample_type & S_IDENTIFIER for a in attrs)
        # side-band records carry their time: one without (perf's synthesized maps of the processes
        # running when it started, trailer all zero) is from before everything recorded
        self.timed = (self.identified or len(attrs) == 1) and all(a.sample_id_all and a.sample_type & S_TIME
                                                                   for a in attrs)

    def attr(self, pos: int, size: int, sample: bool):
        if len(self.attrs) == 1:
            return self.attrs[0]
        if not self.identified or size < 16:
            return None
        at = pos + 8 if sample else pos + size - 8  # IDENTIFIER: a sample's first field, the trailer's last
        return self.by_id.get(struct.unpack_from("<Q", self.buf, at)[0])

    def sample_pid(self, pos: int, size: int) -> int | None:
        a = self.attr(pos, size, True)
        if a is None or not a.sample_type & S_TID:
            return None
        at = 8 + 8 * bool(a.sample_type & S_IDENTIFIER) + 8 * bool(a.sample_type & S_IP)
        return struct.unpack_from("<i", self.buf, pos + at)[0] if at + 4 <= size else None

    def side_time(self, pos: int, size: int) -> int | None:
        """The time in a side-band record's sample_id trailer (`sample_id_all`), if it has one."""
        a = self.attr(pos, size, False)
        if a is None or not a.sample_id_all or not a.sample_type & S_TIME:
            return None
        st = a.sample_type
        after = 8 * sum(bool(st & b) for b in (S_ID, S_STREAM_ID, S_CPU, S_IDENTIFIER))  # fields after TIME
        at = size - after - 8
        return struct.unpack_from("<Q", self.buf, pos + at)[0] if at >= 8 else None


def _records(buf, start: int, end: int):
    """(type, misc, offset, size) of each record of buf[start:end]."""
    pos = start
    while pos + 8 <= end:
        typ, misc, size = struct.unpack_from("<IHH", buf, pos)
        if size < 8 or pos + size > end:
            return
        yield typ, misc, pos, size
        pos += size


def copy_for_processes(src: str, dst: str, pids, info) -> bool:
    """Write at `dst` the copy of perf.data `src` (`info`: its `perf_data.PerfData`) for processes
    `pids` (see the module docstring). False, with nothing written, where that copy cannot be made
    (a `perf record -z` file, or one whose sections are not laid out as perf writes them): then read
    `src` itself."""
    pids = {int(p) for p in pids}
    if info.features.get("compressed") is not None or not pids:
        return False
    start, end = info.data_offset, info.data_offset + info.data_size
    with open(src, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        head = mm[:start]
        if len(head) < HEADER_SIZE or _outside(head, start):
            return False
        lay = _Layout(info.attrs, mm)
        last_exec: dict[int, int] = {}
        for typ, misc, pos, n in _records(mm, start, end):
            if typ == REC_COMM and misc & MISC_COMM_EXEC:
                pid = struct.unpack_from("<i", mm, pos + 8)[0]
                t = lay.side_time(pos, n)
                if pid in pids and t is not None:
                    last_exec[pid] = max(t, last_exec.get(pid, t))
        n_feat = bin(int.from_bytes(head[72:104], "little")).count("1")
        sections = [struct.unpack_from("<QQ", mm, end + 16 * k) for k in range(n_feat)]
        with open(dst, "wb") as out:
            out.write(head)
            written = 0
            for typ, _misc, pos, n in _records(mm, start, end):
                if _keep(typ, pos, n, lay, pids, last_exec):
                    out.write(mm[pos:pos + n])
                    written += n
            blobs_at = start + written + 16 * n_feat
            for _off, n in sections:
                out.write(struct.pack("<QQ", blobs_at, n))
                blobs_at += n
            for off, n in sections:
                out.write(mm[off:off + n])
            out.seek(40)  # the data section's (offset, size) in the header
            out.write(struct.pack("<QQ", start, written))
    return True


def _outside(head: bytes, data_offset: int) -> bool:
    """Do the attrs or their id lists lie past the start of the data section (where this copy would
    not keep them)?"""
    attr_size, a_off, a_size = struct.unpack_from("<QQQ", head, 16)
    if not attr_size or a_off + a_size > data_offset:
        return True
    for k in range(a_size // attr_size):
        ids_off, ids_size = struct.unpack_from("<QQ", head, a_off + k * attr_size + attr_size - 16)
        if ids_size and ids_off + ids_size > data_offset:
            return True
    return False


def _keep(typ: int, pos: int, n: int, lay: _Layout, pids: set, last_exec: dict) -> bool:
    if typ == REC_SAMPLE:
        pid = lay.sample_pid(pos, n)
        return pid is None or pid in pids
    if typ not in _OF_A_PROCESS:
        return True  # the kernel's (lost, throttle, ksymbol, ...) and perf's own bookkeeping
    pid = struct.unpack_from("<i", lay.buf, pos + 8)[0]
    if pid < 0:
        return True  # the kernel's maps
    if pid not in pids:
        return False
    if typ in (REC_MMAP, REC_MMAP2) and pid in last_exec:
        t = lay.side_time(pos, n)
        return not lay.timed if t is None else t >= last_exec[pid]
    return True
