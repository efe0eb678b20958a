"""Compare two recordings of one program: what changed, and what it did to the wall time.

Thread ids differ between runs, so threads are matched by a key: their role and their name with
digit runs replaced by ``*`` (``worker-3`` → ``worker-*``; the main thread by its role alone, as
it is named after the binary), then by position (start order) among the threads with that key.
Threads whose key more than one thread has, in either run, form a pool, compared as one unit
(a sweep from 1 to N threads compares pool to pool).

Wait objects (the futex addresses of SYNC_WAIT intervals) differ between runs too (ASLR); they
are matched by address when the same one has the same waiters in both runs, else by the address's
offset in its page (a static lock keeps it under ASLR) and the keys of the threads that wait on
it.

Every row says how much it contributed to the change in wall time, in ns of wall time:

* a thread or pool: the change in its criticality (thesis §3.2), counting a thread that waits for
  a CPU as active by default (``active="running+runnable"``: time the program lost to other
  processes on a busy machine then belongs to the thread that waited, not to "idle").
  Criticalities and the idle time (no thread active) add up to the wall time, so these rows and
  the ``idle`` row add up to the wall-time change exactly.
* a wait object: the change in its *wall-time share*: at each instant the wall time is divided
  equally among the threads alive then, and each thread's part goes to what it is doing; the
  parts of the threads waiting on the object are its share. Instants at which the program's
  active threads fill every core it may use count for no object: a wait then leaves no core
  idle and costs no wall time (a pool's reader and writer waiting for its compressors). This is
  a second, separate view: rows of both kinds are ranked together, but only thread rows add up. The waits of idle threads (`where.idle_threads`: a
  runtime's GC, JIT and service threads, parked threads) are left out: waiting for work,
  they follow the wall time and explain none of it (node's idle V8 workers, parked for the whole
  run, were "61% of" a change that its pool's size made).

Rows are ranked by the size of their contribution, largest first; the summary line names the
first ones.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from scalestack.analysis.criticality import criticality, timeline
from scalestack.analysis.where import trace_idle_threads
from scalestack.results import Result
from scalestack.trace import State, Trace
from scalestack.trace.exit_wakers import SLACK_NS
from scalestack.units import format_ns

MATCHED = 200  # wait objects per run matched one by one (by wall-time share); the others are summed
STATS = ("criticality_ns", "running_ns", "runnable_ns", "sync_wait_ns", "io_wait_ns", "sleep_ns")


def name_pattern(name: str) -> str:
    """The thread name with every run of digits replaced by ``*`` (``worker-12`` → ``worker-*``)."""
    return re.sub(r"\d+", "*", str(name))


def thread_key(name: str, role: str) -> str:
    """What a thread is matched on across runs: role and name pattern (the main thread: role)."""
    return "main" if str(role) == "main" else f"{role}:{name_pattern(name)}"


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """Per-thread numbers of one run (rows in the trace's thread order)."""

    tids: np.ndarray
    names: np.ndarray
    roles: np.ndarray
    keys: list[str]
    position: np.ndarray  # index among the threads with the same key, by start time
    stats: dict[str, np.ndarray]  # STATS → per thread
    idle_ns: float
    wall_ns: int
    objects: list[dict[str, Any]]  # per wait object: addr, wait_ns, waits, share_ns, waiters, wakers
    idle_running_ns: float = 0.0  # time with no thread running (for the parallelism)
    functions: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # from samples
    idle_rows: np.ndarray | None = None  # per thread: waits for work (`where.idle_threads`); None: unknown

    @property
    def parallelism(self) -> float:
        """Average number of threads running while at least one runs."""
        busy = self.wall_ns - self.idle_running_ns
        return float(self.stats["running_ns"].sum()) / busy if busy > 0 else float("nan")


def run_facts(trace: Trace, active: str = "running+runnable") -> RunFacts:
    """Criticality, time in states and the wait objects (with their wall-time share) of `trace`."""
    th = trace.threads
    cr = criticality(trace, active=active)
    times = trace.time_in_states()
    keys = [thread_key(n, r) for n, r in zip(th.name.tolist(), th.role.tolist(), strict=True)]
    order = np.lexsort((th.tid, th.start_ns))
    position = np.zeros(len(th), dtype=np.int64)
    seen: dict[str, int] = {}
    for i in order.tolist():
        position[i] = seen.get(keys[i], 0)
        seen[keys[i]] = position[i] + 1
    stats = {"criticality_ns": cr.criticality_ns.astype(float), "running_ns": times[:, State.RUNNING].astype(float),
             "runnable_ns": times[:, State.RUNNABLE].astype(float), "sync_wait_ns": times[:, State.SYNC_WAIT].astype(float),
             "io_wait_ns": times[:, State.IO_WAIT].astype(float), "sleep_ns": times[:, State.SLEEP].astype(float)}
    idle = trace_idle_threads(trace, stats["running_ns"])
    return RunFacts(th.tid.copy(), th.name.copy(), th.role.copy(), keys, position, stats, float(cr.idle_ns),
                    int(trace.wall_ns), _wait_objects(trace, keys, idle),
                    float(cr.idle_ns if active == "running" else criticality(trace).idle_ns),
                    _functions(trace, cr, active), np.isin(th.tid, idle))


def aggregate_facts(rec) -> RunFacts:
    """The same numbers from an aggregate recording (`record --aggregate`): its criticality counts
    running threads only, and it has no wait objects or samples."""
    tids, names, roles = rec.threads()
    sums = rec.per_thread()
    start, end, busy = rec.windows()
    span = int(end[-1] - start[0]) if len(start) else 0
    keys = [thread_key(n, r) for n, r in zip(names.tolist(), roles.tolist(), strict=True)]
    w = rec.columns["window"].astype(np.int64)
    first = np.full(len(tids), np.iinfo(np.int64).max)
    np.minimum.at(first, np.searchsorted(tids, rec.columns["tid"].astype(np.int64)), w)
    position = np.zeros(len(tids), dtype=np.int64)
    seen: dict[str, int] = {}
    for i in np.lexsort((tids, first)).tolist():
        position[i] = seen.get(keys[i], 0)
        seen[keys[i]] = position[i] + 1
    stats = {s_: np.asarray(sums[s_], float) for s_ in STATS if s_ != "criticality_ns"}
    stats["criticality_ns"] = np.asarray(sums["crit_ns"], float)
    idle = float(max(span - busy.sum(), 0.0))
    return RunFacts(tids, names, roles, keys, position, stats, idle, span, [], idle)


RECORDING = "the recording's own work (perf's tracepoint handlers)"  # `where.RECORDER`'s samples, one row


def _functions(trace: Trace, cr, active: str) -> dict[str, dict[str, float]]:
    """Criticality per sampled function (`record --sample`): each thread's criticality spread over
    its samples, a sample taken while r threads were active weighing 1/r (the thesis's division of
    that instant). Per thread the functions add up to its criticality. Keyed by
    'symbol (binary's file name)'; samples in the recorder's handlers are one key, `RECORDING`."""
    import os

    from scalestack.analysis.criticality import sweep
    from scalestack.analysis.where import recorder_samples

    sm = trace.samples
    if len(sm) == 0:
        return {}
    known = np.isin(sm.tid, trace.threads.tid)
    if not np.any(known):
        return {}
    tid, t = sm.tid[known], sm.time_ns[known]
    tl = sweep(trace, active, trace.start_ns, trace.end_ns)[3]
    k = np.clip(np.searchsorted(tl.u, t, side="right") - 1, 0, max(len(tl.u) - 1, 0))
    w = 1.0 / np.maximum(tl.r[k], 1) if len(tl.u) else np.ones(len(t))
    rows = trace.thread_index(tid)
    per_thread = np.bincount(rows, weights=w, minlength=len(trace.threads))
    crit = cr.criticality_ns[rows] * w / np.where(per_thread[rows] > 0, per_thread[rows], 1)
    keys = [f"{sym} ({os.path.basename(str(binary))})" for sym, binary in
            zip(sm.symbol[known].tolist(), sm.binary[known].tolist(), strict=True)]
    for i in np.flatnonzero(recorder_samples(trace)[known]).tolist():  # whatever leaf it stopped in
        keys[i] = RECORDING
    uniq, inv = np.unique(np.array(keys, dtype=object), return_inverse=True)
    c = np.bincount(inv, weights=crit, minlength=len(uniq))
    n = np.bincount(inv, minlength=len(uniq))
    return {str(u): {"criticality_ns": float(c[i]), "samples": float(n[i])} for i, u in enumerate(uniq.tolist())}


def _share_where_a_core_is_free(trace: Trace, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each [a, b)'s wall-time share, ∫ dt / (threads alive at t), over the instants at which the
    program's active threads leave one of its cores free. A wait while its other threads fill
    every core costs no wall time: pigz -p 2's reader and writer wait for its two compressors on 2
    cores (1.2 s of their waits were "105 ms more wall time" against a 1.91x speedup)."""
    from scalestack.analysis.advice import usable_cores
    from scalestack.analysis.criticality import sweep

    th = trace.threads
    alive, _ = timeline(th.start_ns, th.end_ns, trace.start_ns, trace.end_ns)
    cores = usable_cores(trace.meta)
    if not cores or len(alive.u) == 0:
        return alive.at(b) - alive.at(a)
    busy = sweep(trace, "running+runnable", trace.start_ns, trace.end_ns)[3]
    u = np.union1d(alive.u, busy.u)
    n_alive = alive.r[np.clip(np.searchsorted(alive.u, u, side="right") - 1, 0, len(alive.u) - 1)]
    n_busy = busy.r[np.clip(np.searchsorted(busy.u, u, side="right") - 1, 0, len(busy.u) - 1)] if len(busy.u) \
        else np.zeros(len(u), np.int32)
    rate = np.where((n_busy < cores) & (n_alive > 0), 1.0 / np.maximum(n_alive, 1), 0.0)
    g = np.concatenate(([0.0], np.cumsum(rate[:-1] * np.diff(u).astype(np.float64))))
    return np.interp(b, u, g) - np.interp(a, u, g)


def _wait_objects(trace: Trace, keys: list[str], idle: np.ndarray) -> list[dict[str, Any]]:
    """The wait objects of the threads that work (`idle`: the threads left out)."""
    st, th = trace.states, trace.threads
    sync = np.flatnonzero((st.state == State.SYNC_WAIT) & ~np.isin(st.tid, idle))
    if len(sync) == 0 or len(th) == 0:
        return []
    share = _share_where_a_core_is_free(trace, st.start_ns[sync], st.end_ns[sync])
    rows = trace.thread_index(st.tid[sync])
    wrows = trace.thread_index(st.waker[sync], missing=-1)
    addrs, inv = np.unique(st.addr[sync], return_inverse=True)
    order = np.argsort(inv, kind="stable")  # each object's intervals together: one pass over them
    bounds = np.searchsorted(inv[order], np.arange(len(addrs) + 1))
    dur = st.duration_ns[sync].astype(float)
    tids = st.tid[sync]
    # a join: the wait ends as its waker exits (the kernel wakes a joiner from the thread's exit; the
    # slack `exit_wakers` and `where.locks` allow)
    known = wrows >= 0
    joined = np.zeros(len(sync), bool)
    joined[known] = th.exited[wrows[known]] & (np.abs(th.end_ns[wrows[known]] - st.end_ns[sync][known]) < SLACK_NS)
    out = []
    for k, addr in enumerate(addrs.tolist()):
        sel = order[bounds[k]:bounds[k + 1]]
        waiters: dict[str, float] = {}
        for r, d in zip(rows[sel].tolist(), dur[sel].tolist(), strict=True):
            waiters[keys[r]] = waiters.get(keys[r], 0.0) + d
        wakers: dict[str, int] = {}
        for r in wrows[sel].tolist():
            if r >= 0:
                wakers[keys[r]] = wakers.get(keys[r], 0) + 1
        out.append({"addr": int(addr), "wait_ns": float(dur[sel].sum()), "waits": int(len(sel)),
                    "joins": int(joined[sel].sum()),
                    "share_ns": float(share[sel].sum()), "waiters": waiters, "wakers": wakers,
                    "waiter_tids": sorted({int(t) for t in tids[sel].tolist()})})
    return out


@dataclasses.dataclass(frozen=True)
class Change:
    """One ranked row: a thread, a pool, a wait object or the idle time, in run A and run B."""

    kind: str  # thread | pool | wait | idle | function
    label: str
    a: dict[str, float]  # criticality_ns, running_ns, ... (wait: wait_ns, waits, share_ns)
    b: dict[str, float]
    contribution_ns: float  # to the wall-time change (B - A)
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)

    def delta(self, key: str) -> float:
        return float(self.b.get(key, 0.0)) - float(self.a.get(key, 0.0))

    def to_dict(self) -> dict[str, Any]:
        keys = sorted(set(self.a) | set(self.b))
        return {"kind": self.kind, "label": self.label, "contribution_ns": self.contribution_ns,
                "a": dict(self.a), "b": dict(self.b), "delta": {k: self.delta(k) for k in keys}, **self.detail}


@dataclasses.dataclass(frozen=True)
class CompareResult(Result):
    """Run B against run A: wall time, parallelism and ranked changes (see the module doc)."""

    wall_a_ns: int
    wall_b_ns: int
    parallelism_a: float
    parallelism_b: float
    changes: tuple[Change, ...]  # ranked: largest |contribution| first
    threads: tuple[dict[str, Any], ...]  # every matched (or unmatched) thread
    labels: tuple[str, str] = ("A", "B")

    kind = "compare"

    @property
    def wall_change_ns(self) -> int:
        return self.wall_b_ns - self.wall_a_ns

    @property
    def speedup(self) -> float:
        """Wall time of A over wall time of B (> 1: B is faster)."""
        return self.wall_a_ns / self.wall_b_ns if self.wall_b_ns > 0 else float("inf")

    def summary(self) -> str:
        """One plain-language line: how much faster or slower, and what it came from first."""
        d = self.wall_change_ns
        a, b = format_ns(self.wall_a_ns), format_ns(self.wall_b_ns)
        if self.wall_a_ns == 0 or abs(d) < 0.005 * self.wall_a_ns:
            head = f"the run took as long ({a} and {b})"
        elif d < 0:
            head = f"the run got {self.speedup:.2f}x faster ({a} → {b})"
        else:
            head = f"the run got {1 / self.speedup:.2f}x slower ({a} → {b})"
        par = f"parallelism {self.parallelism_a:.2f} → {self.parallelism_b:.2f}"
        parts = [_phrase(c, d) for c in self.changes[:2] if c.kind != "idle" and abs(c.contribution_ns) > 0]
        return f"{head}, {par}" + ("; " + "; then ".join(parts) if parts else "") + "."

    def rows(self) -> list[dict[str, Any]]:
        d = self.wall_change_ns
        out = []
        for rank, c in enumerate(self.changes, 1):
            crit = c.kind in ("thread", "pool", "idle", "function")
            out.append({
                "rank": rank, "kind": c.kind, "label": c.label, "contribution_ns": c.contribution_ns,
                "share_of_change_pct": c.contribution_ns / d * 100 if d else None,
                "criticality_change_ns": c.delta("criticality_ns") if crit else None,
                "running_change_ns": c.delta("running_ns") if crit and c.kind != "function" else None,
                "runnable_change_ns": c.delta("runnable_ns") if crit and c.kind != "function" else None,
                "wait_change_ns": (None if c.kind == "function" else
                                   c.delta("sync_wait_ns") + c.delta("io_wait_ns") if crit else c.delta("wait_ns")),
            })
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "wall_a_ns": self.wall_a_ns, "wall_b_ns": self.wall_b_ns,
                "wall_change_ns": self.wall_change_ns, "speedup": self.speedup,
                "parallelism_a": self.parallelism_a, "parallelism_b": self.parallelism_b,
                "summary": self.summary(), "changes": [c.to_dict() for c in self.changes],
                "threads": list(self.threads)}


def _phrase(c: Change, total: float) -> str:
    pct = ""
    if total:
        pct = (f"{abs(c.contribution_ns) / abs(total) * 100:.0f}% of it from " if c.contribution_ns * total > 0
               else "against it, ")
    if c.kind == "wait":
        dw = c.delta("wait_ns")
        verb = "less" if dw < 0 else "more"
        wall = "less" if c.contribution_ns < 0 else "more"
        return (f"{pct}waits on the {c.detail['description']} ({format_ns(abs(dw))} {verb} waiting, "
                f"{format_ns(abs(c.contribution_ns))} {wall} wall time)")
    dc = c.delta("criticality_ns")
    what = f"{c.kind} '{c.label}'"
    more = [f"critical {format_ns(abs(dc))} {'less' if dc < 0 else 'more'}"]
    for key, word in (("running_ns", "running"), ("sync_wait_ns", "waiting"), ("runnable_ns", "waiting for a CPU")):
        v = c.delta(key)
        if key == "sync_wait_ns":  # idle members wait for work, as long as the run lasts: not a change's cause
            v -= c.detail.get("idle_sync_wait_ns_b", 0.0) - c.detail.get("idle_sync_wait_ns_a", 0.0)
        if abs(v) >= 0.1 * abs(dc) and abs(v) > 0:
            more.append(f"{word} {format_ns(abs(v))} {'less' if v < 0 else 'more'}")
    return f"{pct}{what} ({', '.join(more)})"


def _match_threads(fa: RunFacts, fb: RunFacts) -> list[tuple[str, int, int | None, int | None]]:
    """(key, position, row in A or None, row in B or None) for every thread of either run."""
    ia = {(k, int(p)): i for i, (k, p) in enumerate(zip(fa.keys, fa.position.tolist(), strict=True))}
    ib = {(k, int(p)): i for i, (k, p) in enumerate(zip(fb.keys, fb.position.tolist(), strict=True))}
    allk = sorted(set(ia) | set(ib), key=lambda kp: (kp[0], kp[1]))
    return [(k, p, ia.get((k, p)), ib.get((k, p))) for k, p in allk]


def _stats(f: RunFacts, rows: list[int]) -> dict[str, float]:
    return {s: float(f.stats[s][rows].sum()) if rows else 0.0 for s in STATS}


def _key_label(key: str) -> str:
    return "main" if key == "main" else key.split(":", 1)[1]


def _objects_label(o: dict[str, Any]) -> str:
    who = sorted(o["waiters"], key=lambda k: -o["waiters"][k])
    return ", ".join(_key_label(k) for k in who[:3])


def _match_objects(oa: list[dict], ob: list[dict]) -> list[tuple[dict | None, dict | None]]:
    """Pairs of wait objects, one from each run (None where one run has no match)."""
    def score(x: dict, y: dict) -> float:
        wx, wy = set(x["waiters"]), set(y["waiters"])
        jac = len(wx & wy) / len(wx | wy) if wx | wy else 0.0
        if x["addr"] == y["addr"] and jac > 0:
            return 10.0
        s = jac
        if x["addr"] and y["addr"] and (x["addr"] & 0xFFF) == (y["addr"] & 0xFFF):
            s += 2.0
        if (x["waits"] >= 3) == (y["waits"] >= 3):
            s += 0.25
        return s if (jac > 0 or s >= 2.0) else 0.0

    cand = sorted(((score(x, y), -abs(x["share_ns"] - y["share_ns"]), i, j)
                   for i, x in enumerate(oa) for j, y in enumerate(ob)), reverse=True)
    used_a: set[int] = set()
    used_b: set[int] = set()
    pairs: list[tuple[dict | None, dict | None]] = []
    for s, _, i, j in cand:
        if s <= 0 or i in used_a or j in used_b:
            continue
        used_a.add(i)
        used_b.add(j)
        pairs.append((oa[i], ob[j]))
    pairs += [(x, None) for i, x in enumerate(oa) if i not in used_a]
    pairs += [(None, y) for j, y in enumerate(ob) if j not in used_b]
    return pairs


def _object_change(x: dict | None, y: dict | None) -> Change:
    ref = x if x is not None else y
    assert ref is not None
    join = any(o is not None and o["waits"] and 2 * o.get("joins", 0) >= o["waits"] for o in (x, y))
    kind = "join" if join else \
        "lock or barrier" if max((x or {}).get("waits", 0), (y or {}).get("waits", 0)) >= 3 else "join or one-off wait"
    wakers: dict[str, int] = {}
    for o in (x, y):
        for k, v in (o or {}).get("wakers", {}).items():
            wakers[k] = wakers.get(k, 0) + v
    rel = sorted(wakers, key=lambda k: -wakers[k])
    addr = (y if y is not None else x)["addr"]
    label = f"futex {addr:#x} ({'lock' if kind == 'lock or barrier' else 'join'}; {_objects_label(ref)})"
    def vals(o):
        return {"wait_ns": float(o["wait_ns"]), "waits": float(o["waits"]), "share_ns": float(o["share_ns"])} \
            if o is not None else {"wait_ns": 0.0, "waits": 0.0, "share_ns": 0.0}

    va, vb = vals(x), vals(y)
    detail = {"addr_a": None if x is None else x["addr"], "addr_b": None if y is None else y["addr"],
              "object": kind, "waiters": sorted(_key_label(k) for k in ref["waiters"]),
              "released_by": [_key_label(k) for k in rel],
              "description": (f"{kind} futex " + (f"{x['addr']:#x} → {y['addr']:#x}" if x is not None and y is not None
                                                  and x["addr"] != y["addr"] else f"{addr:#x}")
                              + f", waited on by {_objects_label(ref)}"
                              + (f", released by {', '.join(_key_label(k) for k in rel[:2])}" if rel else ""))}
    # a join waits for the joined threads' work: its wait follows their change, which their own rows
    # carry (main's pthread_join read as 149% of a 1.24x speedup whose causes were the split work
    # and a lock); it is listed, with no share of the change
    return Change("wait", label, va, vb, 0.0 if join else vb["share_ns"] - va["share_ns"], detail)


def compare(a, b, *, labels: tuple[str, str] = ("A", "B"), active: str = "running+runnable") -> CompareResult:
    """Run `b` against run `a` (the baseline): matched threads, pools and wait objects, ranked by
    their contribution to the change in wall time (see the module doc). Each run is a Trace or an
    AggregateRecording (`record --aggregate`: threads only, criticality of running threads).

    Examples
    --------
    >>> res = compare(scalestack.load("before.trace"), scalestack.load("after.trace"))  # doctest: +SKIP
    >>> print(res.summary())                                                           # doctest: +SKIP
    """
    from scalestack.trace.aggregate import AggregateRecording

    if isinstance(a, AggregateRecording) or isinstance(b, AggregateRecording):
        active = "running"  # what an aggregate recording counts; both runs alike
    fa, fb = (aggregate_facts(x) if isinstance(x, AggregateRecording) else run_facts(x, active) for x in (a, b))
    matched = _match_threads(fa, fb)
    by_key: dict[str, list[tuple[int | None, int | None]]] = {}
    threads = []
    for key, pos, ra, rb in matched:
        by_key.setdefault(key, []).append((ra, rb))
        sa = _stats(fa, [ra] if ra is not None else [])
        sb = _stats(fb, [rb] if rb is not None else [])
        threads.append({"key": key, "position": pos,
                        "tid_a": None if ra is None else int(fa.tids[ra]), "tid_b": None if rb is None else int(fb.tids[rb]),
                        "name_a": None if ra is None else str(fa.names[ra]),
                        "name_b": None if rb is None else str(fb.names[rb]),
                        "a": sa, "b": sb, "delta": {s: sb[s] - sa[s] for s in STATS}})
    changes: list[Change] = []
    for key, pairs in by_key.items():
        rows_a = [ra for ra, _ in pairs if ra is not None]
        rows_b = [rb for _, rb in pairs if rb is not None]
        sa, sb = _stats(fa, rows_a), _stats(fb, rows_b)
        pool = len(rows_a) > 1 or len(rows_b) > 1
        label = _key_label(key)
        if not pool and key != "main":
            names = {str(fa.names[r]) for r in rows_a} | {str(fb.names[r]) for r in rows_b}
            label = "/".join(sorted(names))
        detail = {"key": key, "threads_a": len(rows_a), "threads_b": len(rows_b),
                  "tids_a": [int(fa.tids[r]) for r in rows_a], "tids_b": [int(fb.tids[r]) for r in rows_b]}
        for f, rows, st_ in ((fa, rows_a, "a"), (fb, rows_b, "b")):
            # waits of its idle members (parked, or a runtime's service threads): `_phrase` leaves them out
            idle = [r for r in rows if f.idle_rows is not None and f.idle_rows[r]]
            detail[f"idle_sync_wait_ns_{st_}"] = float(f.stats["sync_wait_ns"][idle].sum()) if idle else 0.0
        for s, st_ in ((sa, "a"), (sb, "b")):
            # the box's width (bottle graph): threads active beside it, itself included
            act = s["running_ns"] + (s["runnable_ns"] if active != "running" else 0.0)
            detail[f"parallelism_{st_}"] = act / s["criticality_ns"] if s["criticality_ns"] > 0 else None
        changes.append(Change("pool" if pool else "thread", label, sa, sb, sb["criticality_ns"] - sa["criticality_ns"],
                              detail))
    changes.append(Change("idle", "no thread active", {"criticality_ns": fa.idle_ns}, {"criticality_ns": fb.idle_ns},
                          fb.idle_ns - fa.idle_ns))
    # the MATCHED objects with the largest shares are matched pair by pair; the rest, summed
    top_a = sorted(fa.objects, key=lambda o: -o["share_ns"])
    top_b = sorted(fb.objects, key=lambda o: -o["share_ns"])
    changes += [_object_change(x, y) for x, y in _match_objects(top_a[:MATCHED], top_b[:MATCHED])]
    rest_a, rest_b = top_a[MATCHED:], top_b[MATCHED:]
    if rest_a or rest_b:
        def total(objs):
            return {k: float(sum(o[k] for o in objs)) for k in ("wait_ns", "waits", "share_ns")}

        ra, rb = total(rest_a), total(rest_b)
        changes.append(Change("wait", f"{len(rest_a)} → {len(rest_b)} other futexes", ra, rb,
                              rb["share_ns"] - ra["share_ns"],
                              {"object": "others", "waiters": [], "released_by": [],
                               "description": f"futexes beyond the first {MATCHED} of each run"}))
    zero = {"criticality_ns": 0.0, "samples": 0.0}
    for fn in sorted(set(fa.functions) | set(fb.functions)):
        va, vb = fa.functions.get(fn, zero), fb.functions.get(fn, zero)
        changes.append(Change("function", fn, dict(va), dict(vb), vb["criticality_ns"] - va["criticality_ns"]))
    changes.sort(key=lambda c: (-abs(c.contribution_ns), c.kind, c.label))
    return CompareResult(fa.wall_ns, fb.wall_ns, fa.parallelism, fb.parallelism, tuple(changes), tuple(threads),
                         tuple(labels))


def compare_sweep(traces: Mapping[int, Trace]) -> list[CompareResult]:
    """A sweep ({thread count: trace}): each count against the smallest, in order of count
    (how each thread's, and each pool's, box changes from 1 to N threads)."""
    counts = sorted(traces)
    base = counts[0]
    return [compare(traces[base], traces[n], labels=(f"{base} threads", f"{n} threads")) for n in counts[1:]]
