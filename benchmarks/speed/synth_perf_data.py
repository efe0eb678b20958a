"""A synthetic perf.data of a switch storm, of any size: for the 10^8-event row of the ingest benchmark.

Recording 10^8 real events (prodcons at ~10 GB of perf buffers) is beyond a small VM, so this
writes the file perf would have written: a system-wide recording of scalestack's tracepoints in
which T threads of one process ("synth") hand work to each other through a futex, as
workloads/c/prodcons.c does, on C CPUs, with the idle task in between.

What perf itself decides is taken from a real file: a tiny `perf record -a` of the same events on
this machine gives the perf_event_attr of every event (sample_type, read_format, ...), the
feature sections, above all HEADER_TRACING_DATA (the kernel's format text of each tracepoint),
and the side-band records that come first (kernel MMAP, THREAD_MAP). Only the samples are made
here: PERF_RECORD_SAMPLE laid out by that sample_type, tracepoint payloads laid out by the format
texts (offsets parsed by scalestack.ingest.tracepoint.parse_format, none assumed), written per
CPU within rounds closed by FINISHED_ROUND, as perf drains its per-CPU buffers (so the file is
not globally time-sorted). The event ids, ID_INDEX, CPU_MAP, nr_cpus, sample time and command
line are rewritten for C CPUs and this writer.

The schedule is consistent by construction: rings of threads pass one token each; the holder
runs, wakes the next thread (sys_enter_futex WAKE, sched_wakeup, sys_exit_futex), waits
(sys_enter_futex WAIT), reports its run (sched_stat_runtime = the run's length) and switches out
(prev_state S); the woken thread is switched in later on its own CPU (or directly, when both
share one) and returns from its wait. Rings own disjoint CPUs, so a CPU never runs two threads.
`write` returns what it wrote: the count of each event and each thread's total running time,
the ground truth that tests/ingest/test_synth_perf_data.py checks perf's and scalestack's
readers against.

Events are generated with NumPy in chunks (~0.5 M events by default) and written as they are
made, so memory stays bounded whatever the size.

    python benchmarks/speed/synth_perf_data.py --events 100000000 -o /work/big/synth-1e8.data
    python benchmarks/speed/synth_perf_data.py --quick              # 10^5 events to a temp file
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from scalestack.ingest.perf_abi import (  # noqa: E402
    HEADER_SIZE,
    MAGIC,
    REC_COMM,
    REC_FINISHED_ROUND,
    REC_FORK,
    REC_MMAP,
    REC_SAMPLE,
)
from scalestack.ingest.perf_data import FEAT_BITS, PERF_TYPE_TRACEPOINT, read_header  # noqa: E402
from scalestack.ingest.tracepoint import EventFormat  # noqa: E402
from scalestack.trace.events import RECORD_TRACEPOINTS  # noqa: E402

COMM = "synth"
PID = 4242
# record types the reader has no use for
REC_ID_INDEX, REC_THREAD_MAP, REC_CPU_MAP, REC_FINISHED_INIT = 69, 73, 74, 82
# features rewritten here, and those dropped because they describe the recording machine's CPUs
F_NRCPUS, F_CMDLINE, F_EVENT_DESC, F_SAMPLE_TIME = 7, 11, 12, 21
DROPPED_FEATURES = {13, 14, 20, 22, 25, 26}  # CPU/NUMA topology, caches, memory, BPF programs
SYSCALL_FUTEX = {"x86_64": 202, "aarch64": 98}
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
FUTEX_ADDR = 0x7F3A_5C00_1000
MAX_CPUS = 128  # one ID_INDEX record holds 2047 ids: 12 events x 128 CPUs fit
# the five tracepoints a handoff emits, in the order of the kind codes below
SWITCH, WAKEUP, ENTER, EXIT, STAT = range(5)
EVENTS = ["sched:sched_switch", "sched:sched_wakeup", "syscalls:sys_enter_futex", "syscalls:sys_exit_futex",
          "sched:sched_stat_runtime"]
# ns: a run between handoffs, the wake-up latency when the next thread is on another CPU
RUN_NS = (2_000, 40_000)
LATENCY_NS = (1_000, 15_000)
ROUND_EVENTS = 1 << 16  # samples per FINISHED_ROUND: perf drains its buffers about this often at this rate


@dataclasses.dataclass
class Written:
    """What `write` put in the file: the ground truth the readers are checked against."""

    path: str
    events: int  # tracepoint samples
    counts: dict[str, int]  # per tracepoint name
    running_ns: dict[int, int]  # tid -> total time on a CPU
    pid: int
    comm: str
    tids: list[int]
    cpus: int
    first_ns: int
    last_ns: int
    bytes: int


@dataclasses.dataclass
class Template:
    """What a real perf record on this machine says, and the samples' layout derived from it."""

    attr_size: int
    attrs: list[bytes]  # perf_event_attr bytes (attr_size - 16 each)
    names: list[str]
    formats: dict[str, EventFormat]
    attr_index: dict[str, int]  # tracepoint name -> its attr
    sample_type: int
    features: dict[int, bytes]
    preamble: list[bytes]  # side-band records kept from the real file (kernel MMAP, THREAD_MAP)
    first_ns: int
    arch: str


def record_template(out: Path) -> Path:
    """A tiny real system-wide recording of scalestack's tracepoints (needs perf and root)."""
    proc = subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", str(out), "-e",
                           ",".join(RECORD_TRACEPOINTS), "--", "true"], capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"perf record of the template failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return out


def _records(buf: bytes, start: int, end: int):
    i = start
    while i < end:
        typ, _misc, size = struct.unpack_from("<IHH", buf, i)
        yield typ, bytes(buf[i:i + size])
        i += size


def _event_desc_names(raw: bytes) -> list[str]:
    nre, _sz = struct.unpack_from("<II", raw, 0)
    o, names = 8, []
    for _ in range(nre):
        o += _sz
        nr_ids, slen = struct.unpack_from("<II", raw, o)
        names.append(raw[o + 8:o + 8 + slen].split(b"\0", 1)[0].decode())
        o += 8 + slen + 8 * nr_ids
    return names


def load_template(path: Path) -> Template:
    buf = path.read_bytes()
    info = read_header(buf, str(path))
    attr_size, a_off, a_size, d_off, d_size = struct.unpack_from("<QQQQQ", buf, 16)
    attrs = [buf[a_off + k * attr_size:a_off + (k + 1) * attr_size - 16] for k in range(a_size // attr_size)]
    feat_bits = int.from_bytes(buf[72:104], "little")
    bits = [b for b in range(FEAT_BITS) if feat_bits >> b & 1]
    features = {}
    for k, bit in enumerate(bits):
        f_off, f_size = struct.unpack_from("<QQ", buf, d_off + d_size + 16 * k)
        features[bit] = buf[f_off:f_off + f_size]
    names = _event_desc_names(features[F_EVENT_DESC])
    by_id = {fmt.id: fmt for fmt in info.formats.values()}
    attr_index, formats = {}, {}
    for k, at in enumerate(info.attrs):
        if at.type == PERF_TYPE_TRACEPOINT and at.config in by_id:
            attr_index[by_id[at.config].name] = k
            formats[by_id[at.config].name] = by_id[at.config]
    missing = [e for e in EVENTS if e not in attr_index]
    if missing:
        raise SystemExit(f"{path}: the template recording lacks {', '.join(missing)}")
    sts = {info.attrs[attr_index[e]].sample_type for e in EVENTS}
    if len(sts) != 1:
        raise SystemExit(f"{path}: tracepoints recorded with different sample_types {sts}")
    preamble = []
    for typ, rec in _records(buf, d_off, d_off + d_size):
        if typ == REC_FINISHED_INIT:
            break
        if typ == REC_THREAD_MAP or (typ == REC_MMAP and struct.unpack_from("<i", rec, 8)[0] == -1):
            preamble.append(rec)
    first_ns = struct.unpack_from("<Q", features[F_SAMPLE_TIME], 0)[0] if F_SAMPLE_TIME in features else 10**12
    return Template(attr_size, attrs, names, formats, attr_index, sts.pop(), features, preamble, first_ns,
                    str(info.features.get("arch", "x86_64")))


def _perf_string(s: str) -> bytes:
    raw = s.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 64)
    return struct.pack("<I", len(raw)) + raw


# --- the sample layout ---------------------------------------------------------------------------

S_IDENTIFIER, S_IP, S_TID, S_TIME, S_ADDR, S_ID, S_STREAM_ID, S_CPU, S_PERIOD, S_RAW = (
    1 << 16, 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 6, 1 << 9, 1 << 7, 1 << 8, 1 << 10)
_SUPPORTED = S_IDENTIFIER | S_IP | S_TID | S_TIME | S_ADDR | S_ID | S_STREAM_ID | S_CPU | S_PERIOD | S_RAW


@dataclasses.dataclass
class Layout:
    """Byte offsets of one event's sample record, and its constant bytes."""

    size: int
    template: np.ndarray  # uint8[size]
    id_offs: list[int]  # where the sample id goes (IDENTIFIER and ID)
    tid_off: int
    time_off: int
    cpu_off: int
    raw_off: int  # start of the tracepoint payload
    fields: dict  # field name -> (offset in the record, size, data_loc string slot or -1)


def layout(tp: Template, name: str, kernel_ip: int) -> Layout:
    st = tp.sample_type
    if st & ~_SUPPORTED or not st & S_RAW or not st & S_TIME or not st & S_TID or not st & S_CPU:
        raise SystemExit(f"sample_type {st:#x} of the template is not one this writer lays out")
    fmt = tp.formats[name]
    fixed = max(f.offset + f.size for f in fmt.fields.values())
    strings = [f for f in fmt.fields.values() if f.data_loc]
    entry = fixed + 16 * len(strings)  # each __data_loc string gets a 16-byte slot (TASK_COMM_LEN)
    raw_size = -(-(entry + 4) // 8) * 8 - 4  # perf pads u32 size + payload to 8 bytes
    o, offs = 8, {}
    for bit in (S_IDENTIFIER, S_IP, S_TID, S_TIME, S_ADDR, S_ID, S_STREAM_ID, S_CPU, S_PERIOD):
        if st & bit:
            offs[bit] = o
            o += 8
    raw_off = o + 4
    size = raw_off + raw_size
    rec = np.zeros(size, np.uint8)
    struct.pack_into("<IHH", rec, 0, REC_SAMPLE, 1, size)  # misc 1: PERF_RECORD_MISC_KERNEL
    if S_IP in offs:
        struct.pack_into("<Q", rec, offs[S_IP], kernel_ip)
    if S_PERIOD in offs:
        struct.pack_into("<Q", rec, offs[S_PERIOD], 1)
    struct.pack_into("<I", rec, raw_off - 4, raw_size)
    struct.pack_into("<H", rec, raw_off + fmt.fields["common_type"].offset, fmt.id)
    struct.pack_into("<B", rec, raw_off + fmt.fields["common_flags"].offset, 1)
    fields, slot = {}, fixed
    for f in fmt.fields.values():
        if f.data_loc:
            fields[f.name] = (raw_off + f.offset, f.size, raw_off + slot)
            slot += 16
        else:
            fields[f.name] = (raw_off + f.offset, f.size, -1)
    return Layout(size, rec, [offs[b] for b in (S_IDENTIFIER, S_ID) if b in offs], offs[S_TID], offs[S_TIME],
                  offs[S_CPU], raw_off, fields)


def _put(rec: np.ndarray, off: int, size: int, values, signed: bool = True) -> None:
    dt = np.dtype(f"<{'i' if signed else 'u'}{size}")
    rec[:, off:off + size] = np.asarray(values).astype(dt).view(np.uint8).reshape(len(rec), size)


def _put_comm(rec: np.ndarray, lay: Layout, field: str, names: np.ndarray, lens: np.ndarray, which) -> None:
    """A comm field: a char[16] in place, or a __data_loc string in its slot (offset | length << 16)."""
    off, size, slot = lay.fields[field]
    if slot < 0:
        rec[:, off:off + size] = names[which, :size]
    else:
        _put(rec, off, 4, (slot - lay.raw_off) | (lens[which] << 16), signed=False)
        rec[:, slot:slot + 16] = names[which]


@numba.njit(cache=True)
def _scatter(out, src, size, dst):
    """Copy the fixed-size records src (flat, `size` bytes each) to out at offsets dst."""
    for k in range(dst.shape[0]):
        d = dst[k]
        s = k * size
        for j in range(size):
            out[d + j] = src[s + j]


# --- the schedule ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Ring:
    """Threads passing one token on their own CPUs; its state between chunks."""

    tids: np.ndarray
    cpu_of: np.ndarray  # CPU of each thread slot
    step: int = 0
    t_in: int = 0  # when the current holder was switched in


def make_rings(threads: int, cpus: int) -> list[Ring]:
    n = max(1, min(threads // 2, cpus))
    rings = []
    for g in range(n):
        slots = np.arange(g, threads, n)
        own = np.arange(g, cpus, n)
        rings.append(Ring(PID + slots, own[np.arange(len(slots)) % len(own)]))
    return rings


def ring_steps(ring: Ring, steps: int, rng: np.random.Generator, running: np.ndarray):
    """Event columns of `steps` handoffs of one ring (time-ordered), advancing its state.

    Adds each finished run's length to running[tid - PID]."""
    tg = len(ring.tids)
    idx = ring.step + np.arange(steps)
    a_slot, b_slot = idx % tg, (idx + 1) % tg
    a, b = ring.tids[a_slot], ring.tids[b_slot]
    ca, cb = ring.cpu_of[a_slot], ring.cpu_of[b_slot]
    other = ca != cb
    r = rng.integers(*RUN_NS, steps)
    d = np.where(other, rng.integers(*LATENCY_NS, steps), 0)
    step_len = r + 850 + d
    ts = ring.t_in + np.concatenate(([0], np.cumsum(step_len)[:-1]))
    e0 = ts + r
    run = e0 + 850 - ts
    running += np.bincount(a - PID, weights=run, minlength=len(running)).astype(np.int64)  # exact below 2^53
    t_next = e0 + 850 + d
    ring.step += steps
    ring.t_in = int(t_next[-1])
    zero = np.zeros(steps, np.int64)
    # slot: (kind, time, cpu, context tid, arg0, arg1, arg2)
    slots = [
        (ENTER, e0, ca, a, FUTEX_ADDR + zero, FUTEX_WAKE_PRIVATE + zero, 1 + zero),
        (WAKEUP, e0 + 200, ca, a, b, cb, zero),
        (EXIT, e0 + 400, ca, a, 1 + zero, zero, zero),
        (ENTER, e0 + 600, ca, a, FUTEX_ADDR + zero, FUTEX_WAIT_PRIVATE + zero, zero),
        (STAT, e0 + 850, ca, a, a, run, zero),  # the kernel's update_curr, just before the switch
        (SWITCH, e0 + 850, ca, a, a, np.where(other, 0, b), 1 + zero),  # prev_state S
        (SWITCH, t_next, cb, zero, zero, b, zero),  # from idle, only when the CPUs differ
        (EXIT, t_next + 300, cb, b, zero, zero, zero),
    ]
    keep = np.ones((steps, len(slots)), bool)
    keep[:, 6] = other
    cols = []
    for j in range(7):
        c = np.empty((steps, len(slots)), np.int64)
        for s, sl in enumerate(slots):
            c[:, s] = sl[j]
        cols.append(c[keep])
    return cols


def ring_open(ring: Ring, t0: int):
    """The first holder switched in from idle at t0."""
    ring.t_in = t0
    a, ca = int(ring.tids[0]), int(ring.cpu_of[0])
    return [np.array([v], np.int64) for v in (SWITCH, t0, ca, 0, 0, a, 0)]


def ring_close(ring: Ring, rng: np.random.Generator, running: np.ndarray):
    """The holder's last run, ending in a wait with nobody to wake: every thread asleep at the end."""
    slot = ring.step % len(ring.tids)
    a, ca = int(ring.tids[slot]), int(ring.cpu_of[slot])
    e0 = ring.t_in + int(rng.integers(*RUN_NS))
    run = e0 + 250 - ring.t_in
    running[a - PID] += run
    rows = [(ENTER, e0, ca, a, FUTEX_ADDR, FUTEX_WAIT_PRIVATE, 0), (STAT, e0 + 250, ca, a, a, run, 0),
            (SWITCH, e0 + 250, ca, a, a, 0, 1)]
    return [np.array(c, np.int64) for c in zip(*rows, strict=True)]


# --- the file ------------------------------------------------------------------------------------


class Encoder:
    """Turns event columns into PERF_RECORD_SAMPLE bytes by the template's layouts."""

    def __init__(self, tp: Template, cpus: int, id_of: np.ndarray):
        self.lay = [layout(tp, e, 0xFFFF_FFFF_8100_0000 + 0x1000 * k) for k, e in enumerate(EVENTS)]
        self.id_of = id_of  # [kind, cpu] -> sample id
        self.cpus = cpus
        names = [f"swapper/{c}" for c in range(cpus)] + [COMM]  # comm index: cpu for idle, cpus for synth
        self.names = np.zeros((len(names), 16), np.uint8)
        for k, n in enumerate(names):
            self.names[k, :len(n)] = np.frombuffer(n.encode(), np.uint8)
        self.lens = np.array([len(n) + 1 for n in names], np.int64)
        self.nr = SYSCALL_FUTEX.get(tp.arch)
        if self.nr is None:
            raise SystemExit(f"no futex syscall number known for arch {tp.arch}")

    def encode(self, kind, t, cpu, ctx, a0, a1, a2, rounds) -> np.ndarray:
        """Bytes of the records in the order given, with a FINISHED_ROUND after each round's last."""
        sizes = np.array([lay.size for lay in self.lay], np.int64)[kind]
        ends = np.flatnonzero(np.diff(rounds, append=rounds[-1] + 1) != 0)
        extra = np.zeros(len(kind), np.int64)
        extra[ends] = 8
        step = sizes + extra
        off = np.concatenate(([0], np.cumsum(step)[:-1]))
        out = np.empty(int(step.sum()), np.uint8)
        out64 = out.view(np.uint64)
        out64[(off[ends] + sizes[ends]) // 8] = np.uint64(REC_FINISHED_ROUND | 8 << 48)
        for k, lay in enumerate(self.lay):
            sel = np.flatnonzero(kind == k)
            if not len(sel):
                continue
            rec = np.tile(lay.template, (len(sel), 1))
            c = cpu[sel]
            for o in lay.id_offs:
                _put(rec, o, 8, self.id_of[k, c], signed=False)
            _put(rec, lay.tid_off, 4, np.where(ctx[sel] == 0, 0, PID))
            _put(rec, lay.tid_off + 4, 4, ctx[sel])
            _put(rec, lay.time_off, 8, t[sel])
            _put(rec, lay.cpu_off, 4, c)
            self._payload(k, lay, rec, ctx[sel], c, a0[sel], a1[sel], a2[sel])
            _scatter(out, rec.reshape(-1), lay.size, off[sel])
        return out

    def _payload(self, k, lay, rec, ctx, c, a0, a1, a2):
        f = lay.fields
        _put(rec, f["common_pid"][0], 4, ctx)
        comm_of = lambda tid: np.where(tid == 0, c, self.cpus)  # noqa: E731 - swapper/<cpu> or synth
        if k == SWITCH:
            _put_comm(rec, lay, "prev_comm", self.names, self.lens, comm_of(a0))
            _put(rec, f["prev_pid"][0], 4, a0)
            _put(rec, f["prev_prio"][0], 4, 120 + np.zeros_like(a0))
            _put(rec, f["prev_state"][0], f["prev_state"][1], a2)
            _put_comm(rec, lay, "next_comm", self.names, self.lens, comm_of(a1))
            _put(rec, f["next_pid"][0], 4, a1)
            _put(rec, f["next_prio"][0], 4, 120 + np.zeros_like(a1))
        elif k == WAKEUP:
            _put_comm(rec, lay, "comm", self.names, self.lens, comm_of(a0))
            _put(rec, f["pid"][0], 4, a0)
            _put(rec, f["prio"][0], 4, 120 + np.zeros_like(a0))
            if "success" in f:  # kernels before 4.x
                _put(rec, f["success"][0], f["success"][1], 1 + np.zeros_like(a0))
            _put(rec, f["target_cpu"][0], 4, a1)
        elif k == ENTER:
            _put(rec, f["__syscall_nr"][0], 4, self.nr + np.zeros_like(a0))
            _put(rec, f["uaddr"][0], 8, a0, signed=False)
            _put(rec, f["op"][0], 8, a1, signed=False)
            _put(rec, f["val"][0], 8, a2, signed=False)
        elif k == EXIT:
            _put(rec, f["__syscall_nr"][0], 4, self.nr + np.zeros_like(a0))
            _put(rec, f["ret"][0], 8, a0)
        else:
            _put_comm(rec, lay, "comm", self.names, self.lens, comm_of(a0))
            _put(rec, f["pid"][0], 4, a0)
            _put(rec, f["runtime"][0], 8, a1, signed=False)
            if "vruntime" in f:  # kernels before 6.8
                _put(rec, f["vruntime"][0], 8, a1, signed=False)


def _side_band(tp: Template, cpus: int, ids: list[list[int]], tids: list[int]) -> bytes:
    """Records before the samples: perf's kept ones, ID_INDEX and CPU_MAP for C CPUs, and the
    FORK and COMM perf synthesizes for each thread of the process (sample_id trailers zero)."""
    out = list(tp.preamble)
    entries = [(i, c, c, -1) for k in range(len(tp.attrs)) for c, i in enumerate(ids[k])]
    out.append(struct.pack("<IHHQ", REC_ID_INDEX, 0, 16 + 32 * len(entries), len(entries))
               + b"".join(struct.pack("<QQQq", *e) for e in entries))
    out.append(struct.pack("<IHHHBBHH", REC_CPU_MAP, 0, 16, 2, 0, 0, 0, cpus - 1))  # a RANGE cpu map
    trailer = 32  # sample_id: TID, TIME, CPU, IDENTIFIER of the side-band event (synthesized: zero)
    for tid in tids:
        ppid, ptid = (1, 1) if tid == PID else (PID, PID)
        out.append(struct.pack("<IHHIIIIQ", REC_FORK, 0, 32 + trailer, PID, ppid, tid, ptid, 0) + bytes(trailer))
        name = COMM.encode() + b"\0"
        name += b"\0" * (-len(name) % 8)
        out.append(struct.pack("<IHHII", REC_COMM, 0, 16 + len(name) + trailer, PID, tid) + name + bytes(trailer))
    out.append(struct.pack("<IHH", REC_FINISHED_INIT, 0, 8))
    return b"".join(out)


def _features(tp: Template, cpus: int, ids: list[list[int]], first: int, last: int, argv: list[str]) -> dict:
    feats = {b: v for b, v in tp.features.items() if b not in DROPPED_FEATURES}
    feats[F_NRCPUS] = struct.pack("<II", cpus, cpus)
    feats[F_SAMPLE_TIME] = struct.pack("<QQ", first, last)
    feats[F_CMDLINE] = struct.pack("<I", len(argv)) + b"".join(_perf_string(a) for a in argv)
    raw = tp.features[F_EVENT_DESC]  # each event's attr, name and ids: the ids are ours now
    nre, sz = struct.unpack_from("<II", raw, 0)
    o, parts = 8, [raw[:8]]
    for k in range(nre):
        attr = raw[o:o + sz]
        o += sz
        nr_ids, slen = struct.unpack_from("<II", raw, o)
        name = raw[o + 4:o + 8 + slen]
        o += 8 + slen + 8 * nr_ids
        parts += [attr, struct.pack("<I", len(ids[k])), name, struct.pack(f"<{len(ids[k])}Q", *ids[k])]
    feats[F_EVENT_DESC] = b"".join(parts)
    return feats


def schedule(rings: list[Ring], steps: int, steps_chunk: int, t0: int, rng: np.random.Generator,
             running: np.ndarray, round_events: int = ROUND_EVENTS):
    """Chunks of event columns (kind, time, cpu, context tid, arg0-2) in file order, with each
    event's round: every chunk holds the events up to the time all rings have reached (later ones
    wait for the next chunk), so rounds are consecutive time windows, each written CPU by CPU.
    Adds each run to running[tid - PID]."""
    carry = [np.concatenate(c) for c in zip(*(ring_open(r, t0 + 1000 * (g + 1)) for g, r in enumerate(rings)),
                                            strict=True)]
    done = rounds_seen = 0
    while True:
        n = min(steps_chunk, steps - done)
        last = n <= 0
        parts = [carry] + [ring_close(r, rng, running) if last else ring_steps(r, n, rng, running) for r in rings]
        done += max(n, 0)
        cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
        cut = np.iinfo(np.int64).max if last else min(r.t_in for r in rings)
        now = cols[1] <= cut
        carry = [c[~now] for c in cols]
        cols = [c[now] for c in cols]
        if len(cols[0]):
            rank = np.empty(len(cols[1]), np.int64)
            rank[np.argsort(cols[1], kind="stable")] = np.arange(len(rank))
            rnd = rounds_seen + rank // round_events
            order = np.lexsort((rank, cols[2], rnd))  # per round, each CPU's buffer in turn
            rounds_seen = int(rnd.max()) + 1
            yield [c[order] for c in cols], rnd[order]
        if last:
            return


def write(path, events: int, threads: int = 4, cpus: int = 4, seed: int = 0, *, template: str | None = None,
          chunk: int = 500_000) -> Written:
    """Write a perf.data of about `events` tracepoint samples; return what it holds."""
    if threads < 2:
        raise SystemExit("--threads must be at least 2 (a handoff needs two threads)")
    if not 1 <= cpus <= MAX_CPUS:
        raise SystemExit(f"--cpus must be between 1 and {MAX_CPUS}")
    with tempfile.TemporaryDirectory(prefix="synth-template-") as tmp:
        tp = load_template(Path(template) if template else record_template(Path(tmp) / "template.data"))
    rng = np.random.default_rng(seed)
    ids = [[1000 + k * cpus + c for c in range(cpus)] for k in range(len(tp.attrs))]
    id_of = np.array([ids[tp.attr_index[e]] for e in EVENTS], np.uint64)
    enc = Encoder(tp, cpus, id_of)
    rings = make_rings(threads, cpus)
    tids = sorted(int(t) for r in rings for t in r.tids)
    running = np.zeros(threads, np.int64)
    counts = np.zeros(len(EVENTS), np.int64)
    per_step = 8  # at most; the run ends when the count is reached
    steps_total = max(1, (events - 4 * len(rings)) // (per_step * len(rings)))
    steps_chunk = max(1, chunk // (per_step * len(rings)))
    argv = ["synth_perf_data.py", "--events", str(events), "-o", str(path), "--threads", str(threads), "--cpus",
            str(cpus), "--seed", str(seed)]
    first = tp.first_ns
    path = str(path)
    ids_blob = b"".join(struct.pack(f"<{len(i)}Q", *i) for i in ids)
    attr_off = HEADER_SIZE + len(ids_blob)
    attr_blob, o = [], HEADER_SIZE
    for k, attr in enumerate(tp.attrs):
        attr_blob.append(attr + struct.pack("<QQ", o, 8 * len(ids[k])))
        o += 8 * len(ids[k])
    attr_blob = b"".join(attr_blob)
    data_off = attr_off + len(attr_blob)
    with open(path, "wb") as fh:
        fh.write(bytes(data_off))
        fh.write(_side_band(tp, cpus, ids, tids))
        last_t = first
        for cols, rnd in schedule(rings, steps_total, steps_chunk, first, rng, running):
            fh.write(enc.encode(*cols, rnd).data)
            counts += np.bincount(cols[0], minlength=len(EVENTS))
            last_t = max(last_t, int(cols[1].max()))
        data_end = fh.tell()
        feats = _features(tp, cpus, ids, first, last_t, argv)
        bits = sorted(feats)
        table_size = 16 * len(bits)
        o = data_end + table_size
        table = []
        for b in bits:
            table.append(struct.pack("<QQ", o, len(feats[b])))
            o += len(feats[b])
        fh.write(b"".join(table) + b"".join(feats[b] for b in bits))
        feat_bits = sum(1 << b for b in bits)
        fh.seek(0)
        fh.write(MAGIC + struct.pack("<8Q", HEADER_SIZE, tp.attr_size, attr_off, len(attr_blob), data_off,
                                     data_end - data_off, 0, 0) + feat_bits.to_bytes(32, "little"))
        fh.seek(HEADER_SIZE)
        fh.write(ids_blob + attr_blob)
        size = o
    return Written(path, int(counts.sum()), {e: int(c) for e, c in zip(EVENTS, counts, strict=True)},
                   {int(PID + k): int(v) for k, v in enumerate(running)}, PID, COMM, tids, cpus, first, last_t, size)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("-o", "--output")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--cpus", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--template", help="a perf.data of scalestack's tracepoints to take the layout from "
                    "(default: record a tiny one now)")
    ap.add_argument("--json", help="write what the file holds (counts, running time per thread) here")
    ap.add_argument("--quick", action="store_true", help="10^5 events to a temporary file, then delete it")
    args = ap.parse_args(argv)
    if not args.quick and not args.output:
        ap.error("-o FILE is required (or --quick)")
    with tempfile.TemporaryDirectory(prefix="synth-") as tmp:
        out = Path(tmp) / "synth.data" if args.quick else Path(args.output)
        t0 = time.perf_counter()
        w = write(out, 100_000 if args.quick else args.events, args.threads, args.cpus, args.seed,
                  template=args.template)
        dt = time.perf_counter() - t0
        print(f"{w.events:,d} events, {w.bytes / 1e6:.1f} MB in {dt:.1f} s ({w.events / dt / 1e6:.2f} M events/s) "
              f"-> {shlex.quote(str(out)) if not args.quick else '(deleted)'}")
        print("  " + ", ".join(f"{k} {v:,d}" for k, v in w.counts.items()))
        if args.json:
            Path(args.json).write_text(json.dumps(dataclasses.asdict(w), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
