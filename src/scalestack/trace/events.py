"""Raw kernel events, the common currency between tokenizers and the state builder.

Every Linux source (perf.data read directly, `perf script` text, tracefs, eBPF) turns its bytes
into one `RawEvents` table: one row per tracepoint hit or side-band record, with a small fixed
set of integer arguments whose meaning depends on `kind`. The shared `state_builder` turns it
into a `Trace`, so a fix to state logic fixes every source at once (the Perfetto split of
tokenizer and parser).

Argument meaning per kind (tid = the task in whose context the event fired, i.e. perf's
sample tid; pid = that task's thread-group id, -1 when the source does not say):

=============  ==================  ==================  ===================  ==================
kind           arg0                arg1                arg2                 comm0 / comm1
=============  ==================  ==================  ===================  ==================
SWITCH         prev tid            next tid            prev_state bits      prev / next comm
WAKEUP         woken tid           target cpu          0                    woken comm
WAKEUP_NEW     woken tid           target cpu          0                    woken comm
FORK           parent tid          child tid           0                    child / parent comm
EXEC           tid (pid field)     old pid             0                    filename
EXIT           exiting tid         0                   0                    comm
RENAME         renamed tid         0                   0                    new / old comm
FUTEX_ENTER    uaddr               op                  0                    -
FUTEX_EXIT     return value        0                   0                    -
FUTEX_WAITV    waiters pointer     nr_futexes          0                    -
NEWTASK        child tid           clone_flags         0                    comm
STAT_RUNTIME   tid (pid field)     runtime ns          0                    comm
MIGRATE        tid (pid field)     orig cpu            dest cpu             comm
SAMPLE         instruction ptr     offset in symbol    0                    symbol / binary
RUN_DELAY      tid                 run delay ns        arrivals (pcount)    -
TASK_COMM      tid                 pid                 1 if from exec       comm      (side band)
TASK_FORK      child tid           child pid           parent tid           -         (side band)
TASK_EXIT      tid                 pid                 0                    -         (side band)
=============  ==================  ==================  ===================  ==================

prev_state bits follow the kernel's task-state report letters: 0 = R (still runnable, including
R+ = preempted), S = 1, D = 2, T = 4, t = 8, X = 16, Z = 32, P = 64, I = 128.

Side-band kinds (TASK_*) are numbered from 12; STAT_RUNTIME and MIGRATE come after them but are
ordinary tracepoints (the kernel's own runtime accounting, and a runnable task moving CPUs).
RUN_DELAY is read by the eBPF collector at every switch-out (schedstat's second and third
figures of prev, `sched_info.run_delay` and `pcount`); other sources have none.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numba
import numpy as np


class Kind(enum.IntEnum):
    SWITCH = 1
    WAKEUP = 2
    WAKEUP_NEW = 3
    FORK = 4
    EXEC = 5
    EXIT = 6
    RENAME = 7
    FUTEX_ENTER = 8
    FUTEX_EXIT = 9
    FUTEX_WAITV = 10
    NEWTASK = 11
    TASK_COMM = 12
    TASK_FORK = 13
    TASK_EXIT = 14
    STAT_RUNTIME = 15
    MIGRATE = 16
    SAMPLE = 17  # a cpu-clock sample of the context task (record --sample)
    RUN_DELAY = 18  # the kernel's cumulative run delay and arrivals of a task at its switch-out (eBPF)


# Tracepoint name -> Kind, for sources that name events.
TRACEPOINT_KINDS: dict[str, Kind] = {
    "sched:sched_switch": Kind.SWITCH,
    "sched:sched_wakeup": Kind.WAKEUP,
    "sched:sched_wakeup_new": Kind.WAKEUP_NEW,
    "sched:sched_process_fork": Kind.FORK,
    "sched:sched_process_exec": Kind.EXEC,
    "sched:sched_process_exit": Kind.EXIT,
    "task:task_rename": Kind.RENAME,
    "task:task_newtask": Kind.NEWTASK,
    "syscalls:sys_enter_futex": Kind.FUTEX_ENTER,
    "syscalls:sys_exit_futex": Kind.FUTEX_EXIT,
    "syscalls:sys_enter_futex_waitv": Kind.FUTEX_WAITV,
    "syscalls:sys_exit_futex_waitv": Kind.FUTEX_EXIT,
    "sched:sched_stat_runtime": Kind.STAT_RUNTIME,
    "sched:sched_migrate_task": Kind.MIGRATE,
}

# prev_state letters -> bits (see module docstring).
STATE_LETTER_BITS = {"R": 0, "S": 1, "D": 2, "T": 4, "t": 8, "X": 16, "Z": 32, "P": 64, "I": 128}
PREV_STATE_DEAD = 16 | 32
PREV_STATE_UNINTERRUPTIBLE = 2  # TASK_UNINTERRUPTIBLE: the D state, IO_WAIT

# futex(2) operations that block the caller (op & FUTEX_CMD_MASK).
FUTEX_CMD_MASK = 0x7F
# Bounds no Linux machine exceeds (PID_MAX_LIMIT on 64-bit; NR_CPUS is at most 8192 on x86-64): an
# event beyond them comes from a corrupt input, and would size per-CPU or per-tid tables
MAX_CPUS = 1 << 16
PID_MAX_LIMIT = 1 << 22
FUTEX_WAIT_OPS = (0, 6, 9, 11, 13)  # WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2

# The tracepoints `scalestack record` enables; each source documents the same list.
RECORD_TRACEPOINTS = [
    "sched:sched_switch",
    "sched:sched_wakeup",
    "sched:sched_wakeup_new",
    "sched:sched_process_fork",
    "sched:sched_process_exec",
    "sched:sched_process_exit",
    "task:task_rename",
    "syscalls:sys_enter_futex",
    "syscalls:sys_exit_futex",
    "sched:sched_stat_runtime",
    "sched:sched_migrate_task",
]

_COLUMNS: dict[str, Any] = {
    "time": np.int64,
    "cpu": np.int32,
    "tid": np.int32,
    "pid": np.int32,
    "kind": np.uint8,
    "arg0": np.int64,
    "arg1": np.int64,
    "arg2": np.int64,
    "comm0": np.int32,
    "comm1": np.int32,
}
COLUMNS = tuple(_COLUMNS)  # the columns of RawEvents, in order


@dataclasses.dataclass(eq=False)
class RawEvents:
    """Columnar raw events. `comms` is the string table that comm0/comm1 index (-1 = none).

    stats counts what the source found dubious or lost: ``lost_events`` (kernel LOST
    records), ``lost_samples``, ``skipped_lines`` and so on; the state builder copies it into
    the Trace metadata.
    """

    time: np.ndarray
    cpu: np.ndarray
    tid: np.ndarray
    pid: np.ndarray
    kind: np.ndarray
    arg0: np.ndarray
    arg1: np.ndarray
    arg2: np.ndarray
    comm0: np.ndarray
    comm1: np.ndarray
    comms: list[str] = dataclasses.field(default_factory=list)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.time)
        for name, dtype in _COLUMNS.items():
            arr = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            if arr.shape != (n,):
                raise ValueError(f"RawEvents column {name!r} has shape {arr.shape}, expected ({n},)")
            setattr(self, name, arr)

    def __len__(self) -> int:
        return len(self.time)

    @classmethod
    def empty(cls) -> RawEvents:
        return cls(**{k: np.empty(0, dtype=v) for k, v in _COLUMNS.items()})

    @classmethod
    def from_rows(cls, rows: list[tuple], comms: list[str] | None = None, stats: dict | None = None) -> RawEvents:
        """From (time, cpu, tid, pid, kind, arg0, arg1, arg2, comm0, comm1) tuples; for tests."""
        if not rows:
            ev = cls.empty()
        else:
            cols = list(zip(*rows, strict=True))
            ev = cls(**{k: np.asarray(c) for k, c in zip(_COLUMNS, cols, strict=True)})
        ev.comms = list(comms or [])
        ev.stats = dict(stats or {})
        return ev

    def sorted(self) -> RawEvents:
        """Stable sort by time (perf writes per-CPU buffers; only FINISHED_ROUNDs order them).
        Already sorted input is returned as it is, checked by one compiled pass (no copy)."""
        if len(self) < 2 or is_sorted(self.time):
            return self
        order = np.argsort(self.time, kind="stable")
        return self.take(order)

    def take(self, index: np.ndarray) -> RawEvents:
        return RawEvents(
            **{k: getattr(self, k)[index] for k in _COLUMNS}, comms=self.comms, stats=dict(self.stats)
        )

    def context_tid(self) -> np.ndarray:
        """The task each event fired in (int64). sched_switch fires in prev's context, but perf
        reports tid -1 for a task already dead, so a switch's context is its prev tid."""
        return _context_tid(self.kind, self.arg0, self.tid, np.zeros(0, np.int64))

    def comm(self, index: int) -> str:
        return self.comms[index] if 0 <= index < len(self.comms) else ""

    def equals(self, other: RawEvents) -> bool:
        """Same rows with the same comm strings (string tables may be ordered differently)."""
        if len(self) != len(other):
            return False
        for k in _COLUMNS:
            if k in ("comm0", "comm1"):
                a = np.array([self.comm(i) for i in getattr(self, k)], dtype=object)
                b = np.array([other.comm(i) for i in getattr(other, k)], dtype=object)
                if not np.array_equal(a, b):
                    return False
            elif not np.array_equal(getattr(self, k), getattr(other, k)):
                return False
        return True



class CommTable:
    """One string table for events read in parts, each part's comm ids indexing its own (a
    string's first part numbers it first)."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def relabel(self, part: RawEvents) -> tuple[np.ndarray, np.ndarray]:
        """The part's comm0 and comm1 as ids of this table (-1, no comm, stays -1)."""
        lut = np.array([self.ids.setdefault(s, len(self.ids)) for s in part.comms] + [-1], np.int32)
        return lut[part.comm0], lut[part.comm1]

    def strings(self) -> list[str]:
        return list(self.ids)


def concat_events(parts: list[RawEvents], stats: dict | None = None) -> RawEvents:
    """The RawEvents of `parts` one after another, as one (e.g. the windows of
    `perf_data.read_perf_data_windows`): each part's comm ids mapped into one string table
    (`CommTable`), `stats` (default: the first part's) as its stats."""
    if not parts:
        ev = RawEvents.empty()
        ev.stats = dict(stats or {})
        return ev
    table = CommTable()
    cols: dict[str, list[np.ndarray]] = {k: [] for k in _COLUMNS}
    for part in parts:
        comm = dict(zip(("comm0", "comm1"), table.relabel(part), strict=True))
        for k in _COLUMNS:
            cols[k].append(comm[k] if k in comm else getattr(part, k))
    ev = RawEvents(**{k: np.concatenate(v) for k, v in cols.items()})
    ev.comms = table.strings()
    ev.stats = dict(parts[0].stats if stats is None else stats)
    return ev


_K_SWITCH = int(Kind.SWITCH)
_K_TASK_COMM, _K_TASK_FORK, _K_TASK_EXIT, _K_SAMPLE = (int(Kind.TASK_COMM), int(Kind.TASK_FORK), int(Kind.TASK_EXIT),
                                                       int(Kind.SAMPLE))


@numba.njit(cache=True, inline="always")
def shows_no_cpu_state(k):
    """Whether an event of kind k says nothing of which task is on its CPU: side-band records
    (comm, fork, exit) carry no CPU state, and CPU samples (read by perf script only) are not read as
    any, so that the states are the same whether perf was there to read them or not."""
    return k == _K_TASK_COMM or k == _K_TASK_FORK or k == _K_TASK_EXIT or k == _K_SAMPLE


@numba.njit(cache=True, inline="always")
def context_of(kind, arg0, tid, i):
    """The task event i fired in (`RawEvents.context_tid()[i]`), read where it is needed: a column
    of it for every event would cost 4-8 bytes an event through the whole build."""
    return arg0[i] if kind[i] == _K_SWITCH else tid[i]


@numba.njit(cache=True)
def _context_tid(kind, arg0, tid, like):
    """`np.where(kind == SWITCH, arg0, tid)` in one pass (no mask), of `like`'s dtype."""
    out = np.empty(kind.shape[0], like.dtype)
    for i in range(kind.shape[0]):
        out[i] = context_of(kind, arg0, tid, i)
    return out


@numba.njit(cache=True)
def is_sorted(x):
    """Whether x never decreases (one pass, no whole-length temporary)."""
    for i in range(1, x.shape[0]):
        if x[i] < x[i - 1]:
            return False
    return True
