"""Plain-language advice from one trace: what limits the program, and what fixing it would gain.

The thesis used criticality stacks to find what to fix (its BFS example: the stack pointed at a
serial step, and parallelising it gave 1.67x / 2.16x). This turns a trace's criticality stack,
the time each thread runs alone, the waits each thread causes (who woke whom, on which futex)
and CPU contention into ranked findings, each with a predicted gain from the dependency replay
of `scalestack.analysis.whatif` (the thread made `factor` times faster) or, for serial time,
Amdahl's bound. A balanced program gets one finding that says so.

Findings are ranked by predicted gain. They are hints with evidence, not proofs: the replay
keeps waits without a known waker and CPU contention as recorded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numba
import numpy as np

from scalestack.analysis.bottle import bottle
from scalestack.analysis.criticality import (
    criticality,
    share_memo,
    state_intervals,
    sweep,
    thread_lookup,
)
from scalestack.analysis.whatif import whatif
from scalestack.analysis.where import WhereResult, idle_threads, where
from scalestack.results import Result
from scalestack.trace import State, Trace
from scalestack.trace.lookup import find_sorted, sift_runs
from scalestack.units import format_ns

if TYPE_CHECKING:
    from scalestack.analysis.bottle import BottleResult
    from scalestack.analysis.criticality import CriticalityResult
    from scalestack.analysis.phase_criticality import PhaseGain
    from scalestack.trace import ThreadTable


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str  # one-thread | critical-thread | phase-critical | serial | pool | lock | spin | cpu-contention | scaling | balanced
    title: str  # one line
    detail: str  # what to do, with the evidence
    predicted_speedup: float  # of the whole program if acted on (1.0: no estimate)
    tid: int | None = None
    addr: int | None = None


@dataclasses.dataclass(frozen=True)
class AdviceResult(Result):
    """Ranked findings (largest predicted gain first) and the facts they were drawn from."""

    findings: list[Finding]
    span_ns: int
    alone_ns: dict[int, int]  # per thread: time it was the only thread running
    caused_wait_ns: dict[int, int]  # per thread: sync wait of others that it ended (others that work, not idle)

    kind = "advice"

    def rows(self) -> list[dict]:
        return [{"rank": i + 1, **dataclasses.asdict(f)} for i, f in enumerate(self.findings)]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "span_ns": self.span_ns, "findings": self.rows(),
                "alone_ns": {str(k): v for k, v in self.alone_ns.items()},
                "caused_wait_ns": {str(k): v for k, v in self.caused_wait_ns.items()}}

    def text(self) -> str:
        return "\n".join(f"{i + 1}. {f.title}\n   {f.detail}" for i, f in enumerate(self.findings))


# a lock with a waiter for at least this share of the run (or of its criticality) is the first finding
SERIALIZING = 0.5


def _serializes(info: dict | None) -> bool:
    """Whether a lock of `where` (two waiters at least, not a join) had a thread waiting on it for
    most of the run or of its criticality: the program's first problem, whoever holds it."""
    return bool(info and info["waiters"] >= 2 and info["how"] != "join"
                and max(info["serial_share"], info["critical_share"]) >= SERIALIZING)


def _where(trace: Trace) -> WhereResult | None:
    """Critical functions and named locks where the trace has call stacks, else None."""
    if not len(trace.stacks) or not len(trace.samples) or not trace.meta.get("sample_hz"):
        return None
    return where(trace)


def _top_function(code: WhereResult | None, tid: int) -> tuple[str, float] | None:
    """The program function (self weight) holding most of one thread's criticality, and its share."""
    if code is None:
        return None
    row = next((t for t in code.threads if t["tid"] == tid), None)
    fn = code.thread_functions.get(tid)
    if not row or not fn or row["criticality_ns"] <= 0:
        return None
    name, w = fn
    return name, w / row["criticality_ns"]


def _top_lock(code: WhereResult, span: int) -> dict | None:
    """The lock the threads wait on longest (two waiters at least: a join is not a lock), if its
    waits add up to a fifth of the run."""
    locks = [lk for lk in code.locks if lk["waiters"] >= 2 and lk["how"] != "join"]
    if not locks:
        return None
    top = max(locks, key=lambda lk: lk["wait_ns"])
    return top if top["wait_ns"] > 0.2 * span else None


def _lock_finding(facts: Facts, name: str, wait: float, span: int, releasers: tuple[np.ndarray, np.ndarray], label,
                  factor: float, addr: int, info: dict | None) -> Finding:
    """`releasers`: the threads that ended the waits on it, and how many each (`WaitSums.wakers`)."""
    ranked = releasers[0][np.argsort(-releasers[1], kind="stable")]
    who = ", ".join(label(int(x)) for x in ranked[:3]) or "unknown threads"
    gain, why = 1.0, ""
    if len(ranked):  # the releaser made faster holds the lock (or reaches the barrier) for less time
        gain = facts.replay(int(ranked[0]))
        why = f" Making {label(int(ranked[0]))} {factor:g}x faster would give {gain:.2f}x (dependency replay)."
    held = serial = ""
    if info:
        serial = f", {info['serial_share'] * 100:.0f}% of the run with a thread waiting"
        if info["holders"]:
            fn, n = next(iter(info["holders"].items()))
            held = f" While they wait, the releasing thread runs `{fn}` ({n} samples)."
        if info["releasers"]:
            held += f" It is released in `{next(iter(info['releasers']))}`."
    entry = (facts.meta.get("locks") or {}).get(f"{addr:#x}") or {}
    primitive = (info or {}).get("primitive", "")
    top = label(int(ranked[0])) if len(ranked) else "the releasing thread"
    todo = (GIL_TODO if entry.get("kind") == "cpython-gil" else
            PRIMITIVE_TODO[primitive].format(who=top) if primitive in PRIMITIVE_TODO else
            "Shorter critical sections, finer locks or less work between barriers would cut this.")
    kind = f" (a {primitive})" if primitive in PRIMITIVE_TODO and entry.get("kind") != "cpython-gil" else ""
    return Finding(
        "lock", f"threads wait {format_ns(int(wait))} in total on {name}{kind}{serial}",
        f"{wait / span:.1f} threads on average are blocked on it; it is released mostly by {who}.{held} {todo}{why}",
        gain, None, addr)


# what to do depends on what the threads wait in (`where.PRIMITIVES`, from the wait calls' stacks):
# a condition variable's waiters wait for what another thread does before it signals (a consumer
# for its producer), not for a critical section to end
PRIMITIVE_TODO = {
    "mutex": "It is a mutex: shorter critical sections or finer locks would cut this.",
    "read-write lock": "It is a read-write lock: shorter write sections, or fewer writers, would cut this.",
    "condition variable": ("It is a condition variable: the threads wait for what {who} does before it signals "
                           "(work to take, or a change of state), not for a critical section; make that faster or "
                           "share it among the waiting threads."),
    "semaphore": ("It is a semaphore: the threads wait for what {who} does before it posts; make that faster or "
                  "share it among the waiting threads."),
    "barrier": ("It is a barrier: the threads wait for the last to arrive; balance the work between barriers, or "
                "meet less often."),
}

# what to do about the GIL is not what to do about a lock of the program's own
GIL_TODO = ("Python code runs one thread at a time under the GIL: move the work to processes "
            "(multiprocessing, ProcessPoolExecutor), to native code that releases the GIL (NumPy, hashlib, "
            "zlib on large buffers), or to a free-threaded CPython (3.13t and later).")


def alone_time(trace: Trace, t0: int | None = None, t1: int | None = None) -> dict[int, int]:
    """ns each thread was the only RUNNING thread, with no other thread RUNNABLE: a thread waiting
    for a CPU wants to work, so another process keeping it off a core is not serial time (the
    serial windows of `analysis.serial` read it so too; on a busy 2-core VM the three symmetric
    threads of a lock-bound program otherwise showed 97% of the run "serial"). One compiled merge
    of the threads' running and runnable intervals in time order (each thread's come sorted),
    counting who runs and who is active; a table whose rows of one thread are out of time order
    gets the sweep (`_alone_by_sweep`). The sweep of all running
    intervals (64 bytes each) is no longer built for this when the criticality stack uses switch
    spans: 130 MB for 1.25 M intervals. `t0`, `t1`: only that part of the run (default: all)."""
    s = trace.states
    t0 = trace.start_ns if t0 is None else int(t0)
    t1 = trace.end_ns if t1 is None else int(t1)
    tids, rows = thread_lookup(trace)
    alone, has, bad, ok = _alone(s.tid, s.start_ns, s.end_ns, s.state, tids, rows, t0, t1)
    if bad >= 0:
        trace.thread_index(s.tid[bad])  # raises KeyError, as the sweep does
    if not ok:
        return _alone_by_sweep(trace, t0, t1)
    return {int(trace.threads.tid[k]): int(alone[k]) for k in np.flatnonzero(has).tolist()}


def _alone_by_sweep(trace: Trace, t0: int | None = None, t1: int | None = None) -> dict[int, int]:
    """`alone_time` from the shared sweeps: G(t) = time with exactly one thread running or
    runnable so far, integrated over each thread's own running intervals (only it is active then)."""
    t0 = trace.start_ns if t0 is None else t0
    t1 = trace.end_ns if t1 is None else t1
    rows, a, b, _, _ = sweep(trace, "running", t0, t1)
    if len(a) == 0:
        return {}
    _, _, _, tl, _ = sweep(trace, "running+runnable", t0, t1)
    g = tl.with_count_at(1, np.concatenate([a, b]))
    per = g[len(a):] - g[:len(a)]
    sums = np.zeros(len(trace.threads), np.int64)
    np.add.at(sums, rows, per)
    return {int(trace.threads.tid[k]): int(sums[k]) for k in np.unique(rows).tolist()}


@numba.njit(cache=True, inline="always")
def _next_active(state, start, end, i, stop, t0, t1):
    """The first row from i (before stop) RUNNING or RUNNABLE for some time inside [t0, t1], else stop."""
    while i < stop and (state[i] > 1 or min(max(end[i], t0), t1) <= min(max(start[i], t0), t1)):
        i += 1
    return i


@numba.njit(cache=True)
def _alone(tid, start, end, state, tids, rows, t0, t1):
    """Per thread row: ns it ran alone (no other thread running or runnable), whether it ran at
    all; the first active row whose tid is not a thread (-1: none); whether each thread's active
    (running, runnable) intervals come in time order (else the caller sweeps). Runs are a thread's
    consecutive rows; a heap of them by their next start or end gives the instants in time order,
    and the count of active threads, of runners and the sum of the runners' rows names the runner
    when there is one."""
    n = rows.shape[0]
    m = tid.shape[0]
    alone = np.zeros(n, np.int64)
    has = np.zeros(n, np.bool_)
    n_runs = 0
    for i in range(m):
        if i == 0 or tid[i] != tid[i - 1]:
            n_runs += 1
    first = np.empty(n_runs + 1, np.int64)
    run_k = np.zeros(n_runs, np.int64)
    j = 0
    prev_end = t0
    for i in range(m):
        if i == 0 or tid[i] != tid[i - 1]:
            first[j] = i
            j += 1
            prev_end = t0
        if state[i] > 1:
            continue
        p = find_sorted(tids, tid[i])
        if p < 0:
            return alone, has, i, False
        run_k[j - 1] = rows[p]
        a = min(max(start[i], t0), t1)
        b = min(max(end[i], t0), t1)
        if b > a:
            if a < prev_end:
                return alone, has, -1, False
            prev_end = b
            if state[i] == 0:
                has[rows[p]] = True
    first[n_runs] = m
    cur = np.empty(n_runs, np.int64)
    head_t = np.empty(n_runs, np.int64)
    head_k = np.zeros(n_runs, np.int8)  # ties need no order: no time passes between them
    inside = np.zeros(n_runs, np.bool_)
    heap = np.empty(n_runs, np.int64)
    size = 0
    for r in range(n_runs):
        i = _next_active(state, start, end, first[r], first[r + 1], t0, t1)
        if i < first[r + 1]:
            cur[r] = i
            head_t[r] = min(max(start[i], t0), t1)
            heap[size] = r
            size += 1
    for at in range(size // 2 - 1, -1, -1):
        sift_runs(heap, size, at, head_t, head_k)
    active = 0
    running = 0
    who = 0  # the sum of the running threads' rows: the runner's when one runs
    last = t0
    while size > 0:
        r = heap[0]
        t = head_t[r]
        if active == 1 and running == 1:
            alone[who] += t - last
        last = t
        i = cur[r]
        runs = state[i] == 0
        if not inside[r]:
            active += 1
            if runs:
                running += 1
                who += run_k[r]
            inside[r] = True
            head_t[r] = min(max(end[i], t0), t1)
        else:
            active -= 1
            if runs:
                running -= 1
                who -= run_k[r]
            inside[r] = False
            i = _next_active(state, start, end, i + 1, first[r + 1], t0, t1)
            if i < first[r + 1]:
                cur[r] = i
                head_t[r] = min(max(start[i], t0), t1)
            else:
                size -= 1
                heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, head_k)
    return alone, has, -1, True


def usable_cores(meta: dict) -> int | None:
    """The CPUs the recorded program could use: those its affinity allowed (`record` keeps
    `cpus_allowed`: `taskset -c 0 scalestack record ...` gives it one core of the machine's), else
    the machine's cores, else None."""
    return meta.get("cpus_allowed") or meta.get("cores") or None


def runnable_beside_free_cores(trace: Trace, cores: int, t0: int | None = None, t1: int | None = None) -> int:
    """ns the trace's threads were RUNNABLE while fewer than `cores` of them ran: a core was not
    the program's, so another process held it (the recorder's own work among them) or the
    scheduler was slow to put a woken thread on an idle one. The rest of the RUNNABLE time is the
    program's threads outnumbering the cores, which fewer threads would cut; this part they would
    not. `t0`, `t1`: only that part of the run (default: all); the parts of a run add up."""
    t0 = trace.start_ns if t0 is None else int(t0)
    t1 = trace.end_ns if t1 is None else int(t1)
    _, a, b = state_intervals(trace, (State.RUNNABLE,), t0, t1)
    if len(a) == 0:
        return 0
    tl = sweep(trace, "running", t0, t1)[3]
    return int((tl.with_count_below(int(cores), b) - tl.with_count_below(int(cores), a)).sum())


def state_ns(st, state: int) -> int:
    """ns of the rows in `state` (one pass: no masked copies of two columns)."""
    return int(_state_ns(st.state, st.start_ns, st.end_ns, state))


@numba.njit(cache=True)
def _state_ns(states, start, end, state):
    total = 0
    for i in range(states.shape[0]):
        if states[i] == state:
            total += end[i] - start[i]
    return total


WAKER_SLACK_NS = 50_000  # a waker candidate ran until this long before the wait ended, or later


def with_inferred_wakers(trace: Trace, slack_ns: int = WAKER_SLACK_NS) -> Trace:
    """The trace with each futex wait whose waker is not one of its threads (a wakeup the kernel
    delivered from the idle task or an interrupt on the waiter's CPU reports that context) given
    the one traced thread that was running, or had just stopped, when the wait ended: the thread
    that released the lock or reached the barrier. Waits with no or several candidates keep -1.
    The state builder already names the waker from the futex calls where they were recorded
    (`scalestack.trace.futex_wakers`); this is the fallback for traces without them (`--no-futex`,
    imported text).
    """
    st = trace.states
    tids = trace.threads.tid
    lost = np.flatnonzero((st.state == State.SYNC_WAIT) & ~np.isin(st.waker, tids))
    if len(lost) == 0:
        return trace
    run = np.flatnonzero(st.state == State.RUNNING)
    if len(run) == 0:
        return trace
    key = st.start_ns[run]
    order = run[np.argsort(key, kind="stable")]  # running rows by start
    del key, run
    waker = st.waker.copy()
    # the 64 running intervals that started last before each wait ended are the candidates
    _infer_wakers(lost, order, st.start_ns, st.end_ns, st.tid, waker, slack_ns)
    cols = st.columns()
    cols["waker"] = waker
    out = dataclasses.replace(trace, states=type(st)(**cols))
    share_memo(trace, out)  # only the wakers changed: the sweeps and criticality stacks still hold
    return out


@numba.njit(cache=True)
def _infer_wakers(lost, order, start, end, tid, waker, slack_ns):
    """For each lost wait: the tids of the 64 running intervals (by start, `order`) that started
    last before it ended, those that ran until slack_ns before its end or later and are not the
    waiter's; one distinct tid is its waker. Per wait one binary search and 64 steps, where the
    arrays of 64 candidates for every lost wait took 40 bytes x 64 a wait (2.5 GB for 10^6 of them)."""
    m = order.shape[0]
    for j in range(lost.shape[0]):
        i = lost[j]
        t = end[i]
        lo, hi = 0, m
        while lo < hi:  # the running intervals that started by t: order[:lo]
            mid = (lo + hi) // 2
            if start[order[mid]] <= t:
                lo = mid + 1
            else:
                hi = mid
        first, last = np.iinfo(np.int64).max, -1
        for c in range(1, min(lo, 64) + 1):
            r = order[lo - c]
            if end[r] >= t - slack_ns and tid[r] != tid[i]:
                first = min(first, np.int64(tid[r]))
                last = max(last, np.int64(tid[r]))
        if first == last and last >= 0:  # exactly one distinct candidate
            waker[i] = last


@dataclasses.dataclass
class WaitSums:
    """The futex waits (SYNC_WAIT rows) summed per (waiter, futex, waker): how many, their ns, and
    the first one's start. `waker` is -1 where it is not a thread of the trace. Each question the
    findings ask of the waits (on which futex a thread makes others wait, who waits there, who
    releases a lock) is a sum over these few groups, so the groups of a trace's time chunks, added
    (`join`), answer as the whole trace's rows do."""

    tid: np.ndarray
    addr: np.ndarray  # uint64
    waker: np.ndarray
    count: np.ndarray
    ns: np.ndarray
    first: np.ndarray  # the start of the group's first wait
    longest: np.ndarray  # ns of the group's longest wait

    @classmethod
    def of(cls, st, tids: np.ndarray, after: int | None = None, upto: int | None = None,
           waker: np.ndarray | None = None) -> WaitSums:
        """The groups of the rows of `st` (only those ending in (after, upto] where given), with
        `waker` for its waker column where given."""
        lo = np.iinfo(np.int64).min if after is None else int(after)
        hi = np.iinfo(np.int64).max if upto is None else int(upto)
        cols = _wait_groups(st.state, st.tid, st.addr.view(np.int64), st.waker if waker is None else waker,
                            st.start_ns, st.end_ns, np.sort(np.asarray(tids, np.int64)), lo, hi)
        return cls._sorted(*cols)

    @classmethod
    def _sorted(cls, tid, addr, waker, count, ns, first, longest) -> WaitSums:
        o = np.lexsort((waker, addr, tid))
        return cls(tid[o].astype(np.int64), addr[o].view(np.uint64) if addr.dtype != np.uint64 else addr[o],
                   waker[o].astype(np.int64), count[o].astype(np.int64), ns[o].astype(np.int64),
                   first[o].astype(np.int64), longest[o].astype(np.int64))

    @classmethod
    def join(cls, parts: list[WaitSums]) -> WaitSums:
        """The groups of the rows of all `parts` (each row in one part)."""
        cat = [np.concatenate([getattr(p, f) for p in parts]) if parts else np.zeros(0, np.int64)
               for f in ("tid", "addr", "waker", "count", "ns", "first", "longest")]
        tid, addr, waker, count, ns, first, longest = cat
        addr = addr.astype(np.uint64)
        if len(tid) == 0:
            return cls._sorted(tid, addr, waker, count, ns, first, longest)
        o = np.lexsort((waker, addr, tid))
        tid, addr, waker, count, ns, first, longest = (c[o] for c in (tid, addr, waker, count, ns, first, longest))
        new = np.r_[True, (tid[1:] != tid[:-1]) | (addr[1:] != addr[:-1]) | (waker[1:] != waker[:-1])]
        at = np.flatnonzero(new)
        return cls._sorted(tid[at], addr[at], waker[at], np.add.reduceat(count, at), np.add.reduceat(ns, at),
                           np.minimum.reduceat(first, at), np.maximum.reduceat(longest, at))

    @property
    def woken(self) -> np.ndarray:
        """Groups whose waker is a thread of the trace."""
        return self.waker >= 0

    def by_addr(self, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The selected groups' waits per futex: futexes (sorted), waits, ns (float64)."""
        addrs, inv = np.unique(self.addr[sel], return_inverse=True)
        return (addrs, np.bincount(inv, weights=self.count[sel], minlength=len(addrs)).astype(np.int64),
                np.bincount(inv, weights=self.ns[sel], minlength=len(addrs)).astype(np.float64))

    def waiters(self, sel: np.ndarray) -> np.ndarray:
        """The threads that waited in the selected groups (sorted)."""
        return np.unique(self.tid[sel])

    def wakers(self, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The wakers of the selected groups' waits (sorted) and how many waits each ended."""
        w, inv = np.unique(self.waker[sel], return_inverse=True)
        return w, np.bincount(inv, weights=self.count[sel], minlength=len(w)).astype(np.int64)

    def per_thread(self, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each of `tids`' waits, their ns and its longest wait's ns (all its groups)."""
        tids = np.asarray(tids, np.int64)
        o = np.argsort(tids, kind="stable")
        i = np.searchsorted(tids[o], self.tid)
        ok = i < len(tids)
        ok[ok] = tids[o][i[ok]] == self.tid[ok]
        n, ns = np.zeros(len(tids), np.int64), np.zeros(len(tids), np.float64)
        n[o] = np.bincount(i[ok], weights=self.count[ok], minlength=len(tids)).astype(np.int64)
        ns[o] = np.bincount(i[ok], weights=self.ns[ok], minlength=len(tids))
        longest = np.zeros(len(tids), np.float64)
        np.maximum.at(longest, i[ok], self.longest[ok].astype(np.float64))
        out = np.zeros(len(tids), np.float64)
        out[o] = longest
        return n, ns, out

    def caused(self, sel: np.ndarray | None = None) -> dict[int, int]:
        """ns of the waits (of the selected groups) each thread ended, wakers in the order of their
        first such wait in the state table's (thread, start) order."""
        sel = self.woken if sel is None else self.woken & sel
        w, inv = np.unique(self.waker[sel], return_inverse=True)
        ns = np.bincount(inv, weights=self.ns[sel], minlength=len(w)).astype(np.int64)
        first = sorted(range(len(w)), key=lambda j: min(zip(self.tid[sel][inv == j].tolist(),
                                                               self.first[sel][inv == j].tolist(), strict=True)))
        return {int(w[j]): int(ns[j]) for j in first}


@numba.njit(cache=True)
def _wait_groups(state, tid, addr, waker, start, end, tids, lo, hi):
    """`WaitSums.of`'s groups, one pass with a table of the few (waiter, futex, waker) keys."""
    slot = dict()
    n = 0
    cap = 16
    g_tid = np.empty(cap, np.int64)
    g_addr = np.empty(cap, np.int64)
    g_waker = np.empty(cap, np.int64)
    count = np.zeros(cap, np.int64)
    ns = np.zeros(cap, np.int64)
    first = np.zeros(cap, np.int64)
    longest = np.zeros(cap, np.int64)
    for i in range(state.shape[0]):
        if state[i] != 2 or end[i] <= lo or end[i] > hi:  # State.SYNC_WAIT
            continue
        w = np.int64(waker[i])
        if find_sorted(tids, w) < 0:
            w = np.int64(-1)
        key = (np.int64(tid[i]), np.int64(addr[i]), w)
        if key in slot:
            j = slot[key]
        else:
            if n == cap:
                g_tid = np.concatenate((g_tid, np.empty(cap, np.int64)))
                g_addr = np.concatenate((g_addr, np.empty(cap, np.int64)))
                g_waker = np.concatenate((g_waker, np.empty(cap, np.int64)))
                count = np.concatenate((count, np.zeros(cap, np.int64)))
                ns = np.concatenate((ns, np.zeros(cap, np.int64)))
                first = np.concatenate((first, np.zeros(cap, np.int64)))
                longest = np.concatenate((longest, np.zeros(cap, np.int64)))
                cap *= 2
            j = n
            slot[key] = j
            g_tid[j], g_addr[j], g_waker[j] = key[0], key[1], key[2]
            first[j] = start[i]
            n += 1
        count[j] += 1
        ns[j] += end[i] - start[i]
        first[j] = min(first[j], start[i])
        longest[j] = max(longest[j], end[i] - start[i])
    return g_tid[:n], g_addr[:n], g_waker[:n], count[:n], ns[:n], first[:n], longest[:n]


@dataclasses.dataclass
class Facts:
    """What the findings are drawn from, of a whole trace (`facts_of`) or of one read in time
    chunks (`analysis.chunked_advice.advise`): every fact is a sum over time, or a replay, so both give
    the same advice. `replay(tid)`: the program's speedup when that thread runs `factor` times
    faster (dependency replay); `phases()`: the per-phase gains (running+runnable active)."""

    threads: ThreadTable
    meta: dict
    cr: CriticalityResult
    alone: dict[int, int]
    waits: WaitSums
    runnable_ns: int
    code: WhereResult | None
    pool_bottle: Callable[[list], BottleResult]
    phases: Callable[[], PhaseGain]
    replay: Callable[[int], float]
    runnable_free_ns: int | None = None  # of runnable_ns, while a core was free of the program (cores known)


def facts_of(trace: Trace, factor: float) -> Facts:
    """The facts of a whole trace: its criticality stack and alone time as recorded, the rest with
    the wakers inferred where the recording lacks them (`with_inferred_wakers`)."""
    from scalestack.analysis.phase_criticality import phase_criticality

    cr = criticality(trace)
    alone = alone_time(trace)
    inferred = with_inferred_wakers(trace)
    code = _where(inferred)
    st = inferred.states
    cores = usable_cores(trace.meta)
    return Facts(trace.threads, trace.meta, cr, alone, WaitSums.of(st, trace.threads.tid),
                 state_ns(st, int(State.RUNNABLE)), code, lambda rules: bottle(inferred, group_by=rules),
                 lambda: phase_criticality(inferred, factor=factor, active="running+runnable"),
                 lambda t: whatif(inferred, t, factor).replay_speedup,
                 runnable_beside_free_cores(trace, cores) if cores else None)


def advise(trace: Trace, factor: float = 2.0, max_threads: int = 3, sweep: dict[int, Trace] | None = None
           ) -> AdviceResult:
    """Findings for `trace`; the `max_threads` most critical threads get a what-if replay.

    With `sweep` ({thread count: trace}, the smallest count 1), the speedup stack of the largest
    count adds a finding on what the speedup loses most.
    """
    return findings(facts_of(trace, factor), factor, max_threads, sweep)


def findings(facts: Facts, factor: float = 2.0, max_threads: int = 3, sweep: dict[int, Trace] | None = None
             ) -> AdviceResult:
    """The ranked findings drawn from `facts`."""
    cr, waits = facts.cr, facts.waits
    span = max(int(cr.span_ns), 1)
    names = {int(t): str(n) for t, n in zip(cr.tids, cr.names, strict=True)}
    alone = facts.alone
    # the waits that delay work: an idle thread (a runtime's JIT or GC thread, a pool's worker parked
    # for the whole run) waiting for work to do delays none
    n, _, longest = waits.per_thread(cr.tids)
    working = ~np.isin(waits.tid, idle_threads(cr.tids, cr.roles, cr.running_ns, n, longest, span))
    caused = waits.caused(working)
    share = cr.share
    ran = cr.running_ns > 0
    n_ran = int(ran.sum())
    found: list[Finding] = []
    code = facts.code
    lock_info = {int(x["addr"], 16): x for x in code.locks} if code else {}

    def label(t: int) -> str:
        return f"thread {names.get(t, '?')} ({t})"

    def lock_name(addr: int) -> str:
        entry = (facts.meta.get("locks") or {}).get(f"{addr:#x}")
        if entry:
            return entry["name"]
        info = lock_info.get(addr)
        return info["name"] if info and info["how"] != "address" else f"futex {addr:#x}"

    # 1. critical threads, with the replay's prediction and the waits they cause
    order = [int(i) for i in cr.order if ran[i]][:max_threads]
    # an even share among the threads that do the work (running at least a fifth as long as the
    # busiest): a main thread that only waits in join does not make two equal workers look unbalanced
    n_work = max(int(np.sum(cr.running_ns >= 0.2 * cr.running_ns.max())), 1) if n_ran else 1
    even = 1.0 / n_work
    shares = sorted((share[i] for i in range(len(share)) if ran[i]), reverse=True) or [0.0]
    top_ratio = shares[0] / shares[1] if len(shares) > 1 and shares[1] > 0 else float("inf")
    single = n_work > 1 and shares[0] >= 1.15 * even and top_ratio >= 1.1

    def critical(i: int, first: bool, replay: float) -> Finding:
        t = int(cr.tids[i])
        parts = [f"critical for {share[i] * 100:.0f}% of the run time (an even share is {even * 100:.0f}%)"]
        if alone.get(t, 0) > 0.02 * span:
            parts.append(f"runs alone for {format_ns(alone[t])} ({alone[t] / span * 100:.0f}% of the run) "
                         "while every other thread waits")
        mine = working & waits.woken & (waits.waker == t)
        addr = None
        if caused.get(t, 0) > 0.02 * span:
            addrs, n_waits, per_addr = waits.by_addr(mine)
            once = n_waits < 2
            if not np.all(once):  # a join waits once: name the lock or barrier waited on again and again
                per_addr[once] = 0
            addr = int(addrs[int(np.argmax(per_addr))])
            waiters = [label(int(x)) for x in waits.waiters(mine & (waits.addr == addr))]
            where = (f"mostly on {lock_name(addr)}" if np.count_nonzero(per_addr) == 1 else
                     f"on {np.count_nonzero(per_addr)} futexes, most on {lock_name(addr)}")
            parts.append(f"the others wait {format_ns(caused[t])} for it, {where} "
                         f"(a lock or barrier it releases last; waiting: {', '.join(waiters[:4])})")
        fn = _top_function(code, t)
        if fn:
            parts.append(f"{fn[1] * 100:.0f}% of its criticality in `{fn[0]}`")
        what = ("parallelise its serial part or move work from it to the threads that wait"
                if alone.get(t, 0) > 0.1 * span else "shorten its work or split it across the waiting threads")
        return Finding(
            "critical-thread", f"{label(t)} is the critical thread" if first else f"{label(t)} is also critical",
            f"It is {'; '.join(parts)}: {what}. Making it {factor:g}x faster would speed the program up "
            f"{replay:.2f}x (dependency replay).", replay, t, addr)

    for i in order:
        if single and share[i] >= 1.15 * even:
            found.append(critical(i, not found, facts.replay(int(cr.tids[i]))))
    if not found and n_work > 1:
        # shares near even can hide one thread the others wait for (it runs alone while they wait):
        # the replay tells. It counts when it is GAIN_FLOOR or more ("would not help much" would be
        # wrong) and twice the next thread's gain: equal threads of a pool all gain alike, and none
        # of them is the critical one
        gains = sorted(((facts.replay(int(cr.tids[i])), i) for i in order), reverse=True) + [(1.0, -1)]
        (best, i), second = gains[0], gains[1][0]
        if best >= GAIN_FLOOR and best - 1.0 >= 2.0 * (second - 1.0):
            found.append(critical(i, True, best))

    # 1b. one thread does all the work: the first thing to know, and not "balanced"
    rq = float(facts.runnable_ns)
    cores = facts.meta.get("cores")
    if n_work == 1 and n_ran:
        found.append(_one_thread(cr, alone, span, cores, label, len(cr.tids) - n_ran))

    # 2. serial time (one thread running), Amdahl's bound if it were spread over the others
    serial = sum(alone.values())
    if serial > 0.1 * span and n_work > 1:
        main_t = max(alone, key=alone.get)
        gain = 1.0 / (1.0 - serial / span + serial / span / n_work)
        found.append(Finding(
            "serial", f"{serial / span * 100:.0f}% of the run has a single thread running",
            f"For {format_ns(serial)} only one thread runs (most of it {label(main_t)}). Spread over the "
            f"{n_work} threads that do the work, that time would give at most {gain:.2f}x (Amdahl).", gain, main_t))

    # 3. the most waited-on lock, and who releases it (named, with its holder, from call stacks)
    top_lock = _top_lock(code, span) if code else None
    if top_lock is not None:
        words = np.array([int(x, 16) for x in top_lock["addrs"]], dtype=np.uint64)
        addr0 = int(words[0])
        # a critical thread's finding may name the lock already; a lock that serializes the run gets
        # its own all the same (it comes first, with who holds it and where)
        if _serializes(top_lock) or not any(f.addr is not None and f.addr in words.tolist() for f in found):
            rel = waits.wakers(working & waits.woken & np.isin(waits.addr, words))
            found.append(_lock_finding(facts, top_lock["name"], float(top_lock["wait_ns"]), span, rel, label,
                                       factor, addr0, top_lock))
    elif code is None and working.any():
        addrs, n_waits, per_addr = waits.by_addr(working)
        per_addr[n_waits < 3] = 0  # a join waits once per thread: not a lock or barrier
        k = int(np.argmax(per_addr))
        wait = float(per_addr[k])
        if addrs[k] != 0 and wait > 0.2 * span and not any(f.addr == int(addrs[k]) for f in found):
            rel = waits.wakers(working & waits.woken & (waits.addr == addrs[k]))
            found.append(_lock_finding(facts, lock_name(int(addrs[k])), wait, span, rel, label, factor,
                                       int(addrs[k]), None))

    # 3b. busy-waiting: time that looks like work to the scheduler and to criticality
    if code is not None and code.spin_share > SPIN_FLOOR:
        found.append(_spin_finding(code, rq, span))

    # 4. CPU contention: runnable time, the program's own threads outnumbering the cores or not
    if rq > 0.2 * span:
        found.append(_cpu_wait(rq, facts.runnable_free_ns, span, cores, usable_cores(facts.meta), facts.meta))

    if sweep:
        found += sweep_findings(sweep)
    pools = _pool_findings(facts, span, factor, label, lock_name, working,
                           lambda addr: (lock_info.get(addr) or {}).get("primitive", ""))
    pool_addrs = {f.addr for f in pools}
    found = [f for f in found if not (f.kind == "lock" and f.addr in pool_addrs)] + pools

    if rq <= 0.1 * span:  # with CPU contention, who lags in a phase is the scheduler's doing, not the work's
        found += _phase_findings(facts.phases(), factor, label)

    if not any(f.kind in ("one-thread", "critical-thread", "phase-critical") for f in found):
        # above an even share, the top threads are close to each other (node: two pool threads at 42% and
        # 41% beside a main thread at 17%): "evenly" would misread them
        how = (f"The {n_work} threads doing the work share the run time evenly (largest share "
               f"{shares[0] * 100:.0f}%, an even share is {even * 100:.0f}%)" if shares[0] < 1.15 * even else
               f"Of the {n_work} threads doing the work none stands out: the largest shares are close "
               f"({shares[0] * 100:.0f}% and {shares[1] * 100:.0f}%; an even share is {even * 100:.0f}%)")
        found.insert(0, Finding(
            "balanced", "no single critical thread",
            f"{how}: speeding up one thread would not help much; look at the work all threads do.", 1.0))

    def serializing(f: Finding) -> bool:  # a lock some thread waits on for most of the run comes first
        info = lock_info.get(f.addr) if f.kind == "lock" and f.addr is not None else None
        info = info or next((x for x in lock_info.values() if f.kind == "lock" and f.addr is not None
                             and f"{f.addr:#x}" in x.get("addrs", ())), None)
        return _serializes(info)

    # "no single critical thread" ranks as a gain of GAIN_FLOOR: after what promises more (82% of a
    # CPython run serial under the GIL, at most 2.60x, came second to it), before what promises less
    found.sort(key=lambda f: (not (serializing(f) or f.kind == "spin" and code.spin_share >= SPIN_FIRST),
                              -(GAIN_FLOOR if f.kind in ("balanced", "spin") else f.predicted_speedup),
                              f.kind != "spin", f.kind != "balanced"))
    return AdviceResult(found, span, alone, caused)


SPIN_FLOOR = 0.2  # of the run's criticality spent spinning: a finding
SPIN_FIRST = 0.5  # ... the first one: most of the run is waiting that looks like work
# what to do about spinning, by the library that spins (the leaf of the most spinning samples)
SPIN_TODO = (
    (re.compile(r"openblas", re.I), "OpenBLAS's threads poll for work and for each other between the pieces of "
     "each product (an idle worker keeps polling while the caller runs other code): products too small for their "
     "threads, or serial steps between them, make them poll. Run them on fewer threads (OPENBLAS_NUM_THREADS, or "
     "threadpoolctl's threadpool_limits around them), or compute fewer, bigger products."),
    (re.compile(r"libgomp|gomp_"), "OpenMP threads spin at barriers and locks for up to GOMP_SPINCOUNT polls "
     "before they sleep: the time is the wait for the slowest thread. Balance the work between barriers "
     "(schedule(dynamic) for uneven iterations); OMP_WAIT_POLICY=passive frees the cores while they wait."),
    (re.compile(r"pthread_spin_lock"), "Threads spin on a pthread spin lock held for long: a mutex lets them "
     "sleep instead, and shorter critical sections cut the wait."),
    (re.compile(r"SpinPause"), "HotSpot's threads spin in its locks or safepoints: a contended Java monitor "
     "or frequent safepoints (GC) are the wait."),
    (re.compile(r"^runtime\."), "Go's scheduler threads spin looking for work (runtime.procyield/osyield): "
     "fewer GOMAXPROCS than busy goroutines need, or work handed over in tiny pieces."),
)


def _spin_finding(code: WhereResult, cpu_wait_ns: float, span: int) -> Finding:
    """Samples in spin-wait code (`where.spin_samples`): synchronization that runs on a CPU, so the
    criticality stack and the bottle graph count it as work. Named by the library spinning; where
    threads also waited for a CPU, the spinners poll for partners kept off a core (numpy's 300 x 300
    products on OpenBLAS's 2 threads: 19% of the criticality polling on an idle 2-core VM, 74%
    while two other processes kept the cores busy)."""
    share = code.spin_share
    top = code.spin_functions[:3]
    lib = top[0]["binary"].rsplit("/", 1)[-1] if top else "?"
    names = ", ".join(f"`{f['function']}`" for f in top)
    todo = next((text for pattern, text in SPIN_TODO if top and (pattern.search(top[0]["binary"])
                                                                   or pattern.search(top[0]["function"]))),
                "The threads busy-wait in synchronization code: what they wait for is the work to shorten.")
    if cpu_wait_ns > 0.2 * span:
        todo = (f"Threads also waited {format_ns(int(cpu_wait_ns))} for a CPU: a spinning thread polls for as long "
                "as the thread it waits for is kept off a core, and holds a core meanwhile; with fewer threads than "
                "free cores that wait goes. " + todo)
    return Finding("spin", f"{share * 100:.0f}% of the run is threads spinning, not working",
                   f"Samples in spin-wait code ({names} in {lib}) hold {share * 100:.0f}% of the run's criticality: "
                   f"busy-waiting looks like work to the scheduler, the criticality stack and the bottle graph. {todo}",
                   1.0)


def _cpu_wait(rq: float, free: int | None, span: int, cores: int | None, usable: int | None, meta: dict) -> Finding:
    """The finding of the time threads were ready but not running. Fewer threads help only where
    the program's own threads filled every core; the part while a core was free of them
    (`runnable_beside_free_cores`) is another process's (a 2-thread Rust program recorded with
    --stacks on 2 cores waited 1.12 s of 2.65 s, all of it beside perf's unwinding) or the
    scheduler's slowness, which fewer threads would not cut."""
    head = f"On average {rq / span:.1f} threads are ready but not running" + (f" on this {cores}-core machine" if cores else "")
    if usable and cores and usable < cores:
        head += f" (its affinity allowed {usable} of them)"
    if free is None or free <= 0.5 * rq:
        text = head + ": use no more runnable threads than cores, or run where more cores are free."
        if free is not None and free > 0.1 * rq:
            text += (f" {format_ns(free)} of it ({free / rq * 100:.0f}%) came while fewer than {usable} of its threads "
                     "ran: other processes held those cores.")
        return Finding("cpu-contention", f"threads wait {format_ns(int(rq))} for a CPU", text, 1.0)
    stacks = " (recording call stacks with --stacks costs CPU too: compare a recording without it)" \
        if meta.get("stacks") else ""
    return Finding(
        "cpu-contention", f"threads wait {format_ns(int(rq))} for a CPU that other processes hold",
        f"{head}, and {free / rq * 100:.0f}% of that wait ({format_ns(free)}) came while fewer than {usable} of its "
        f"threads were running: other processes held the cores{stacks}, or the scheduler was slow to move a woken "
        "thread to an idle core. Fewer threads would not cut it: run where the cores are free of other work.", 1.0)


def _one_thread(cr, alone: dict, span: int, cores: int | None, label, idle: int) -> Finding:
    """The finding of a run in which one thread does the work (the others, if any, run less than a
    fifth as long): more cores cannot help until the work is split. The gain is Amdahl's bound of
    its time alone spread over the machine's cores (none known: no estimate)."""
    i = int(np.argmax(cr.running_ns))
    t = int(cr.tids[i])
    others = len(cr.tids) - 1 - idle
    solo = alone.get(t, 0) / span
    gain = 1.0 / (1.0 - solo + solo / cores) if cores and cores > 1 else 1.0
    rest = (f"; the {others} other thread{'s' if others != 1 else ''} ran {format_ns(int(cr.running_ns.sum() - cr.running_ns[i]))} in all"
            if others else "")
    bound = (f" Split evenly over this machine's {cores} cores, its {format_ns(alone.get(t, 0))} alone would give "
             f"at most {gain:.2f}x (Amdahl)." if gain > 1.0 else "")
    return Finding(
        "one-thread", f"one thread does the work: {label(t)}",
        f"It runs for {format_ns(int(cr.running_ns[i]))} of the {format_ns(span)} run{rest}: the program "
        "ran serially here, so more cores cannot speed it up. Check that it was asked to use threads (its -T/-j "
        f"option, OMP_NUM_THREADS, its pool size) and whether this part of it is parallel at all.{bound}", gain, t)


# a phase finding, or a critical thread found by its replay alone, predicts at least this gain:
# threads that take turns leading by a little (equal work on a busy or virtual machine: a recorder,
# another process or the hypervisor slows one now and then) are what the balanced finding says,
# "speeding up one thread would not help much"
GAIN_FLOOR = 1.1


def _phase_findings(pc: PhaseGain, factor: float, label, least: float = 0.1) -> list[Finding]:
    """A finding when different threads are the critical one in different phases (thesis §4.4,
    Lu non-cont.): whole-run criticality adds their shares up and can show no critical thread, or
    the wrong one, though in every phase the program waits for one thread.

    A phase counts for a thread when it leads it (`phase_criticality.LEAD` x the next thread's
    criticality there); the finding needs two or more such threads with at least `least` of the
    run each, and a gain of `GAIN_FLOOR` at least: the per-phase estimate (each phase's saving
    capped at the lead). Threads waiting for a CPU count as active (`pc`'s), so CPU contention alone
    does not make phases: phases are then cut only where the program waited for one thread, not
    where the scheduler made two threads take turns on one core.
    """
    if pc.phases < 2 or len(pc.tids) < 2 or pc.span_ns <= 0:
        return []
    leaders = [(k, int(pc.lead_phases[k]), float(pc.lead_ns[k] / pc.span_ns))
               for k in np.flatnonzero(pc.lead_phases > 0).tolist() if pc.lead_ns[k] >= least * pc.span_ns]
    if len(leaders) < 2 or pc.best_tid is None:
        return []
    leaders.sort(key=lambda x: -x[2])
    best = pc.best_tid
    gain = float(pc.predicted_speedup[int(np.flatnonzero(pc.tids == best)[0])])
    if gain < GAIN_FLOOR:
        return []
    who = "; ".join(f"{label(int(pc.tids[k]))} in {n} phase{'s' if n != 1 else ''} ({share * 100:.0f}% of the run)" for k, n, share in leaders[:4])
    return [Finding(
        "phase-critical", f"the critical thread changes between phases ({len(leaders)} threads take turns)",
        f"Of {pc.phases} phases (cut where the program waited for one thread: barriers, joins), one thread is "
        f"clearly the critical one in each of these: {who}. Whole-run criticality adds the phases together, which "
        "hides this: in each of those phases the program waits for one of them. Balance the work within each phase; "
        f"or, per phase, making {label(best)} {factor:g}x faster saves the most: {gain:.2f}x (criticality per "
        "phase, each phase's saving capped at its lead over the next thread).", gain, best)]


def _pool_findings(facts: Facts, span: int, factor: float, label, lock_name, working: np.ndarray,
                   primitive: Callable[[int], str] = lambda addr: "") -> list[Finding]:
    """Thread pools (names stem-1, stem-2, ...) that run far less in parallel than they could.

    The bottle graph's pool box gives the parallelism P = run time / criticality; with k threads
    on c cores the pool could reach min(k, c). The futex its members wait on most, and the thread
    that releases it, say why; the gain is the bottle-graph bound (the pool's criticality shrunk
    by P / min(k, c)) and the dependency replay of making that releaser `factor` times faster.
    `working`: the wait groups of `facts.waits` that delay work (not an idle thread's);
    `primitive(addr)`: what a futex word's waits were in (`where.PRIMITIVES`, "" unknown).
    """
    th = facts.threads
    stems: dict[str, set] = {}
    for name in th.name.tolist():
        m = re.fullmatch(r"(.*\D)[-_#]?\d+", str(name))
        if m:
            stems.setdefault(m.group(1), set()).add(str(name))
    # two names or more: threads that all carry their program's name ("python3") are not numbered
    rules = [(rf"^{re.escape(stem)}[-_#]?\d+$", f"{stem}*") for stem, names in stems.items() if len(names) >= 2]
    if not rules:
        return []
    cores = int(facts.meta.get("cores") or 0)
    waits = facts.waits
    out = []
    for box in facts.pool_bottle(rules).boxes:
        k = len(box.tids)
        if box.label not in {lab for _, lab in rules} or box.height_ns <= 0.2 * span:
            continue
        cap = min(k, cores) if cores else k
        p = box.width
        if not p < 0.6 * cap:
            continue
        bound = span / (span - box.height_ns + box.height_ns * p / cap)
        detail = (f"Its {k} threads run {p:.1f} at a time on average (it could run {cap}"
                  + (f" on {cores} cores" if cores else "") + f"); it is critical for "
                  f"{box.height_ns / span * 100:.0f}% of the run.")
        sel = np.isin(waits.tid, box.tids) & working
        addr, gain = None, bound
        if np.any(sel):
            addrs, _, per = waits.by_addr(sel)
            addr = int(addrs[int(np.argmax(per))])
            w, c = waits.wakers(sel & (waits.addr == addr) & waits.woken)
            kind = primitive(addr)
            detail += f" Its threads wait {format_ns(int(per.max()))} on {lock_name(addr)}" + \
                (f" (a {kind})" if kind in PRIMITIVE_TODO else "")
            who = "the releasing thread"
            if len(w):
                holder = int(w[int(np.argmax(c))])
                inside = "one of its own threads" if holder in box.tids else "a thread outside it"
                if c.max() >= 0.5 * c.sum():
                    detail += f", released mostly by {label(holder)} ({inside}, {c.max()} of {int(c.sum())} times)"
                else:
                    detail += (f", released by {len(w)} threads in turn (most often {label(holder)}, {inside}, "
                               f"{c.max()} of {int(c.sum())} times)")
                replay = facts.replay(holder)
                detail += f"; making that thread {factor:g}x faster would give {replay:.2f}x (dependency replay)"
                who = label(holder)
            detail += (". " + PRIMITIVE_TODO[kind].format(who=who) if kind in PRIMITIVE_TODO else
                       ": shorten or split what is done under it (finer locks, per-thread data, less to do between "
                       "barriers).")
        detail += f" At full parallelism the pool's part of the run would give at most {bound:.2f}x (bottle graph)."
        out.append(Finding("pool", f"the pool '{box.label}' has parallelism {p:.1f} of {cap}", detail, gain,
                           None, addr))
    return out


_LOSS = {
    "seq": ("the sequential part", "parallelise the part that runs on one thread"),
    "sync": ("waiting on locks and barriers", "shorten critical sections, use finer locks, balance the work between "
             "barriers"),
    "imb": ("threads finishing at different times", "split the work into more, smaller pieces or hand it out "
            "dynamically"),
    "cont": ("threads waiting for a CPU", "run no more threads than free cores"),
    "gc": ("garbage collection", "allocate less or give the collector more heap or threads"),
    "other": ("interference or extra work per thread", "look at the cache misses and the work each thread repeats"),
}


def sweep_findings(traces: dict[int, Trace]) -> list[Finding]:
    """What the speedup of the largest thread count loses most (speedup stack, thesis §4).

    The predicted gain is that loss given back: (speedup + component) / speedup, an upper bound
    as the components are estimates.
    """
    from scalestack.analysis.speedup import COMPONENTS, speedup_stack

    if len(traces) < 2:
        return []
    base, top = min(traces), max(traces)
    n = top // base
    stack = speedup_stack(traces[base], traces[top], n)
    comp = max(COMPONENTS, key=lambda c: getattr(stack, c))
    loss = float(getattr(stack, comp))
    if loss < 0.05 * n or stack.speedup <= 0:
        return []
    what, todo = _LOSS[comp]
    others = ", ".join(f"{c} {getattr(stack, c):.2f}" for c in COMPONENTS if c != comp and getattr(stack, c) > 0.01)
    return [Finding(
        "scaling", f"at {top} threads the speedup is {stack.speedup:.2f} of {n}; {what} costs the most",
        f"The speedup stack of {top} threads against {base} loses {loss:.2f} speedup units to {what} ({comp}"
        + (f"; then {others}" if others else "") + f"): {todo}. Without that loss the speedup would be "
        f"{stack.speedup + loss:.2f}, {(stack.speedup + loss) / stack.speedup:.2f}x faster (speedup stack).",
        (stack.speedup + loss) / stack.speedup)]
