"""Call stacks from a perf.data recorded with callchains (``record --stacks``): the stacks of the
cpu-clock samples and of every futex call, deduplicated into frame and stack tables, plus the
executable mappings of every process (perf's MMAP2 records) for naming locks.

Read through ``perf script`` (one extra pass over the file): perf resolves each frame against the
binary it was mapped from, demangles C++/Rust, and reads JIT perf maps (/tmp/perf-PID.map).
Kernel frames of the futex calls (the syscall entry path) are dropped: the wait site is user code.
Inlined pseudo-frames are dropped: the frame keeps the function perf found in the symbol table.
The function that called the C library's lock functions, which a frame-pointer walk skips, is put
back where the call instruction names it (`scalestack.symbols.frames`).
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from array import array

import numpy as np

from scalestack.errors import UserError
from scalestack.symbols.frames import C_LIBRARY, restore_skipped_callers, unnamed_frame_notes
from scalestack.symbols.locks import Mapping, name_futexes
from scalestack.tools import last_line
from scalestack.trace.model import FrameTable, FutexCallTable, SampleTable, StackTable, Trace

HEAD_RE = re.compile(r"^\s*(-?\d+)/(-?\d+)\s+(\d+)\.(\d{9}):\s+(\S+):(?:\s(.*))?$")
FRAME_RE = re.compile(r"^\s+([0-9a-f]+) (.*?) \((.*)\)$")
SYMOFF_RE = re.compile(r"^(.*)\+0x([0-9a-f]+)$")
MMAP_RE = re.compile(r"PERF_RECORD_MMAP2? (-?\d+)/-?\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (?:0x)?([0-9a-f]+)"
                     r"[^\]]*\]: (\S+) (.*)$")
FUTEX_RE = re.compile(r"uaddr: 0x([0-9a-f]+), op: 0x([0-9a-f]+)")
KERNEL_MIN = 0xFFFF800000000000
FUTEX_CMD_MASK = 0x7F  # without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256)


@dataclasses.dataclass
class Stacks:
    """What the stacks pass read: tables and the events that point into them."""

    frames: FrameTable
    stacks: StackTable
    sample_tid: np.ndarray
    sample_time: np.ndarray
    sample_stack: np.ndarray
    futex: dict  # columns of FutexCallTable: tid, time_ns, op, addr, stack
    futex_pid: np.ndarray
    mappings: list[Mapping]
    notes: list = dataclasses.field(default_factory=list)


class _Dedup:
    def __init__(self):
        self.frames: dict[tuple, int] = {}
        self.stacks: dict[tuple, int] = {}

    def stack(self, frames: list[tuple]) -> int:
        if not frames:
            return -1
        ids = tuple(self.frames.setdefault(f, len(self.frames)) for f in frames)
        return self.stacks.setdefault(ids, len(self.stacks))

    def tables(self) -> tuple[FrameTable, StackTable]:
        fr = list(self.frames)
        frames = FrameTable(ip=[f[0] for f in fr], symbol=[f[1] for f in fr], offset=[f[2] for f in fr],
                            binary=[f[3] for f in fr])
        sid, depth, frame = [], [], []
        for ids, s in self.stacks.items():  # insertion order = id order
            sid += [s] * len(ids)
            depth += range(len(ids))
            frame += ids
        return frames, StackTable(stack=np.array(sid, np.int32), depth=np.array(depth, np.int16),
                                  frame=np.array(frame, np.int32))


def parse_stacks(lines) -> Stacks:
    """Parse `perf script -F pid,tid,time,event,ip,sym,symoff,dso,trace --show-mmap-events` text."""
    dd = _Dedup()
    # one machine word a value (a list would hold an int object of 28-32 bytes and a pointer)
    s_tid, s_time, s_stack = array("q"), array("q"), array("q")
    f_tid, f_pid, f_time, f_op, f_addr, f_stack = array("q"), array("q"), array("q"), array("q"), array("Q"), array("q")
    mappings: list[Mapping] = []
    current = None  # ("sample"|"futex", fields) of the event whose frames follow
    frames: list[tuple] = []
    restored = [0, 0]  # stacks with a skipped caller put back: futex calls, samples

    def flush():
        if current is None:
            return
        kind, pid, tid, t, extra = current
        walked, fixed = restore_skipped_callers(frames)
        restored[kind == "sample"] += fixed
        sid = dd.stack(walked)
        if kind == "sample":
            s_tid.append(tid), s_time.append(t), s_stack.append(sid)
        else:
            f_tid.append(tid), f_pid.append(pid), f_time.append(t), f_op.append(extra[1])
            f_addr.append(extra[0]), f_stack.append(sid)

    for line in lines:
        if line.startswith("\t") or (line.startswith(" ") and current is not None and FRAME_RE.match(line)
                                     and not HEAD_RE.match(line)):
            if current is None:
                continue
            m = FRAME_RE.match(line)
            if m is None:
                continue
            ip = int(m.group(1), 16)
            dso = m.group(3)
            if dso == "inlined" or (current[0] == "futex" and ip >= KERNEL_MIN):
                continue
            sym, off = m.group(2), 0
            so = SYMOFF_RE.match(sym)
            if so:
                sym, off = so.group(1), int(so.group(2), 16)
            frames.append((ip, sym, off, dso))
            continue
        if "PERF_RECORD_MMAP" in line:
            m = MMAP_RE.search(line)
            if m and "x" in m.group(5):
                mappings.append(Mapping(int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16),
                                        int(m.group(4), 16), m.group(6).strip()))
            continue
        m = HEAD_RE.match(line)
        if m is None:
            continue
        flush()
        frames = []
        current = None
        event = m.group(5)
        pid, tid = int(m.group(1)), int(m.group(2))
        t = int(m.group(3)) * 1_000_000_000 + int(m.group(4))
        if event.startswith("cpu-clock"):
            current = ("sample", pid, tid, t, None)
        elif event == "syscalls:sys_enter_futex":
            fm = FUTEX_RE.search(m.group(6) or "")
            if fm:
                current = ("futex", pid, tid, t, (int(fm.group(1), 16), int(fm.group(2), 16) & FUTEX_CMD_MASK))
    flush()
    frames_t, stacks_t = dd.tables()
    futex = {"tid": np.array(f_tid, np.int32), "time_ns": np.array(f_time, np.int64),
             "op": np.array(f_op, np.int16), "addr": np.array(f_addr, np.uint64),
             "stack": np.array(f_stack, np.int32)}
    notes = []
    if any(restored):
        notes.append(f"{restored[0]} futex-call and {restored[1]} sample stacks went from the C library to the "
                     "caller's caller (no frame pointer in its lock functions): the function that called it was "
                     "put back from the call instruction")
    return Stacks(frames_t, stacks_t, np.array(s_tid, np.int32), np.array(s_time, np.int64),
                  np.array(s_stack, np.int32), futex, np.array(f_pid, np.int32), mappings, notes)


def read_stacks(perf_data: str, perf: str, pids=None, named: str | None = None) -> Stacks:
    """The stacks pass over a perf.data recorded with callchains (only processes `pids` if given:
    unwinding every process of a system-wide recording costs seconds). `perf_data.read_stacks_of`
    gives it the copy of a recording made for the processes (`perf_data_copy`); `named` is the
    recording's name in errors."""
    only = ["--pid", ",".join(str(int(p)) for p in sorted(set(pids)))] if pids is not None and len(pids) else []
    # --no-inline: with inlined calls resolved (perf 6.1's default) a frame whose address lies in
    # inlined code is printed as the inlined functions only, its own line missing or doubled, and
    # perf spends ~40% of the pass in addr2line for lines this parser skips anyway
    proc = subprocess.Popen(
        [perf, "script", "-i", perf_data, "--ns", "--show-mmap-events", "--no-inline", *only,
         "-F", "pid,tid,time,event,ip,sym,symoff,dso,trace"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
    )
    stacks = parse_stacks(proc.stdout)
    err = proc.stderr.read()
    if proc.wait() != 0:
        raise UserError(f"`perf script` could not read the call stacks of {named or perf_data}: "
                        f"{last_line(err.encode())}")
    return stacks


def attach_stacks(trace: Trace, st: Stacks, span: tuple[int, int] | None = None) -> Trace:
    """The Trace with the call stacks of a stacks pass: stack ids on its samples (matched by thread
    and time), its threads' futex calls (those in `span`, start to end ns, if given: a trace of a
    part of the recording), and the futex words that lie in a mapped binary named by symbol
    (``meta["locks"]``; `scalestack.symbols.locks`)."""
    samples = trace.samples
    stack_of = dict(zip(zip(st.sample_tid.tolist(), st.sample_time.tolist(), strict=True), st.sample_stack.tolist(),
                        strict=True))
    ids = np.array([stack_of.get(k, -1) for k in zip(samples.tid.tolist(), samples.time_ns.tolist(), strict=True)], np.int32)
    cols = samples.columns()
    cols["stack"] = ids
    fx = st.futex
    keep = np.isin(fx["tid"], trace.threads.tid)
    if span is not None:
        keep &= (fx["time_ns"] >= span[0]) & (fx["time_ns"] <= span[1])
    order = np.argsort(fx["time_ns"][keep], kind="stable")
    calls = FutexCallTable(**{k: v[keep][order] for k, v in fx.items()})
    pids = set(trace.threads.pid.tolist())
    pairs = set(zip(st.futex_pid[keep].tolist(), fx["addr"][keep].tolist(), strict=True))
    names, notes = name_futexes(pairs, [m for m in st.mappings if m.pid in pids])
    locks = {f"{addr:#x}": entry for addr, entry in names.items()}
    meta_notes = [f"stacks: {n}" for n in [*notes, *unnamed_frame_notes(zip(st.frames.symbol, st.frames.binary,
                                                                              strict=True)), *st.notes]]
    if len(ids) and (ids < 0).all():
        meta_notes.append("stacks: no sample has a call stack (perf recorded none)")
    trace = dataclasses.replace(trace, samples=SampleTable(**cols), frames=st.frames, stacks=st.stacks,
                                futex_calls=calls)
    shallow = unwound_no_further_than_libc(st.frames, st.stacks, calls.stack)
    if shallow is None:
        return trace.with_meta(locks=locks, stack_notes=meta_notes)
    meta_notes.append(f"stacks: {shallow}")
    return trace.with_meta(locks=locks, stack_notes=meta_notes, warnings=trace.warnings + [shallow])


SHALLOW_SHARE = 0.5  # of the futex calls: below it, a few leaf-only stacks are the runtime's own calls
SHALLOW_LEAST = 20


def unwound_no_further_than_libc(frames: FrameTable, stacks: StackTable, call_stacks: np.ndarray) -> str | None:
    """What it means, when most futex calls' stacks end at the C library function making the call
    (one frame): perf's DWARF unwinding could not step out of the C library (as in half the
    system-wide recordings read whole, before `perf_data.read_stacks_of` gave perf a copy), so
    wait sites and releasers are unknown. None when the stacks are deep."""
    has = call_stacks[call_stacks >= 0]
    if len(has) < SHALLOW_LEAST or not len(stacks):
        return None
    depth = np.bincount(stacks.stack, minlength=int(has.max()) + 1)
    leaf = np.full(len(depth), -1, np.int64)
    top = stacks.depth == 0
    leaf[stacks.stack[top]] = stacks.frame[top]
    in_libc = np.array([bool(C_LIBRARY.search(b)) for b in frames.binary], dtype=bool)
    one = (depth[has] == 1) & (leaf[has] >= 0) & in_libc[np.maximum(leaf[has], 0)]
    if one.mean() < SHALLOW_SHARE:
        return None
    return (f"perf unwound {int(one.sum())} of {len(has)} futex calls' stacks no further than the C library "
            "function making the call (its DWARF unwinding of the C library fails in some system-wide recordings): "
            "locks are named by address or by the code running while they are held, not by where they are waited "
            "on; record again for the call sites")
