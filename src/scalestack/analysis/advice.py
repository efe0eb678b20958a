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

import numba
import numpy as np

from scalestack.analysis.bottle import bottle
from scalestack.analysis.criticality import criticality, share_memo, sweep, thread_lookup
from scalestack.analysis.whatif import whatif
from scalestack.analysis.where import WhereResult, where
from scalestack.results import Result
from scalestack.trace import State, Trace
from scalestack.trace.lookup import find_sorted, sift_runs
from scalestack.units import format_ns


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str  # critical-thread | phase-critical | serial | pool | lock | cpu-contention | scaling | balanced
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
    caused_wait_ns: dict[int, int]  # per thread: sync wait of others that it ended

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


def _lock_finding(trace: Trace, name: str, wait: float, span: int, sel: np.ndarray, label, factor: float,
                  addr: int, info: dict | None) -> Finding:
    st = trace.states
    releasers = np.unique(st.waker[sel], return_counts=True)
    ranked = releasers[0][np.argsort(-releasers[1], kind="stable")]
    who = ", ".join(label(int(x)) for x in ranked[:3]) or "unknown threads"
    gain, why = 1.0, ""
    if len(ranked):  # the releaser made faster holds the lock (or reaches the barrier) for less time
        gain = whatif(trace, int(ranked[0]), factor).replay_speedup
        why = f" Making {label(int(ranked[0]))} {factor:g}x faster would give {gain:.2f}x (dependency replay)."
    held = serial = ""
    if info:
        serial = f", {info['serial_share'] * 100:.0f}% of the run with a thread waiting"
        if info["holders"]:
            fn, n = next(iter(info["holders"].items()))
            held = f" While they wait, the releasing thread runs `{fn}` ({n} samples)."
        if info["releasers"]:
            held += f" It is released in `{next(iter(info['releasers']))}`."
    return Finding(
        "lock", f"threads wait {format_ns(int(wait))} in total on {name}{serial}",
        f"{wait / span:.1f} threads on average are blocked on it; it is released mostly by {who}.{held} "
        "Shorter critical sections, finer locks or less work between barriers would cut this." + why,
        gain, None, addr)


def alone_time(trace: Trace) -> dict[int, int]:
    """ns each thread was the only RUNNING thread. One compiled merge of the threads' running
    intervals in time order (each thread's come sorted), counting who runs; a table whose rows of
    one thread are out of time order gets the sweep (`_alone_by_sweep`). The sweep of all running
    intervals (64 bytes each) is no longer built for this when the criticality stack uses switch
    spans: 130 MB for 1.25 M intervals."""
    s = trace.states
    tids, rows = thread_lookup(trace)
    alone, has, bad, ok = _alone(s.tid, s.start_ns, s.end_ns, s.state, tids, rows, trace.start_ns, trace.end_ns)
    if bad >= 0:
        trace.thread_index(s.tid[bad])  # raises KeyError, as the sweep does
    if not ok:
        return _alone_by_sweep(trace)
    return {int(trace.threads.tid[k]): int(alone[k]) for k in np.flatnonzero(has).tolist()}


def _alone_by_sweep(trace: Trace) -> dict[int, int]:
    """`alone_time` from the shared sweep of the running intervals: G(t) = time with exactly one
    runner so far, integrated over each thread's own running intervals (only it runs then)."""
    rows, a, _, tl, where = sweep(trace, "running", trace.start_ns, trace.end_ns)
    if len(a) == 0:
        return {}
    g = np.zeros(len(tl.u), np.int64)
    np.cumsum(np.where(tl.r[:-1] == 1, np.diff(tl.u), 0), out=g[1:])
    per = g[where[1:2 * len(a):2]] - g[where[0:2 * len(a):2]]
    sums = np.zeros(len(trace.threads), np.int64)
    np.add.at(sums, rows, per)
    return {int(trace.threads.tid[k]): int(sums[k]) for k in np.unique(rows).tolist()}


@numba.njit(cache=True, inline="always")
def _next_running(state, start, end, i, stop, t0, t1):
    """The first row from i (before stop) RUNNING for some time inside [t0, t1], else stop."""
    while i < stop and (state[i] != 0 or min(max(end[i], t0), t1) <= min(max(start[i], t0), t1)):
        i += 1
    return i


@numba.njit(cache=True)
def _alone(tid, start, end, state, tids, rows, t0, t1):
    """Per thread row: ns it ran alone, whether it ran at all; the first RUNNING row whose tid is
    not a thread (-1: none); whether each thread's running intervals come in time order (else the
    caller sweeps). Runs are a thread's consecutive rows; a heap of them by their next start or
    end gives the instants in time order, and the count of runners with the sum of their rows
    names the runner when there is one."""
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
        if state[i] != 0:
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
            has[rows[p]] = True
    first[n_runs] = m
    cur = np.empty(n_runs, np.int64)
    head_t = np.empty(n_runs, np.int64)
    head_k = np.zeros(n_runs, np.int8)  # ties need no order: no time passes between them
    inside = np.zeros(n_runs, np.bool_)
    heap = np.empty(n_runs, np.int64)
    size = 0
    for r in range(n_runs):
        i = _next_running(state, start, end, first[r], first[r + 1], t0, t1)
        if i < first[r + 1]:
            cur[r] = i
            head_t[r] = min(max(start[i], t0), t1)
            heap[size] = r
            size += 1
    for at in range(size // 2 - 1, -1, -1):
        sift_runs(heap, size, at, head_t, head_k)
    running = 0
    who = 0  # the sum of the running threads' rows: the runner's when one runs
    last = t0
    while size > 0:
        r = heap[0]
        t = head_t[r]
        if running == 1:
            alone[who] += t - last
        last = t
        i = cur[r]
        if not inside[r]:
            running += 1
            who += run_k[r]
            inside[r] = True
            head_t[r] = min(max(end[i], t0), t1)
        else:
            running -= 1
            who -= run_k[r]
            inside[r] = False
            i = _next_running(state, start, end, i + 1, first[r + 1], t0, t1)
            if i < first[r + 1]:
                cur[r] = i
                head_t[r] = min(max(start[i], t0), t1)
            else:
                size -= 1
                heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, head_k)
    return alone, has, -1, True


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


def addr_sums(st, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct wait objects of the `mask`ed rows (sorted), how many rows each, and their ns
    (float64): `np.unique(st.addr[mask], return_inverse=True)` with the two bincounts of it, in one
    pass with a table of the few addresses (the masked copies, sort and inverse took ~500 MB for
    12.5 M waits). The sums are exact (integers below 2^53), as the bincount's were."""
    addrs, counts, sums = _addr_sums(mask, st.addr, st.start_ns, st.end_ns)
    order = np.argsort(addrs, kind="stable")
    return addrs[order], counts[order], sums[order].astype(np.float64)


@numba.njit(cache=True)
def _addr_sums(mask, addr, start, end):
    slot = dict()
    keys = np.empty(16, addr.dtype)
    counts = np.zeros(16, np.int64)
    sums = np.zeros(16, np.int64)
    n = 0
    for i in range(mask.shape[0]):
        if not mask[i]:
            continue
        a = addr[i]
        if a in slot:
            j = slot[a]
        else:
            if n == keys.shape[0]:  # room for more addresses
                keys = np.concatenate((keys, np.empty(n, addr.dtype)))
                counts = np.concatenate((counts, np.zeros(n, np.int64)))
                sums = np.concatenate((sums, np.zeros(n, np.int64)))
            j = n
            slot[a] = j
            keys[j] = a
            n += 1
        counts[j] += 1
        sums[j] += end[i] - start[i]
    return keys[:n], counts[:n], sums[:n]


def caused_wait(trace: Trace, woken: np.ndarray) -> dict[int, int]:
    """ns of the `woken` waits (their wakers are threads of the trace) summed per waker, wakers in
    the order of their first such wait: one compiled pass, where a Python loop over the waits'
    wakers and durations as lists held 43 MB of ints for 714 K waits."""
    tids = np.sort(trace.threads.tid)
    st = trace.states
    sums, first = _caused(woken, st.waker, st.start_ns, st.end_ns, tids)
    return {int(tids[p]): int(sums[p]) for p in sorted(np.flatnonzero(first >= 0).tolist(), key=lambda p: first[p])}


@numba.njit(cache=True)
def _caused(woken, waker, start, end, tids):
    sums = np.zeros(tids.shape[0], np.int64)
    first = np.full(tids.shape[0], -1, np.int64)
    for i in range(woken.shape[0]):
        if woken[i]:
            p = find_sorted(tids, waker[i])
            if first[p] < 0:
                first[p] = i
            sums[p] += end[i] - start[i]
    return sums, first


def with_inferred_wakers(trace: Trace, slack_ns: int = 50_000) -> Trace:
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


def advise(trace: Trace, factor: float = 2.0, max_threads: int = 3, sweep: dict[int, Trace] | None = None
           ) -> AdviceResult:
    """Findings for `trace`; the `max_threads` most critical threads get a what-if replay.

    With `sweep` ({thread count: trace}, the smallest count 1), the speedup stack of the largest
    count adds a finding on what the speedup loses most.
    """
    cr = criticality(trace)
    span = max(int(cr.span_ns), 1)
    names = {int(t): str(n) for t, n in zip(cr.tids, cr.names, strict=True)}
    alone = alone_time(trace)
    trace = with_inferred_wakers(trace)
    st = trace.states
    woken = (st.state == State.SYNC_WAIT) & np.isin(st.waker, trace.threads.tid)
    caused = caused_wait(trace, woken)
    share = cr.share
    ran = cr.running_ns > 0
    n_ran = int(ran.sum())
    findings: list[Finding] = []
    code = _where(trace)
    lock_info = {int(x["addr"], 16): x for x in code.locks} if code else {}

    def label(t: int) -> str:
        return f"thread {names.get(t, '?')} ({t})"

    def lock_name(addr: int) -> str:
        entry = (trace.meta.get("locks") or {}).get(f"{addr:#x}")
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
    for rank, i in enumerate(order):
        t = int(cr.tids[i])
        if not single or share[i] < 1.15 * even:
            continue
        w = whatif(trace, t, factor)
        parts = [f"critical for {share[i] * 100:.0f}% of the run time (an even share is {even * 100:.0f}%)"]
        if alone.get(t, 0) > 0.02 * span:
            parts.append(f"runs alone for {format_ns(alone[t])} ({alone[t] / span * 100:.0f}% of the run) "
                         "while every other thread waits")
        mine = woken & (st.waker == t)
        addr = None
        if caused.get(t, 0) > 0.02 * span:
            addrs, n_waits, per_addr = addr_sums(st, mine)
            once = n_waits < 2
            if not np.all(once):  # a join waits once: name the lock or barrier waited on again and again
                per_addr[once] = 0
            addr = int(addrs[int(np.argmax(per_addr))])
            waiters = [label(int(x)) for x in np.unique(st.tid[mine & (st.addr == addr)])]
            where = (f"mostly on {lock_name(addr)}" if np.count_nonzero(per_addr) == 1 else
                     f"on {np.count_nonzero(per_addr)} futexes, most on {lock_name(addr)}")
            parts.append(f"the others wait {format_ns(caused[t])} for it, {where} "
                         f"(a lock or barrier it releases last; waiting: {', '.join(waiters[:4])})")
        fn = _top_function(code, t)
        if fn:
            parts.append(f"{fn[1] * 100:.0f}% of its criticality in `{fn[0]}`")
        what = ("parallelise its serial part or move work from it to the threads that wait"
                if alone.get(t, 0) > 0.1 * span else "shorten its work or split it across the waiting threads")
        findings.append(Finding(
            "critical-thread", f"{label(t)} is the critical thread" if rank == 0 else f"{label(t)} is also critical",
            f"It is {'; '.join(parts)}: {what}. Making it {factor:g}x faster would speed the program up "
            f"{w.replay_speedup:.2f}x (dependency replay).", w.replay_speedup, t, addr))

    # 2. serial time (one thread running), Amdahl's bound if it were spread over the others
    serial = sum(alone.values())
    if serial > 0.1 * span and n_work > 1:
        main_t = max(alone, key=alone.get)
        gain = 1.0 / (1.0 - serial / span + serial / span / n_work)
        findings.append(Finding(
            "serial", f"{serial / span * 100:.0f}% of the run has a single thread running",
            f"For {format_ns(serial)} only one thread runs (most of it {label(main_t)}). Spread over the "
            f"{n_work} threads that do the work, that time would give at most {gain:.2f}x (Amdahl).", gain, main_t))

    # 3. the most waited-on lock, and who releases it (named, with its holder, from call stacks)
    sync = st.state == State.SYNC_WAIT
    top_lock = _top_lock(code, span) if code else None
    if top_lock is not None:
        words = np.array([int(x, 16) for x in top_lock["addrs"]], dtype=np.uint64)
        addr0 = int(words[0])
        if not any(f.addr is not None and f.addr in words.tolist() for f in findings):
            sel = sync & np.isin(st.addr, words) & np.isin(st.waker, trace.threads.tid)
            findings.append(_lock_finding(trace, top_lock["name"], float(top_lock["wait_ns"]), span, sel, label,
                                          factor, addr0, top_lock))
    elif np.any(sync) and code is None:
        addrs, n_waits, per_addr = addr_sums(st, sync)
        per_addr[n_waits < 3] = 0  # a join waits once per thread: not a lock or barrier
        k = int(np.argmax(per_addr))
        wait = float(per_addr[k])
        if addrs[k] != 0 and wait > 0.2 * span and not any(f.addr == int(addrs[k]) for f in findings):
            sel = sync & (st.addr == addrs[k]) & np.isin(st.waker, trace.threads.tid)
            findings.append(_lock_finding(trace, lock_name(int(addrs[k])), wait, span, sel, label, factor,
                                          int(addrs[k]), None))

    # 4. CPU contention: runnable time (more runnable threads than cores)
    rq = float(state_ns(st, int(State.RUNNABLE)))
    cores = trace.meta.get("cores")
    if rq > 0.2 * span:
        findings.append(Finding(
            "cpu-contention", f"threads wait {format_ns(int(rq))} for a CPU",
            f"On average {rq / span:.1f} threads are ready but not running"
            + (f" on this {cores}-core machine" if cores else "")
            + ": use no more runnable threads than cores, or run where more cores are free.", 1.0))

    if sweep:
        findings += sweep_findings(sweep)
    pools = _pool_findings(trace, span, factor, label)
    pool_addrs = {f.addr for f in pools}
    findings = [f for f in findings if not (f.kind == "lock" and f.addr in pool_addrs)] + pools

    if rq <= 0.1 * span:  # with CPU contention, who lags in a phase is the scheduler's doing, not the work's
        findings += _phase_findings(trace, factor, label)

    if not any(f.kind in ("critical-thread", "phase-critical") for f in findings):
        findings.insert(0, Finding(
            "balanced", "no single critical thread",
            f"The {n_work} threads doing the work share the run time evenly (largest share {shares[0] * 100:.0f}%, "
            f"an even share is {even * 100:.0f}%): speeding up one thread would not help much; look at the work "
            "all threads do.",
            1.0))
    def serializing(f: Finding) -> bool:  # a lock some thread waits on for most of the run comes first
        info = lock_info.get(f.addr) if f.kind == "lock" and f.addr is not None else None
        info = info or next((x for x in lock_info.values() if f.kind == "lock" and f.addr is not None
                             and f"{f.addr:#x}" in x.get("addrs", ())), None)
        return bool(info and info["waiters"] >= 2 and info["how"] != "join"
                    and max(info["serial_share"], info["critical_share"]) >= SERIALIZING)

    findings.sort(key=lambda f: (not serializing(f), f.kind != "balanced", -f.predicted_speedup))
    return AdviceResult(findings, span, alone, caused)


def _phase_findings(trace: Trace, factor: float, label, lead: float = 1.15, least: float = 0.1) -> list[Finding]:
    """A finding when different threads are the critical one in different phases (thesis §4.4,
    Lu non-cont.): whole-run criticality adds their shares up and can show no critical thread, or
    the wrong one, though in every phase the program waits for one thread.

    A phase counts for a thread when its criticality there is at least `lead` x the next thread's;
    the finding needs two or more such threads with at least `least` of the run each. Its gain is
    the per-phase estimate (`phase_criticality`: each phase's saving capped at the lead). Threads
    waiting for a CPU count as active, so CPU contention alone does not make phases.
    """
    from scalestack.analysis.phase_criticality import phase_criticality

    # a thread waiting for a CPU counts as active: phases are then cut only where the program waited
    # for one thread, not where the scheduler made two threads take turns on one core
    pc = phase_criticality(trace, factor=factor, active="running+runnable")
    c = pc.criticality_ns
    if c.shape[0] < 2 or c.shape[1] < 2 or pc.span_ns <= 0:
        return []
    top2 = -np.sort(-c, axis=1)[:, :2]
    clear = (top2[:, 0] > 0) & (top2[:, 0] >= lead * top2[:, 1])
    top = np.argmax(c, axis=1)
    length = np.diff(pc.bounds_ns).astype(float)
    leaders = []
    for k in np.unique(top[clear]):
        mine = clear & (top == k)
        if length[mine].sum() >= least * pc.span_ns:
            leaders.append((int(k), int(mine.sum()), float(length[mine].sum() / pc.span_ns)))
    if len(leaders) < 2 or pc.best_tid is None:
        return []
    leaders.sort(key=lambda x: -x[2])
    best = pc.best_tid
    gain = float(pc.predicted_speedup[int(np.flatnonzero(pc.tids == best)[0])])
    who = "; ".join(f"{label(int(pc.tids[k]))} in {n} phase{'s' if n != 1 else ''} ({share * 100:.0f}% of the run)" for k, n, share in leaders[:4])
    return [Finding(
        "phase-critical", f"the critical thread changes between phases ({len(leaders)} threads take turns)",
        f"Of {c.shape[0]} phases (cut where the program waited for one thread: barriers, joins), one thread is "
        f"clearly the critical one in each of these: {who}. Whole-run criticality adds the phases together, which "
        "hides this: in each of those phases the program waits for one of them. Balance the work within each phase; "
        f"or, per phase, making {label(best)} {factor:g}x faster saves the most: {gain:.2f}x (criticality per "
        "phase, each phase's saving capped at its lead over the next thread).", gain, best)]


def _pool_findings(trace: Trace, span: int, factor: float, label) -> list[Finding]:
    """Thread pools (names stem-1, stem-2, ...) that run far less in parallel than they could.

    The bottle graph's pool box gives the parallelism P = run time / criticality; with k threads
    on c cores the pool could reach min(k, c). The futex its members wait on most, and the thread
    that releases it, say why; the gain is the bottle-graph bound (the pool's criticality shrunk
    by P / min(k, c)) and the dependency replay of making that releaser `factor` times faster.
    """
    th = trace.threads
    stems: dict[str, int] = {}
    for name in th.name.tolist():
        m = re.fullmatch(r"(.*\D)[-_#]?\d+", str(name))
        if m:
            stems[m.group(1)] = stems.get(m.group(1), 0) + 1
    rules = [(rf"^{re.escape(stem)}[-_#]?\d+$", f"{stem}*") for stem, k in stems.items() if k >= 2]
    if not rules:
        return []
    cores = int(trace.meta.get("cores") or 0)
    st = trace.states
    out = []
    for box in bottle(trace, group_by=rules).boxes:
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
        sel = np.isin(st.tid, box.tids) & (st.state == State.SYNC_WAIT)
        addr, gain = None, bound
        if np.any(sel):
            addrs, _, per = addr_sums(st, sel)
            addr = int(addrs[int(np.argmax(per))])
            rel = sel & (st.addr == addr) & np.isin(st.waker, trace.threads.tid)
            detail += f" Its threads wait {format_ns(int(per.max()))} on futex {addr:#x}"
            if np.any(rel):
                w, c = np.unique(st.waker[rel], return_counts=True)
                holder = int(w[int(np.argmax(c))])
                inside = "one of its own threads" if holder in box.tids else "a thread outside it"
                if c.max() >= 0.5 * c.sum():
                    detail += f", released mostly by {label(holder)} ({inside}, {c.max()} of {int(c.sum())} times)"
                else:
                    detail += (f", released by {len(w)} threads in turn (most often {label(holder)}, {inside}, "
                               f"{c.max()} of {int(c.sum())} times)")
                replay = whatif(trace, holder, factor).replay_speedup
                detail += f"; making that thread {factor:g}x faster would give {replay:.2f}x (dependency replay)"
            detail += ": shorten or split what is done under it (finer locks, per-thread data, less to do between barriers)."
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
