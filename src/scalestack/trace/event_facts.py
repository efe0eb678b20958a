"""What the state builder must know about the whole recording before its walk, summed window by window.

The walk needs the traced threads (process membership by thread-group id, fork lineage), when each
was born, how many CPUs there are and where time starts; the warnings need which threads the kernel
reported runtime for and whether the source names thread groups at all. Each is a fold over the
events that one compiled pass per window of time-sorted events adds to, holding tables of Linux's
task ids (a few MB) and lists of the few rare records (forks, side-band records, a thread seen in a
second process), never anything per event: so a recording too big to hold can be summed as it is
read, and `traced_tids` of events in memory is the same fold over one window.
"""

from __future__ import annotations

import numba
import numpy as np

from scalestack.errors import UserError
from scalestack.trace.events import PID_MAX_LIMIT, Kind, RawEvents

K_FORK, K_EXEC, K_TASK_COMM, K_TASK_FORK = int(Kind.FORK), int(Kind.EXEC), int(Kind.TASK_COMM), int(Kind.TASK_FORK)
K_STAT_RUNTIME = int(Kind.STAT_RUNTIME)
_CAP = 4096  # room for each kind of rare record in a window's first fold


class EventFacts:
    """The fold: `add` each window of time-sorted events in order, then ask.

    `comm`: the process name `traced` will be asked for (its naming events are noted as they pass,
    each window's string table being its own). `limit`: the largest task id the tables hold (Linux's);
    tasks beyond it (corrupt inputs) are listed instead."""

    def __init__(self, comm: str | None = None, limit: int = PID_MAX_LIMIT):
        self.comm = comm
        self.limit = int(limit)
        n = self.limit + 1
        self.named_thread = np.zeros(n if comm is not None else 0, np.bool_)  # a thread the comm's events name
        self.named_group = np.zeros(n if comm is not None else 0, np.bool_)  # a thread group TASK_COMM names so
        self.first_pid = np.zeros(n, np.int32)  # each thread's pid in its first event that has one (0: none)
        self.runtime = np.zeros(n, np.bool_)  # threads with a sched_stat_runtime report
        self.kinds = np.zeros(256, np.int64)
        self.n_events = 0
        self.t_first = self.t_last = None
        self.cpu_max = -1
        self.pid_max = -(1 << 62)
        self._lists: dict[str, list[np.ndarray]] = {k: [] for k in ("named_out", "pairs", "side", "forks")}

    def add(self, events: RawEvents) -> EventFacts:
        """Fold in the next window (time-sorted, after every window added before)."""
        n = len(events)
        if n == 0:
            return self
        if self.comm is not None:
            is_name = np.array([s == self.comm for s in events.comms] + [False], np.bool_)
        else:
            is_name = np.zeros(1, np.bool_)
        cols = (events.time, events.cpu, events.tid, events.pid, events.kind, events.arg0, events.arg1, events.arg2,
                events.comm0, is_name, self.comm is not None, self.named_thread, self.named_group, self.first_pid,
                self.runtime, self.kinds, self.limit)
        named_out, pairs, side, forks, counts, cpu_max, pid_max = _fold(*cols, _CAP, True)
        if counts.max() > _CAP:  # more rare records than room (a window of many forks): again with room
            named_out, pairs, side, forks, _, _, _ = _fold(*cols, int(counts.max()), False)
        for key, arr in (("named_out", named_out), ("pairs", pairs), ("side", side), ("forks", forks)):
            if len(arr):
                self._lists[key].append(arr)
        self.n_events += n
        if self.t_first is None:
            self.t_first = int(events.time[0])
        self.t_last = int(events.time[-1])
        self.cpu_max = max(self.cpu_max, int(cpu_max))
        self.pid_max = max(self.pid_max, int(pid_max))
        return self

    def _list(self, key: str, width: int) -> np.ndarray:
        parts = self._lists[key]
        if len(parts) > 1:
            self._lists[key] = parts = [np.concatenate(parts)]
        return parts[0] if parts else np.zeros((0, width), np.int64)

    @property
    def forks(self) -> np.ndarray:
        """FORK and TASK_FORK records in time order: rows (kind, time, parent, child)."""
        return self._list("forks", 4)

    def count(self, *kinds: Kind) -> int:
        return int(sum(self.kinds[int(k)] for k in kinds))

    @property
    def no_groups(self) -> bool:
        """The source names no thread group (no pid column, no side-band record)."""
        return self.pid_max <= 0 and not self.count(Kind.TASK_COMM, Kind.TASK_FORK)

    def reported_runtime(self, tids: np.ndarray) -> np.ndarray:
        """Which of `tids` (within the tables) had a runtime report."""
        tids = np.asarray(tids, np.int64)
        inside = (tids >= 0) & (tids <= self.limit)
        return inside & self.runtime[np.where(inside, tids, 0)]

    def pid_of(self, tids: np.ndarray) -> np.ndarray:
        """Each task's pid in its first event that has one (tid and pid > 0), else -1."""
        tids = np.asarray(tids, np.int64)
        out = np.full(len(tids), -1, np.int64)
        inside = (tids > 0) & (tids <= self.limit)
        got = self.first_pid[tids[inside]].astype(np.int64)
        out[inside] = np.where(got > 0, got, -1)
        far = np.flatnonzero(tids > self.limit)
        if len(far):  # beyond the table: the first of the listed (tid, pid) pairs, which keep time order
            pairs = self._list("pairs", 2)
            pairs = pairs[pairs[:, 0] > self.limit]
            first = {}
            for t, p in pairs.tolist():
                first.setdefault(t, p)
            out[far] = [first.get(int(t), -1) for t in tids[far]]
        return out

    def traced(self, root_pids: list[int] | None = None, comm: str | None = None) -> tuple[np.ndarray, dict[int, int]]:
        """The tids of the process trees rooted at `root_pids` (or at every process named `comm`):
        see `builder.traced_tids`."""
        roots: set[int] = {int(p) for p in (root_pids or [])}
        if comm is not None:
            if comm != self.comm:
                raise ValueError(f"these facts were gathered for the name {self.comm!r}, not {comm!r}")
            out = self._list("named_out", 2)
            candidates = np.union1d(np.flatnonzero(self.named_thread), out[out[:, 1] == 0, 0]).astype(np.int64)
            groups = np.union1d(np.flatnonzero(self.named_group), out[out[:, 1] == 1, 0]).astype(np.int64)
            first = self.pid_of(candidates)
            mapped = np.where(first > 0, first, candidates)
            roots |= {int(p) for p in np.concatenate([mapped, groups])}
            roots.discard(0)
            roots.discard(-1)
            if not roots:
                raise UserError(f"no process named {comm!r} in the recording; see `scalestack import FILE --list`, or use --pid")
        if not roots:
            raise UserError("no process chosen: give --pid PID or --comm NAME")
        groups = np.array(sorted(roots), np.int64)
        # the tasks the events put in one of the groups: an event's tid by its pid (both > 0), a
        # side-band record's tid by its pid
        table = self.first_pid
        tracked = {int(t) for t in np.flatnonzero((table > 0) & np.isin(table, groups))}
        pairs, side = self._list("pairs", 2), self._list("side", 2)
        tracked |= {int(t) for t in pairs[np.isin(pairs[:, 1], groups), 0]}
        tracked |= {int(t) for t in side[np.isin(side[:, 1], groups), 0]}
        tracked |= roots
        parents: dict[int, int] = {}
        for _kind, _time, parent, child in self.forks.tolist():  # few: one per thread or process created
            if parent in tracked and child not in tracked:
                tracked.add(child)
            if child in tracked and parent in tracked:
                parents.setdefault(child, parent)
        tracked = {t for t in tracked if t > 0}
        return np.array(sorted(tracked), dtype=np.int64), parents


def born_times(forks: np.ndarray, tids: np.ndarray, slot_of: np.ndarray) -> np.ndarray:
    """Each traced thread's first FORK time (-1: none seen), by slot; `forks` as `EventFacts.forks`."""
    born_at = np.full(len(tids), -1, np.int64)
    fork = forks[forks[:, 0] == K_FORK]
    child = fork[:, 3]
    in_set = np.isin(child, tids)
    born_at[slot_of[child[in_set]][::-1]] = fork[in_set, 1][::-1]  # first fork wins
    return born_at


def traced_tids(events: RawEvents, root_pids: list[int] | None = None, comm: str | None = None,
                limit: int = PID_MAX_LIMIT) -> tuple[np.ndarray, dict[int, int]]:
    """The tids of the process trees rooted at `root_pids` (or at every process named `comm`).

    Membership follows the thread-group id where the source records it (perf's sample pid,
    PERF_RECORD_FORK/COMM) and fork lineage everywhere, so threads and child processes of the
    command are traced and nothing else is. Returns (sorted tids, {child tid: creator tid})."""
    return EventFacts(comm, limit).add(events).traced(root_pids, comm)


@numba.njit(cache=True)
def _fold(time, cpu, tid, pid, kind, arg0, arg1, arg2, comm0, is_name, by_name, named_thread, named_group, first_pid,
          runtime, kinds, limit, cap, tally):
    """One window into the tables (in place; `kinds` only with `tally`); returns its rare records
    in room for `cap` each: the tasks its naming events name beyond the tables (task, 1 if a group),
    the (tid, pid) pairs the table of first pids does not hold (a second pid, or a tid beyond the
    table), the side-band records' (tid, pid), the forks' (kind, time, parent, child); how many of
    each there were (more than `cap`: the caller folds the window again with room, without `tally`;
    every table store is idempotent); its largest CPU and pid. A table entry is written only when
    the task differs from the last event's (a store per event made such passes 6x slower)."""
    named_out = np.empty((cap, 2), np.int64)
    pairs = np.empty((cap, 2), np.int64)
    side = np.empty((cap, 2), np.int64)
    forks = np.empty((cap, 4), np.int64)
    n_out = n_pairs = n_side = n_forks = 0
    last_tid = -1
    last_pid = -1
    last_who = -1
    last_grp = -1
    cpu_max = -1
    pid_max = -(1 << 62)
    for i in range(tid.shape[0]):
        k = kind[i]
        t = tid[i]
        p = pid[i]
        if tally:
            kinds[k] += 1
        if cpu[i] > cpu_max:
            cpu_max = cpu[i]
        if p > pid_max:
            pid_max = p
        if p > 0 and t > 0 and (t != last_tid or p != last_pid):
            last_tid = t
            last_pid = p
            if t <= limit and first_pid[t] == 0:
                first_pid[t] = p
            elif t > limit or first_pid[t] != p:
                if n_pairs < cap:
                    pairs[n_pairs, 0] = t
                    pairs[n_pairs, 1] = p
                n_pairs += 1
        if by_name:
            c = comm0[i]
            if 0 <= c < is_name.shape[0] and is_name[c] and k != K_EXEC:
                group = k == K_TASK_COMM
                w = arg1[i] if (group or k == K_FORK) else arg0[i]
                if 0 <= w <= limit:
                    if group and w != last_grp:
                        named_group[w] = True
                        last_grp = w
                    elif not group and w != last_who:
                        named_thread[w] = True
                        last_who = w
                else:
                    if n_out < cap:
                        named_out[n_out, 0] = w
                        named_out[n_out, 1] = 1 if group else 0
                    n_out += 1
        if k == K_TASK_COMM or k == K_TASK_FORK:
            if n_side < cap:
                side[n_side, 0] = arg0[i]
                side[n_side, 1] = arg1[i]
            n_side += 1
        if k == K_FORK or k == K_TASK_FORK:
            if n_forks < cap:
                forks[n_forks, 0] = k
                forks[n_forks, 1] = time[i]
                forks[n_forks, 2] = arg0[i] if k == K_FORK else arg2[i]
                forks[n_forks, 3] = arg1[i] if k == K_FORK else arg0[i]
            n_forks += 1
        if k == K_STAT_RUNTIME and 0 <= arg0[i] <= limit:
            runtime[arg0[i]] = True
    counts = np.array([n_out, n_pairs, n_side, n_forks], np.int64)
    return (named_out[:min(n_out, cap)], pairs[:min(n_pairs, cap)], side[:min(n_side, cap)], forks[:min(n_forks, cap)],
            counts, cpu_max, pid_max)
