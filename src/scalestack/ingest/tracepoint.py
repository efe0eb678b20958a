"""Decode raw tracepoint records (the kernel's own binary layout) into RawEvents columns.

A tracepoint record is the same bytes whether it comes from the ftrace ring buffer (tracefs
`trace_pipe_raw`) or from a perf.data PERF_SAMPLE_RAW field: common fields (type id, flags,
preempt count, pid) then the event's fields at offsets the kernel publishes in the event's
`format` text. Offsets change between kernels (sched_process_fork's comms became `__data_loc`
strings; sched_wakeup lost `success`), so they are always read from that text, never assumed.

Records are located first (by a compiled walk specific to each container), then one compiled
pass decodes every record by a table built from the format texts (`decode_table`), interning
the comm strings in a hash table, so no Python runs per event.
"""

from __future__ import annotations

import dataclasses
import re

import numba
import numpy as np

from scalestack.errors import TraceFormatError
from scalestack.trace.events import Kind

_FIELD_RE = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d+);")


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    offset: int
    size: int
    signed: bool
    data_loc: bool  # a u32 (offset | length << 16) pointing at a string inside the record
    is_array: bool


@dataclasses.dataclass(frozen=True)
class EventFormat:
    name: str  # "group:name"
    id: int
    fields: dict[str, Field]
    print_fmt: str


def parse_format(text: str, group: str | None = None) -> EventFormat:
    """Parse one event's `format` file text."""
    name_m = re.search(r"^name:\s*(\S+)", text, re.M)
    id_m = re.search(r"^ID:\s*(\d+)", text, re.M)
    if not name_m or not id_m:
        raise TraceFormatError("tracepoint format text without name or ID")
    fields = {}
    for m in _FIELD_RE.finditer(text):
        decl = m.group("decl").strip()
        data_loc = decl.startswith("__data_loc")
        is_array = "[" in decl
        words = re.sub(r"\[.*\]", "", decl).split()
        if not words:
            raise TraceFormatError(f"tracepoint field without a name: {decl!r}")
        fname = words[-1].lstrip("*")
        fields[fname] = Field(fname, int(m.group("off")), int(m.group("size")), m.group("signed") == "1",
                              data_loc, is_array)
    fmt_m = re.search(r"^print fmt:\s*(.*)$", text, re.M)
    name = name_m.group(1) if group is None else f"{group}:{name_m.group(1)}"
    return EventFormat(name, int(id_m.group(1)), fields, fmt_m.group(1) if fmt_m else "")


# tracepoint -> (kind, [(arg slot, field)], [(comm slot, field)])
LAYOUT: dict[str, tuple[Kind, list[tuple[str, str]], list[tuple[str, str]]]] = {
    "sched:sched_switch": (Kind.SWITCH, [("arg0", "prev_pid"), ("arg1", "next_pid"), ("arg2", "prev_state")],
                           [("comm0", "prev_comm"), ("comm1", "next_comm")]),
    "sched:sched_wakeup": (Kind.WAKEUP, [("arg0", "pid"), ("arg1", "target_cpu")], [("comm0", "comm")]),
    "sched:sched_wakeup_new": (Kind.WAKEUP_NEW, [("arg0", "pid"), ("arg1", "target_cpu")], [("comm0", "comm")]),
    "sched:sched_process_fork": (Kind.FORK, [("arg0", "parent_pid"), ("arg1", "child_pid")],
                                 [("comm0", "child_comm"), ("comm1", "parent_comm")]),
    "sched:sched_process_exec": (Kind.EXEC, [("arg0", "pid"), ("arg1", "old_pid")], [("comm0", "filename")]),
    "sched:sched_process_exit": (Kind.EXIT, [("arg0", "pid")], [("comm0", "comm")]),
    "task:task_rename": (Kind.RENAME, [("arg0", "pid")], [("comm0", "newcomm"), ("comm1", "oldcomm")]),
    "task:task_newtask": (Kind.NEWTASK, [("arg0", "pid"), ("arg1", "clone_flags")], [("comm0", "comm")]),
    "syscalls:sys_enter_futex": (Kind.FUTEX_ENTER, [("arg0", "uaddr"), ("arg1", "op")], []),
    "syscalls:sys_exit_futex": (Kind.FUTEX_EXIT, [("arg0", "ret")], []),
    "syscalls:sys_enter_futex_waitv": (Kind.FUTEX_WAITV, [("arg0", "waiters"), ("arg1", "nr_futexes")], []),
    "syscalls:sys_exit_futex_waitv": (Kind.FUTEX_EXIT, [("arg0", "ret")], []),
    "sched:sched_stat_runtime": (Kind.STAT_RUNTIME, [("arg0", "pid"), ("arg1", "runtime")], [("comm0", "comm")]),
    "sched:sched_migrate_task": (Kind.MIGRATE, [("arg0", "pid"), ("arg1", "orig_cpu"), ("arg2", "dest_cpu")],
                                 [("comm0", "comm")]),
}


def preempt_flag(fmt: EventFormat) -> int:
    """The prev_state bit meaning "preempted while runnable" (TASK_REPORT_MAX) on this kernel.

    The switch's print fmt masks prev_state with ((TASK_REPORT_MAX) << 1) - 1 and prints "+"
    when the preempt bit is set; the largest mask bit is that flag. Default: 0x100 (Linux ≥ 4.14).
    """
    m = re.search(r"prev_state & \(\(\(\((.*?)\) \+ 1\) << 1\) - 1\)", fmt.print_fmt)
    if m:
        try:
            bits = 0
            for part in m.group(1).split("|"):
                bits |= int(part.strip(), 0)
            return (bits + 1) << 1
        except ValueError:
            pass
    return 0x100


@dataclasses.dataclass(frozen=True)
class DecodeTable:
    """How to decode each event type, as arrays a compiled loop can read (row = event type).

    kind 0 marks a type we do not decode (counted as unknown). ints[t, slot] = (offset, size,
    signed) for arg0, arg1, arg2 and common_pid; strs[t, slot] = (offset, size, data_loc) for
    comm0 and comm1; size 0 = the field is absent on this kernel.
    """

    kind: np.ndarray
    ints: np.ndarray
    strs: np.ndarray
    preempt: np.ndarray
    min_len: np.ndarray
    names: list[str]


def decode_table(formats: list[EventFormat | None]) -> DecodeTable:
    """A DecodeTable for event types 0..len(formats)-1 (None = not decoded)."""
    n = len(formats)
    kind = np.zeros(n, np.int64)
    ints = np.zeros((n, 4, 3), np.int64)
    strs = np.zeros((n, 2, 3), np.int64)
    preempt = np.zeros(n, np.int64)
    min_len = np.zeros(n, np.int64)
    names = []
    for t, fmt in enumerate(formats):
        names.append(fmt.name if fmt else "")
        if fmt is None or fmt.name not in LAYOUT:
            continue
        k, args, comm_fields = LAYOUT[fmt.name]
        kind[t] = int(k)
        used = []
        for slot, fname in [*args, ("pid", "common_pid")]:
            f = fmt.fields.get(fname)
            if f is None:
                if fname == "common_pid":
                    continue
                raise TraceFormatError(f"{fmt.name} has no field {fname!r} on this kernel")
            if f.size not in (1, 2, 4, 8):
                raise TraceFormatError(f"field {f.name} of {fmt.name} has an unsupported size {f.size}")
            ints[t, ("arg0", "arg1", "arg2", "pid").index(slot)] = (f.offset, f.size, int(f.signed))
            used.append(f.offset + f.size)
        for slot, fname in comm_fields:
            f = fmt.fields.get(fname)
            if f is not None:
                strs[t, ("comm0", "comm1").index(slot)] = (f.offset, 4 if f.data_loc else f.size, int(f.data_loc))
                used.append(f.offset + (4 if f.data_loc else f.size))
        if k == Kind.SWITCH:
            preempt[t] = preempt_flag(fmt)
        min_len[t] = max(used, default=0)
    return DecodeTable(kind, ints, strs, preempt, min_len, names)


@numba.njit(cache=True, inline="always")
def byte_at(buf, i):
    """buf[i] as uint64, indexed unsigned: numba then adds no negative-index wraparound (a compare
    and a conditional move per byte), so LLVM joins neighbouring byte loads into one load."""
    return np.uint64(buf[np.uint64(i)])


@numba.njit(cache=True, inline="always")
def le_u32(buf, i):
    return (byte_at(buf, i) | byte_at(buf, i + 1) << np.uint64(8) | byte_at(buf, i + 2) << np.uint64(16)
            | byte_at(buf, i + 3) << np.uint64(24))


@numba.njit(cache=True, inline="always")
def le_u64(buf, i):
    return le_u32(buf, i) | le_u32(buf, i + 4) << np.uint64(32)


@numba.njit(cache=True, inline="always")
def _int_at(buf, i, size, signed):
    """Little-endian integer of 1, 2, 4 or 8 bytes (straight-line code for 4 and 8, which the
    compiler turns into single loads)."""
    if size == 8:
        return np.int64(le_u64(buf, i))
    if size == 4:
        v = le_u32(buf, i)
    elif size == 2:
        v = byte_at(buf, i) | byte_at(buf, i + 1) << np.uint64(8)
    else:
        v = byte_at(buf, i)
    if signed and (v >> np.uint64(8 * size - 1)) & np.uint64(1):
        v |= ~((np.uint64(1) << np.uint64(8 * size)) - np.uint64(1))
    return np.int64(v)


@numba.njit(cache=True, inline="always")
def _hash(buf, start, m):
    """64-bit hash of buf[start:start+m], eight bytes per multiply."""
    h = np.uint64(m) * np.uint64(0x9E3779B97F4A7C15)
    for w0 in range(0, m, 8):
        w = np.uint64(0)
        for b in range(min(8, m - w0)):
            w |= np.uint64(buf[start + w0 + b]) << np.uint64(8 * b)
        h = (h ^ w) * np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(29)
    return h


@numba.njit(cache=True, inline="always")
def _mix(w0, w1, m):
    """64-bit hash of a string of at most 16 bytes held as two little-endian words."""
    h = (np.uint64(m) * np.uint64(0x9E3779B97F4A7C15) ^ w0) * np.uint64(0xFF51AFD7ED558CCD)
    h = (h ^ (h >> np.uint64(29)) ^ w1) * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(32))


class Strings:
    """The comm strings met so far, interned in an open-addressing hash table that compiled code
    fills (`intern_at`). Strings longer than 16 bytes are copied into `arena`, so the table does
    not point into the input: a file read in windows reuses its buffer."""

    def __init__(self, cap: int = 1024):
        self.h_key, self.h_id = np.zeros(cap, np.uint64), np.full(cap, -1, np.int64)
        # per string: arena offset (long strings only), length, first and second 8 bytes
        self.start, self.length = np.empty(cap // 2, np.int64), np.empty(cap // 2, np.int64)
        self.w0, self.w1 = np.empty(cap // 2, np.uint64), np.empty(cap // 2, np.uint64)
        self.arena = np.empty(1 << 16, np.uint8)
        self.used = np.zeros(2, np.int64)  # strings so far, arena bytes so far

    def arrays(self) -> tuple:
        return self.h_key, self.h_id, self.start, self.length, self.w0, self.w1, self.arena, self.used

    def grow(self) -> None:
        """Room for at least one more record's strings (the compiled code asked for it)."""
        if 2 * (int(self.used[0]) + 2) > len(self.h_id):
            cap = 2 * len(self.h_id)
            key, ids = np.zeros(cap, np.uint64), np.full(cap, -1, np.int64)
            _rehash(self.h_key, self.h_id, key, ids)
            self.h_key, self.h_id = key, ids
            self.start, self.length, self.w0, self.w1 = (
                np.concatenate((a, np.empty(cap // 2 - len(a), a.dtype)))
                for a in (self.start, self.length, self.w0, self.w1))
        if int(self.used[1]) + ROOM > len(self.arena):
            self.arena = np.concatenate((self.arena, np.empty(max(len(self.arena), ROOM), np.uint8)))

    def decoded(self) -> list[str]:
        out = []
        for i in range(int(self.used[0])):
            m = int(self.length[i])
            if m > 16:
                raw = self.arena[self.start[i]:self.start[i] + m].tobytes()
            else:
                raw = (int(self.w0[i]).to_bytes(8, "little") + int(self.w1[i]).to_bytes(8, "little"))[:m]
            out.append(raw.decode("utf-8", "replace"))
        return out


ROOM = 1 << 16  # no string in a record is longer than a record (u16 size)


@numba.njit(cache=True, inline="always")
def strings_full(h_id, arena, used):
    """Whether a record's strings might not fit: the caller returns and asks for Strings.grow()."""
    return 2 * (used[0] + 2) > h_id.shape[0] or used[1] + ROOM > arena.shape[0]


@numba.njit(cache=True, inline="always")
def _first_zero_byte(w):
    """Index (0-7) of the lowest zero byte of the little-endian word w, 8 if none. The lowest flag
    of (w - 0x01..) & ~w & 0x80.. is exact (only flags above a zero byte can be borrows); a
    multiply turns the flag at bit 8z + 7 into z without a loop."""
    y = (w - np.uint64(0x0101010101010101)) & ~w & np.uint64(0x8080808080808080)
    if y == 0:
        return 8
    low = (y & (~y + np.uint64(1))) >> np.uint64(7)  # 1 << 8z
    return np.int64((low * np.uint64(0x0001020304050607)) >> np.uint64(56))


@numba.njit(cache=True, inline="always")
def _low_bytes(w, k):
    """The k (0-8) lowest bytes of w, the others zero."""
    if k >= 8:
        return w
    return w & ((np.uint64(1) << np.uint64(8 * k)) - np.uint64(1))


@numba.njit(cache=True, inline="always")
def intern_at(buf, start, n, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used):
    """Id of the NUL-terminated string in buf[start:start + n] (at most n bytes), added if new.

    One exit, no `return` inside the probe loop: numba (0.68) gives an inlined function's arrays
    reference counts that LLVM removes only then; with several exits every call paid ~30 ns."""
    cap = h_id.shape[0]
    if n >= 16 or start + 16 <= buf.shape[0]:  # two word loads, the NUL found by a bit trick
        w0 = le_u64(buf, start)
        w1 = le_u64(buf, start + 8)
        if n < 16:  # (a __data_loc string) the bytes from n on are not the string's
            w0 = _low_bytes(w0, n)
            w1 = _low_bytes(w1, max(n - 8, 0))
        z0 = _first_zero_byte(w0)
        if z0 < 8:
            m = z0
            w0 = _low_bytes(w0, z0)
            w1 = np.uint64(0)
        else:
            z1 = _first_zero_byte(w1)
            m = 8 + z1
            w1 = _low_bytes(w1, z1)
            if z1 == 8:
                while m < n and buf[start + m] != 0:
                    m += 1
    else:
        m = 0  # length up to the NUL; the first 16 bytes also as two words (comms fit)
        w0 = np.uint64(0)
        w1 = np.uint64(0)
        while m < n and buf[start + m] != 0:
            if m < 8:
                w0 |= np.uint64(buf[start + m]) << np.uint64(8 * m)
            elif m < 16:
                w1 |= np.uint64(buf[start + m]) << np.uint64(8 * (m - 8))
            m += 1
    h = _hash(buf, start, m) if m > 16 else _mix(w0, w1, m)
    j = np.int64(h & np.uint64(cap - 1))
    found = -1
    while found < 0:
        e = h_id[j]
        if e < 0:
            ns = used[0]
            s_len[ns] = m
            s_w0[ns] = w0
            s_w1[ns] = w1
            s_start[ns] = -1
            if m > 16:
                a = used[1]
                s_start[ns] = a
                for b in range(m):
                    arena[a + b] = buf[start + b]
                used[1] = a + m
            h_key[j] = h
            h_id[j] = ns
            used[0] = ns + 1
            found = ns
        elif h_key[j] == h and s_len[e] == m and s_w0[e] == w0 and s_w1[e] == w1:
            found = e
            for b in range(16, m):
                if arena[s_start[e] + b] != buf[start + b]:
                    found = -1
                    break
        j = (j + 1) & (cap - 1)
    return found


@numba.njit(cache=True, inline="always")
def switch_state(prev_state, flag):
    """sched_switch's prev_state as RawEvents keeps it: 0 (runnable) when the preempt `flag` is set."""
    return 0 if prev_state & flag else prev_state & (flag - 1)


@numba.njit(cache=True, inline="always")
def comm_span(buf, base, ln, off, size, data_loc):
    """(start, length) of the comm field at `off` (`size` bytes, or a __data_loc u32 of offset |
    length << 16) of the record at buf[base:base + ln], cut to the record."""
    if data_loc:
        loc = np.int64(le_u32(buf, base + off))
        start = base + (loc & 0xFFFF)
        n = (loc >> 16) & 0xFFFF
    else:
        start = base + off
        n = size
    return start, max(min(n, base + ln - start), 0)


@numba.njit(cache=True, inline="always")
def decode_one(buf, base, ln, t, ints, strs, preempt, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used):
    """Fields of the record of type t at buf[base:base + ln]: (arg0, arg1, arg2, common_pid,
    comm0 id, comm1 id). The caller checked ln >= min_len[t] and not strings_full.

    The perf.data reader's loop spells these steps out rather than calling this: numba gives the
    arrays passed to an inlined helper that passes them on reference counts (two atomic
    operations per array per call), which made up three quarters of that loop's time."""
    a0 = _int_at(buf, base + ints[t, 0, 0], ints[t, 0, 1], ints[t, 0, 2]) if ints[t, 0, 1] else 0
    a1 = _int_at(buf, base + ints[t, 1, 0], ints[t, 1, 1], ints[t, 1, 2]) if ints[t, 1, 1] else 0
    a2 = _int_at(buf, base + ints[t, 2, 0], ints[t, 2, 1], ints[t, 2, 2]) if ints[t, 2, 1] else 0
    pid = _int_at(buf, base + ints[t, 3, 0], ints[t, 3, 1], ints[t, 3, 2]) if ints[t, 3, 1] else -1
    if preempt[t]:
        a2 = switch_state(a2, preempt[t])
    c0 = -1
    c1 = -1
    if strs[t, 0, 1]:
        start, n = comm_span(buf, base, ln, strs[t, 0, 0], strs[t, 0, 1], strs[t, 0, 2])
        c0 = intern_at(buf, start, n, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used)
    if strs[t, 1, 1]:
        start, n = comm_span(buf, base, ln, strs[t, 1, 0], strs[t, 1, 1], strs[t, 1, 2])
        c1 = intern_at(buf, start, n, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used)
    return a0, a1, a2, pid, c0, c1


@numba.njit(cache=True)
def _decode(buf, off, ln, typ, order, first, kind_tab, ints, strs, preempt, min_len,
            o_kind, o_a0, o_a1, o_a2, o_pid, o_c0, o_c1, h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used):
    """Decode records order[first], order[first + 1], ... into the same output rows.

    Returns (row, code): code 0 = all done; 1 = the string table may be full, grow it and call
    again from `row`; 2 = record order[row] is too short for its format. The tables are never
    replaced in here, so the loop compiles without reference counting.
    """
    for out in range(first, order.shape[0]):
        r = order[out]
        t = typ[r]
        k = kind_tab[t] if t >= 0 else 0
        o_kind[out] = k
        if k == 0:
            continue
        if ln[r] < min_len[t]:
            return out, 2
        if strings_full(h_id, arena, used):
            return out, 1
        a0, a1, a2, pid, c0, c1 = decode_one(buf, off[r], ln[r], t, ints, strs, preempt,
                                             h_key, h_id, s_start, s_len, s_w0, s_w1, arena, used)
        o_a0[out] = a0
        o_a1[out] = a1
        o_a2[out] = a2
        o_pid[out] = pid
        o_c0[out] = c0
        o_c1[out] = c1
    return order.shape[0], 0


@numba.njit(cache=True)
def _rehash(h_key_old, h_id_old, h_key, h_id):
    """Move every entry of the old table into the (larger, empty) new one."""
    cap = h_id.shape[0]
    for j in range(h_id_old.shape[0]):
        e = h_id_old[j]
        if e >= 0:
            k = np.int64(h_key_old[j] & np.uint64(cap - 1))
            while h_id[k] >= 0:
                k = (k + 1) & (cap - 1)
            h_key[k] = h_key_old[j]
            h_id[k] = e


def decode_records(buf: np.ndarray, off: np.ndarray, length: np.ndarray, typ: np.ndarray,
                   table: DecodeTable, order: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], list[str], int]:
    """Columns kind, arg0..2, pid (the tracepoint's common_pid), comm0/1 of the records `order`
    (default: all, in turn), the string table, and the first record too short for its format (-1: none).

    buf: the bytes; off/length: each record's payload; typ: each record's row in `table`
    (-1 or a row of kind 0: not decoded, kind 0 in the output).
    """
    order = np.arange(len(off), dtype=np.int64) if order is None else order.astype(np.int64, copy=False)
    n = len(order)
    cols = {"kind": np.empty(n, np.uint8), "arg0": np.zeros(n, np.int64), "arg1": np.zeros(n, np.int64),
            "arg2": np.zeros(n, np.int64), "pid": np.full(n, -1, np.int32), "comm0": np.full(n, -1, np.int32),
            "comm1": np.full(n, -1, np.int32)}
    off, length, typ = (x.astype(np.int64, copy=False) for x in (off, length, typ))
    strings = Strings()
    row, bad = 0, -1
    while True:
        row, code = _decode(buf, off, length, typ, order, row, table.kind, table.ints, table.strs, table.preempt,
                            table.min_len, cols["kind"], cols["arg0"], cols["arg1"], cols["arg2"], cols["pid"],
                            cols["comm0"], cols["comm1"], *strings.arrays())
        if code == 1:
            strings.grow()
            continue
        if code == 2:
            bad = int(order[row])
        break
    return cols, strings.decoded(), bad
