"""Decode raw tracepoint records (the kernel's own binary layout) into RawEvents columns.

A tracepoint record is the same bytes whether it comes from the ftrace ring buffer (tracefs
`trace_pipe_raw`) or from a perf.data PERF_SAMPLE_RAW field: common fields (type id, flags,
preempt count, pid) then the event's fields at offsets the kernel publishes in the event's
`format` text. Offsets change between kernels (sched_process_fork's comms became `__data_loc`
strings; sched_wakeup lost `success`), so they are always read from that text, never assumed.

Decoding is vectorized: records are located first (by a compiled walk specific to each
container), then every field of every record of one event type is gathered with NumPy.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from scalestack.errors import TraceFormatError
from scalestack.events import Kind

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
        fname = re.sub(r"\[.*\]", "", decl).split()[-1].lstrip("*")
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


def _gather_int(buf: np.ndarray, base: np.ndarray, f: Field) -> np.ndarray:
    """Integer field of every record (little-endian), as int64."""
    dtype = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}.get(f.size)
    if dtype is None:
        raise TraceFormatError(f"field {f.name} has an unsupported size {f.size}")
    if not f.signed:
        dtype = {np.int8: np.uint8, np.int16: np.uint16, np.int32: np.uint32, np.int64: np.uint64}[dtype]
    idx = (base + f.offset)[:, None] + np.arange(f.size)
    raw = buf[idx].reshape(-1).view(dtype)
    return raw.astype(np.int64) if raw.dtype != np.uint64 else raw.view(np.int64)


def _gather_str(buf: np.ndarray, base: np.ndarray, length: np.ndarray, f: Field, width: int = 64) -> np.ndarray:
    """Fixed-size window of each record's string field, as rows of `width` bytes (NUL-padded)."""
    if f.data_loc:
        loc = _gather_int(buf, base, dataclasses.replace(f, size=4, signed=False))
        start = base + (loc & 0xFFFF)
        size = np.minimum((loc >> 16) & 0xFFFF, width)
    else:
        start = base + f.offset
        size = np.full(len(base), min(f.size, width), dtype=np.int64)
    size = np.minimum(size, np.maximum(base + length - start, 0))
    cols = np.arange(width)
    idx = np.minimum(start[:, None] + cols, len(buf) - 1)
    out = buf[idx]
    out[cols[None, :] >= size[:, None]] = 0
    return out


def decode(
    buf: np.ndarray, base: np.ndarray, length: np.ndarray, fmt: EventFormat, strings: dict[bytes, int],
    comms: list[str],
) -> dict[str, np.ndarray]:
    """Columns (kind, arg0..2, comm0/1, common_pid) for records of one event type.

    buf: the bytes; base: each record's offset in buf; length: each record's size. `strings`
    and `comms` are the growing string table shared by all event types.
    """
    kind, args, strs = LAYOUT[fmt.name]
    n = len(base)
    cols: dict[str, np.ndarray] = {"kind": np.full(n, int(kind), np.uint8)}
    for slot in ("arg0", "arg1", "arg2"):
        cols[slot] = np.zeros(n, np.int64)
    cols["comm0"] = np.full(n, -1, np.int32)
    cols["comm1"] = np.full(n, -1, np.int32)
    common = fmt.fields.get("common_pid")
    cols["tid"] = _gather_int(buf, base, common) if common else np.full(n, -1, np.int64)
    for slot, fname in args:
        f = fmt.fields.get(fname)
        if f is None:
            raise TraceFormatError(f"{fmt.name} has no field {fname!r} on this kernel")
        cols[slot] = _gather_int(buf, base, f)
    if kind == Kind.SWITCH:
        flag = preempt_flag(fmt)
        raw = cols["arg2"]
        cols["arg2"] = np.where((raw & flag) != 0, 0, raw & (flag - 1))
    for slot, fname in strs:
        f = fmt.fields.get(fname)
        if f is None:
            continue
        rows = _gather_str(buf, base, length, f)
        uniq, inverse = np.unique(rows.view(f"S{rows.shape[1]}").ravel(), return_inverse=True)
        ids = np.empty(len(uniq), np.int32)
        for j, raw_s in enumerate(uniq.tolist()):
            key = raw_s.rstrip(b"\0")
            if key not in strings:
                strings[key] = len(comms)
                comms.append(key.decode("utf-8", "replace"))
            ids[j] = strings[key]
        cols[slot] = ids[inverse.ravel()]
    return cols
