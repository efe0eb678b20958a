"""The one data model: who existed, and what state each thread was in at every instant.

Every source (a live recording, an imported file, the simulator) produces a `Trace`; every
analysis reads only a `Trace`. It is columnar: three small tables of NumPy arrays plus a
metadata dict, so whole-trace analyses are vectorized and saving to Parquet is a copy.

Times are int64 nanoseconds on one monotonic clock (the recorder uses CLOCK_MONOTONIC).
For each thread the state intervals tile its lifetime ``[start_ns, end_ns)`` exactly: no gap,
no overlap (`Trace.validate` checks it, and the tests property-check it).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from scalestack.errors import UserError

SCHEMA_VERSION = 1


class State(enum.IntEnum):
    """What a thread is doing during one interval."""

    RUNNING = 0  # on a CPU
    RUNNABLE = 1  # ready (woken or preempted) but waiting for a CPU
    SYNC_WAIT = 2  # blocked inside a futex wait (lock, barrier, condvar, join); `addr` says which
    IO_WAIT = 3  # uninterruptible sleep (disk, page fault): the kernel's D state
    SLEEP = 4  # any other blocking: poll, nanosleep, read on a pipe, ...
    UNKNOWN = 5  # not observed (a thread that existed before an attach, until its first event)

    @property
    def label(self) -> str:
        return self.name.lower()


STATE_NAMES = [s.label for s in State]


class _Table:
    """A fixed-schema set of equal-length columns. Subclasses declare SCHEMA."""

    SCHEMA: ClassVar[dict[str, Any]] = {}
    DEFAULTS: ClassVar[dict[str, Any]] = {}  # columns that may be omitted: filled with this value

    def __init__(self, **columns: Any):
        n = None
        given = [len(c) for k, c in columns.items() if k in self.SCHEMA]
        for name, dtype in self.SCHEMA.items():
            if name not in columns:
                if name in self.DEFAULTS and given:
                    columns[name] = np.full(given[0], self.DEFAULTS[name], dtype=dtype)
                else:
                    raise TypeError(f"{type(self).__name__}: missing column {name!r}")
            col = columns.pop(name)
            if dtype is object:
                arr = np.empty(len(col), dtype=object)
                arr[:] = list(col)
            else:
                arr = np.ascontiguousarray(col, dtype=dtype)
            if arr.ndim != 1:
                raise ValueError(f"column {name!r} must be one-dimensional")
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"column {name!r} has {len(arr)} rows, expected {n}")
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        if columns:
            raise TypeError(f"{type(self).__name__}: unknown columns {sorted(columns)}")

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __len__(self) -> int:
        first = next(iter(self.SCHEMA))
        return len(getattr(self, first))

    def columns(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.SCHEMA}

    def take(self, index: np.ndarray) -> _Table:
        """Rows selected by a boolean mask or an index array, as a new table."""
        return type(self)(**{k: v[index] for k, v in self.columns().items()})

    @classmethod
    def empty(cls) -> _Table:
        return cls(**{k: np.empty(0, dtype=v) for k, v in cls.SCHEMA.items()})

    @classmethod
    def concat(cls, tables: Iterable[_Table]) -> _Table:
        tables = list(tables)
        if not tables:
            return cls.empty()
        return cls(**{k: np.concatenate([getattr(t, k) for t in tables]) for k in cls.SCHEMA})

    def to_frame(self):
        """This table as a pandas DataFrame (pandas is an optional dependency)."""
        import pandas as pd

        return pd.DataFrame(self.columns())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(np.array_equal(a, b) for a, b in zip(self.columns().values(), other.columns().values(), strict=True))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} rows)"


class ThreadTable(_Table):
    """One row per thread.

    tid/pid: kernel thread id and process (thread-group) id. ppid: tid of the creator (-1 if
    unknown). name: latest name (15 chars for Linux comms). role: from `scalestack.trace.roles`.
    start_ns/end_ns: lifetime inside the recording. start_known: False when the thread existed
    before recording started (its first state is UNKNOWN until its first event). exited: it
    ended inside the recording.
    """

    SCHEMA: ClassVar[dict[str, Any]] = {
        "tid": np.int32,
        "pid": np.int32,
        "ppid": np.int32,
        "name": object,
        "role": object,
        "start_ns": np.int64,
        "end_ns": np.int64,
        "start_known": np.bool_,
        "exited": np.bool_,
    }


class StateTable(_Table):
    """One row per maximal interval of one thread in one state, sorted by (tid, start_ns).

    cpu: the CPU while RUNNING (the target CPU while RUNNABLE), else -1. addr: the futex
    address while SYNC_WAIT (or the simulator's object id), else 0. waker: tid that woke the
    thread at the end of a blocked interval, -1 if unknown. repaired: the interval's start or
    end was reconstructed across missing kernel events (see `scalestack.trace.builder`).
    """

    SCHEMA: ClassVar[dict[str, Any]] = {
        "tid": np.int32,
        "start_ns": np.int64,
        "end_ns": np.int64,
        "state": np.uint8,
        "cpu": np.int16,
        "addr": np.uint64,
        "waker": np.int32,
        "repaired": np.bool_,
    }

    @property
    def duration_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns


class NameTable(_Table):
    """Thread names over time: a row each time a thread got a (new) name."""

    SCHEMA: ClassVar[dict[str, Any]] = {"tid": np.int32, "time_ns": np.int64, "name": object}


class SampleTable(_Table):
    """Periodic samples of what each thread was executing (`record --sample`), sorted by time.

    ip: instruction pointer (kernel addresses included). symbol: the function perf resolved
    (without the +offset; "[unknown]" when perf could not). offset: ip's offset in the symbol.
    binary: the executable or library (perf's dso). Phase detection reads these. stack: the
    sample's call stack, a row id of `Trace.stacks` (-1: recorded without ``--stacks``).
    """

    SCHEMA: ClassVar[dict[str, Any]] = {
        "tid": np.int32,
        "time_ns": np.int64,
        "cpu": np.int16,
        "ip": np.uint64,
        "offset": np.int64,
        "symbol": object,
        "binary": object,
        "stack": np.int32,
    }
    DEFAULTS: ClassVar[dict[str, Any]] = {"stack": -1}


class FrameTable(_Table):
    """Distinct code locations seen in call stacks; a frame's id is its row.

    ip: the address as perf prints it in a call chain: relative to its binary for user code,
    absolute for the kernel. symbol: the function (perf's
    resolution, demangled; "[unknown]" when none). offset: ip's offset in it. binary: the
    executable, library, "[kernel.kallsyms]", a JIT map (/tmp/perf-PID.map) or "[unknown]".
    """

    SCHEMA: ClassVar[dict[str, Any]] = {"ip": np.uint64, "symbol": object, "offset": np.int64, "binary": object}


class StackTable(_Table):
    """Distinct call stacks, flattened: one row per frame of a stack, leaf first (depth 0).

    A stack's id is the value in `stack`; ids run 0..n-1 and rows are sorted by (stack, depth).
    `frame` is a row of `Trace.frames`.
    """

    SCHEMA: ClassVar[dict[str, Any]] = {"stack": np.int32, "depth": np.int16, "frame": np.int32}

    def frames_of(self, stack_id: int) -> np.ndarray:
        """Frame ids of one stack, leaf first."""
        lo, hi = np.searchsorted(self.stack, [stack_id, stack_id + 1])
        return self.frame[lo:hi]


class FutexCallTable(_Table):
    """Every futex call a thread made, with its call stack (``record --stacks``), sorted by time.

    op: the futex command (FUTEX_WAIT=0, FUTEX_WAKE=1, ... without the private/clock flags).
    addr: the futex word. stack: row id of `Trace.stacks` (-1 if perf could not walk it).
    A SYNC_WAIT state starts just after its thread's wait call; the waker's wake call on the
    same address just before the state ends is where the lock was released.
    """

    SCHEMA: ClassVar[dict[str, Any]] = {"tid": np.int32, "time_ns": np.int64, "op": np.int16,
                                        "addr": np.uint64, "stack": np.int32}


class SwitchSpanTable(_Table):
    """On-CPU spans at the scheduler's switch instants (switch-in to switch-out), per thread.

    Criticality divides wall-clock time among the threads on a CPU at each instant, so it needs
    where each slice lies in time; RUNNING in `states` is the kernel's runtime charge, right in
    total but laid out from its reports. Recordings carry both (`switch_spans`);
    `repaired` marks spans rebuilt from runtime reports where perf lost a switch. Empty for
    simulated and imported traces: criticality then uses RUNNING.
    """

    SCHEMA: ClassVar[dict[str, Any]] = {"tid": np.int32, "start_ns": np.int64, "end_ns": np.int64, "repaired": np.bool_}


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    """A recorded (or imported, or simulated) multi-threaded execution.

    Attributes
    ----------
    threads : ThreadTable
    states : StateTable
        Per-thread state intervals; for each thread they tile ``[start_ns, end_ns)``.
    names : NameTable
        Name history (JVMs and thread pools rename threads after creating them).
    samples : SampleTable
        What each thread was executing, sampled (empty unless recorded with ``--sample``).
    switch_spans : SwitchSpanTable
        On-CPU spans at switch instants, for criticality (recordings only).
    frames, stacks : FrameTable, StackTable
        Deduplicated code locations and call stacks (``record --stacks``; empty otherwise).
    futex_calls : FutexCallTable
        Futex wait and wake calls with their call stacks (``record --stacks``).
    meta : dict
        JSON-serialisable facts about the run: ``command``, ``exit_status``, ``signal``,
        ``cores``, ``kernel``, ``perf_version``, ``clock``, ``start_ns``, ``end_ns``,
        ``source`` (perf, perf-data, perf-script, chrome, sim), ``lost_events``,
        ``chain_gaps``, ``warnings`` (list of strings), ``schema_version``.
    """

    threads: ThreadTable
    states: StateTable
    names: NameTable
    meta: Mapping[str, Any]
    samples: SampleTable = dataclasses.field(default_factory=lambda: SampleTable.empty())
    switch_spans: SwitchSpanTable = dataclasses.field(default_factory=lambda: SwitchSpanTable.empty())
    frames: FrameTable = dataclasses.field(default_factory=lambda: FrameTable.empty())
    stacks: StackTable = dataclasses.field(default_factory=lambda: StackTable.empty())
    futex_calls: FutexCallTable = dataclasses.field(default_factory=lambda: FutexCallTable.empty())

    def __post_init__(self) -> None:
        meta = dict(self.meta)
        meta.setdefault("schema_version", SCHEMA_VERSION)
        meta.setdefault("warnings", [])
        if "start_ns" not in meta or "end_ns" not in meta:
            if len(self.threads):
                meta.setdefault("start_ns", int(self.threads.start_ns.min()))
                meta.setdefault("end_ns", int(self.threads.end_ns.max()))
            else:
                meta.setdefault("start_ns", 0)
                meta.setdefault("end_ns", 0)
        object.__setattr__(self, "meta", meta)

    # ----------------------------------------------------------------- basic facts
    @property
    def start_ns(self) -> int:
        return int(self.meta["start_ns"])

    @property
    def end_ns(self) -> int:
        return int(self.meta["end_ns"])

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def tids(self) -> np.ndarray:
        return self.threads.tid

    @property
    def warnings(self) -> list[str]:
        return list(self.meta.get("warnings", []))

    def thread_index(self, tids: np.ndarray | int, missing: int | None = None) -> np.ndarray:
        """Row index in `threads` of each tid. An unknown tid raises KeyError, or gets `missing` when
        one is given (e.g. -1 for wakers that are not traced threads)."""
        order = np.argsort(self.threads.tid, kind="stable")
        sorted_tids = self.threads.tid[order]
        tids = np.atleast_1d(np.asarray(tids))
        if len(sorted_tids) == 0:
            if missing is None and len(tids):
                raise KeyError(f"no thread with tid {int(tids[0])} in this trace")
            return np.full(len(tids), -1 if missing is None else missing, dtype=np.int64)
        pos = np.clip(np.searchsorted(sorted_tids, tids), 0, len(sorted_tids) - 1)
        found = sorted_tids[pos] == tids
        if missing is None:
            if not found.all():
                raise KeyError(f"no thread with tid {int(tids[~found][0])} in this trace")
            return order[pos]
        return np.where(found, order[pos], missing)

    def time_in_states(self, until_ns: np.ndarray | None = None) -> np.ndarray:
        """ns spent in each State per thread: shape (n_threads, len(State)), rows as `threads`.

        until_ns (one time per thread row) counts each thread only up to that time, e.g. the
        moment it read its own schedstat.
        """
        out = np.zeros((len(self.threads), len(State)), dtype=np.int64)
        if len(self.states) and until_ns is None:
            from scalestack.trace.lookup import state_sums

            order = np.argsort(self.threads.tid, kind="stable")
            sums = state_sums(self.states.tid, self.states.start_ns, self.states.end_ns, self.states.state,
                              self.threads.tid[order], order, len(State))
            if sums is not None:
                out.ravel()[:] = sums.astype(np.int64)
                return out
        if len(self.states):  # a time limit, or a tid that is not a thread or a state beyond State: as always
            row = self.thread_index(self.states.tid)
            dur = self.states.duration_ns
            if until_ns is not None:
                lim = np.asarray(until_ns, np.int64)[row]
                dur = np.clip(np.minimum(self.states.end_ns, lim) - self.states.start_ns, 0, None)
            flat = row * len(State) + self.states.state.astype(np.int64)
            out.ravel()[:] = np.bincount(flat, weights=dur, minlength=out.size).astype(np.int64)
        return out

    # ----------------------------------------------------------------- derived traces
    def with_meta(self, **updates: Any) -> Trace:
        meta = dict(self.meta)
        meta.update(updates)
        return dataclasses.replace(self, meta=meta)

    def with_roles(self, rules: Any = None) -> Trace:
        """A copy whose `threads.role` is recomputed from name rules (see `scalestack.trace.roles`)."""
        from scalestack.trace.roles import assign_roles

        roles = assign_roles(self, rules)
        cols = self.threads.columns()
        cols["role"] = roles
        return dataclasses.replace(self, threads=ThreadTable(**cols))

    def between(self, t0_ns: int, t1_ns: int) -> Trace:
        """The part of the trace inside [t0_ns, t1_ns): intervals clipped, threads trimmed."""
        t0_ns, t1_ns = int(max(t0_ns, self.start_ns)), int(min(t1_ns, self.end_ns))
        if t1_ns <= t0_ns:
            raise UserError(f"the time range [{t0_ns}, {t1_ns}) is empty or outside the trace")
        s = self.states
        keep = (s.end_ns > t0_ns) & (s.start_ns < t1_ns)
        cols = {k: v[keep] for k, v in s.columns().items()}
        cols["start_ns"] = np.maximum(cols["start_ns"], t0_ns)
        cols["end_ns"] = np.minimum(cols["end_ns"], t1_ns)
        th = self.threads
        tkeep = (th.end_ns > t0_ns) & (th.start_ns < t1_ns)
        tcols = {k: v[tkeep] for k, v in th.columns().items()}
        tcols["start_known"] = tcols["start_known"] & (tcols["start_ns"] >= t0_ns)
        tcols["start_ns"] = np.maximum(tcols["start_ns"], t0_ns)
        tcols["exited"] = tcols["exited"] & (tcols["end_ns"] <= t1_ns)
        tcols["end_ns"] = np.minimum(tcols["end_ns"], t1_ns)
        names_keep = np.isin(self.names.tid, tcols["tid"])
        sm = self.samples
        sp = self.switch_spans
        sp_keep = (sp.end_ns > t0_ns) & (sp.start_ns < t1_ns) & np.isin(sp.tid, tcols["tid"])
        sp_cols = {k: v[sp_keep] for k, v in sp.columns().items()}
        sp_cols["start_ns"] = np.maximum(sp_cols["start_ns"], t0_ns)
        sp_cols["end_ns"] = np.minimum(sp_cols["end_ns"], t1_ns)
        return Trace(
            threads=ThreadTable(**tcols),
            states=StateTable(**cols),
            names=self.names.take(names_keep),
            meta={**self.meta, "start_ns": t0_ns, "end_ns": t1_ns},
            samples=sm.take((sm.time_ns >= t0_ns) & (sm.time_ns < t1_ns)),
            switch_spans=SwitchSpanTable(**sp_cols),
            frames=self.frames,
            stacks=self.stacks,
            futex_calls=self.futex_calls.take((self.futex_calls.time_ns >= t0_ns) & (self.futex_calls.time_ns < t1_ns)),
        )

    # ----------------------------------------------------------------- checks
    def validate(self) -> None:
        """Raise ValueError unless every thread's states tile its lifetime exactly."""
        s, th = self.states, self.threads
        if len(np.unique(th.tid)) != len(th):
            raise ValueError("duplicate tids in threads table")
        if np.any(s.end_ns <= s.start_ns):
            i = int(np.argmax(s.end_ns <= s.start_ns))
            raise ValueError(f"empty or negative interval for tid {s.tid[i]} at {s.start_ns[i]}")
        if np.any(s.state > max(State)):
            raise ValueError("unknown state code")
        order = np.lexsort((s.start_ns, s.tid))
        if not np.array_equal(order, np.arange(len(s))):
            raise ValueError("states are not sorted by (tid, start_ns)")
        if len(s) == 0:
            if len(th):
                raise ValueError("threads without any state interval")
            return
        first = np.r_[True, s.tid[1:] != s.tid[:-1]]
        last = np.r_[s.tid[1:] != s.tid[:-1], True]
        gaps = (~first) & (s.start_ns != np.r_[0, s.end_ns[:-1]])
        if np.any(gaps):
            i = int(np.argmax(gaps))
            raise ValueError(f"tid {s.tid[i]}: gap or overlap at {s.start_ns[i]} (previous ends {s.end_ns[i - 1]})")
        rows = self.thread_index(s.tid[first])
        if not np.array_equal(np.sort(rows), np.arange(len(th))):
            raise ValueError("some threads have no state interval")
        if np.any(th.start_ns[rows] != s.start_ns[first]) or np.any(th.end_ns[rows] != s.end_ns[last]):
            raise ValueError("a thread's states do not span its lifetime")

    def equals(self, other: Trace, *, meta_keys: Iterable[str] = ()) -> bool:
        """Same threads, states and names (and the given meta keys)."""
        return (
            self.threads == other.threads
            and self.states == other.states
            and self.names == other.names
            and self.samples == other.samples
            and self.switch_spans == other.switch_spans
            and self.frames == other.frames
            and self.stacks == other.stacks
            and self.futex_calls == other.futex_calls
            and all(self.meta.get(k) == other.meta.get(k) for k in meta_keys)
        )

    def __repr__(self) -> str:
        return (
            f"Trace({len(self.threads)} threads, {len(self.states)} intervals, "
            f"{self.wall_ns / 1e9:.3f} s, source={self.meta.get('source', '?')})"
        )


def make_trace(
    threads: Mapping[str, Any],
    states: Mapping[str, Any],
    names: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    samples: Mapping[str, Any] | None = None,
) -> Trace:
    """Build a Trace from plain columns, filling optional ones with their neutral values.

    Required thread columns: tid, name, start_ns, end_ns. Required state columns: tid,
    start_ns, end_ns, state. States are sorted by (tid, start_ns) here; roles are assigned
    from names when not given.
    """
    th = dict(threads)
    n = len(th["tid"])
    th.setdefault("pid", np.full(n, th["tid"][0] if n else 0, dtype=np.int32))
    th.setdefault("ppid", np.full(n, -1, dtype=np.int32))
    th.setdefault("role", [""] * n)
    th.setdefault("start_known", np.ones(n, dtype=bool))
    th.setdefault("exited", np.ones(n, dtype=bool))
    st = dict(states)
    m = len(st["tid"])
    st.setdefault("cpu", np.full(m, -1, dtype=np.int16))
    st.setdefault("addr", np.zeros(m, dtype=np.uint64))
    st.setdefault("waker", np.full(m, -1, dtype=np.int32))
    st.setdefault("repaired", np.zeros(m, dtype=bool))
    st_table = StateTable(**st)
    order = np.lexsort((st_table.start_ns, st_table.tid))
    st_table = st_table.take(order)
    if names is None:
        names = {"tid": th["tid"], "time_ns": th["start_ns"], "name": th["name"]}
    sample_table = SampleTable.empty() if samples is None else SampleTable(**samples)
    trace = Trace(ThreadTable(**th), st_table, NameTable(**names), dict(meta or {}), sample_table)
    if not any(th["role"]):
        trace = trace.with_roles()
    return trace
