"""DVFS performance prediction (DEP+BURST, Akram et al.; spec dep-burst.md §1-2).

Predicts a multi-threaded run's time at another clock frequency from one run at the base
frequency. Each thread's on-CPU time in each *epoch* (a stretch in which the set of running
threads does not change; synchronization and scheduling events end it) splits into a scaling
part, which takes `r = f_base / f_target` times as long at the target, and a non-scaling part
(N: DRAM-bound time; B: store-queue-full time). Predictors:

* M+CRIT: per thread `(L - N) r + N` over its whole lifetime L, the slowest thread wins.
* COOP: M+CRIT inside each GC and mutator phase, summed.
* DEP / DEP+BURST, per-epoch CTP: sum over epochs of the slowest active thread.
* DEP / DEP+BURST, across-epoch CTP (Algorithm 1): threads keep the lead they gain over the
  critical thread until they sleep, are preempted or exit.

Inputs (`Epochs`) come from the simulator (exact: every compute op's scaling, memory and store
time), from a JSON-lines counter trace, or from a recorded Trace without counters (then only
bounds can be given: this VM has no hardware counters).

JSON-lines counter trace (one JSON object per line, every record with ``"v": 1``; times in
seconds, frequencies in Hz)::

    {"v":1, "kind":"meta", "pid":123, "f_base_hz":4e9, "units":"s"}
    {"v":1, "kind":"thread", "tid":124, "role":"gc", "start":0.0, "end":0.5}      (optional)
    {"v":1, "kind":"epoch", "id":0, "t0":0.0, "t1":0.002, "stall":[124], "phase":"gc",
     "threads":[{"tid":124, "role":"gc", "active":0.002,
                 "N":{"crit":0.0004, "leadload":0.0005, "stall":0.0003}, "B":0.0001}]}

``threads`` lists the threads running in the epoch; ``active`` is their on-CPU time (the epoch
length by construction); ``N`` holds the non-scaling time of any estimator the counters allow
(leading loads from cycles with a demand read outstanding, stalls from cycles stalled on an L3
miss; ``crit`` only from a simulator); ``B`` is the time the store queue was full. ``stall`` lists
the threads that sleep, are preempted or exit at the epoch's end (they lose their lead).
``phase`` ("gc" or "mutator", optional) feeds COOP; ``thread`` records give lifetimes for
M+CRIT (otherwise the first to last epoch a thread ran in). Epochs must be in time order.

Instead of epochs, a file may hold raw events, which `epochize` turns into epochs::

    {"v":1, "kind":"ev", "ts":0.0012, "type":"switch_in", "tid":124,
     "ctr":{"leadload":1.2e6, "stall":8e5, "sqfull":2e5}}

``type`` is switch_in, switch_out, sleep, exit, gc_begin or gc_end; ``ctr`` holds the thread's
cumulative counts in cycles at the base frequency, read at its own switch events.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numba
import numpy as np

from scalestack.errors import TraceFormatError, UserError
from scalestack.results import Result
from scalestack.tools import which
from scalestack.trace import State, Trace

ESTIMATORS = ("crit", "leadload", "stall")  # most to least accurate (spec §1.2)
MODELS = ("M+CRIT", "COOP", "DEP", "DEP+BURST per-epoch", "DEP+BURST")
NO_COUNTERS = ("per-thread non-scaling time is unknown without hardware counters (leading-load or "
               "L3-miss stall cycles, and store-queue-full cycles for BURST)")


@dataclass(frozen=True)
class Epochs:
    """Per-epoch, per-thread inputs as dense (epochs x threads) matrices, times in ns at f_base.

    active: thread ran in the epoch; a_ns: its on-CPU time; n_ns: non-scaling time per estimator;
    b_ns: store-queue-full time; stall: it sleeps/is preempted/exits at the epoch's end;
    gc: epoch lies in a GC phase (COOP); life_ns: (threads x 2) lifetimes for M+CRIT.
    """

    t0_ns: np.ndarray
    t1_ns: np.ndarray
    tids: np.ndarray
    roles: tuple
    active: np.ndarray
    a_ns: np.ndarray
    n_ns: dict
    b_ns: np.ndarray
    stall: np.ndarray
    gc: np.ndarray
    life_ns: np.ndarray
    f_base_ghz: float
    source: str = ""
    has_counters: bool = True

    @property
    def measured_ns(self) -> float:
        return float(self.t1_ns[-1] - self.t0_ns[0]) if len(self.t0_ns) else 0.0

    @property
    def length_ns(self) -> np.ndarray:
        return self.t1_ns - self.t0_ns

    def estimator(self, name: str | None = None) -> str:
        """The estimator to use: `name`, or the most accurate one the inputs have."""
        if name is not None:
            if name not in self.n_ns:
                raise UserError(f"estimator {name!r} is not in these inputs (they have: {', '.join(self.n_ns) or 'none'})")
            return name
        for e in ESTIMATORS:
            if e in self.n_ns:
                return e
        raise UserError(f"no non-scaling estimate in these inputs: {NO_COUNTERS}")

    def window(self, k0: int, k1: int) -> Epochs:
        """Epochs k0..k1-1 (a quantum); lifetimes clipped to them; the last keeps its stall set."""
        sl = slice(k0, k1)
        lo, hi = self.t0_ns[k0], self.t1_ns[k1 - 1]
        return dataclasses.replace(
            self, t0_ns=self.t0_ns[sl], t1_ns=self.t1_ns[sl], active=self.active[sl], a_ns=self.a_ns[sl],
            n_ns={k: v[sl] for k, v in self.n_ns.items()}, b_ns=self.b_ns[sl], stall=self.stall[sl],
            gc=self.gc[sl], life_ns=np.clip(self.life_ns, lo, hi))


# ---------------------------------------------------------------------------------------------
# Building epochs


def _running(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    st = trace.states
    m = st.state == State.RUNNING
    return trace.thread_index(st.tid[m]), st.start_ns[m].astype(np.int64), st.end_ns[m].astype(np.int64)


def _epoch_grid(trace: Trace, cuts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Epoch bounds and the (epochs x threads) running matrix of a trace."""
    j, s, e = _running(trace)
    return _grid(j, s, e, len(trace.threads), int(trace.start_ns), int(trace.end_ns), cuts)


def _grid(j: np.ndarray, s: np.ndarray, e: np.ndarray, nt: int, t_lo, t_hi, cuts=None):
    """Epochs from running intervals (thread column j, [s, e)): a new epoch at every change of
    the running set (and at `cuts`, e.g. quantum ends); zero-length epochs do not exist."""
    b = np.unique(np.concatenate([s, e, [t_lo, t_hi], [] if cuts is None else np.asarray(cuts, s.dtype)]))
    b = b[(b >= t_lo) & (b <= t_hi)]
    k0, k1 = np.searchsorted(b, s), np.searchsorted(b, e)
    diff = np.zeros((len(b), nt), dtype=np.int64)
    np.add.at(diff, (k0, j), 1)
    np.add.at(diff, (k1, j), -1)
    act = np.cumsum(diff, axis=0)[:-1] > 0
    # merge neighbours with the same running set unless a cut separates them
    keep = np.ones(len(act), dtype=bool)
    keep[1:] = np.any(act[1:] != act[:-1], axis=1)
    if cuts is not None and len(act):
        keep[np.isin(b[:-1], np.asarray(cuts, b.dtype))] = True
    idx = np.flatnonzero(keep)
    t0 = b[:-1][idx]
    t1 = np.append(t0[1:], b[-1])
    return t0, t1, act[idx]


def _stall(active: np.ndarray) -> np.ndarray:
    st = np.zeros_like(active)
    st[:-1] = active[:-1] & ~active[1:]
    st[-1:] = active[-1:]
    return st


def _gc_flags(active: np.ndarray, roles) -> np.ndarray:
    gcm = np.array([r == "gc" for r in roles], dtype=bool)
    return np.any(active[:, gcm], axis=1) if gcm.any() else np.zeros(len(active), dtype=bool)


def from_trace(trace: Trace, f_base_ghz: float, cuts: np.ndarray | None = None) -> Epochs:
    """Epochs of a recorded trace without counters: N and B unknown (has_counters False)."""
    t0, t1, act = _epoch_grid(trace, cuts)
    a = np.where(act, (t1 - t0)[:, None], 0).astype(np.float64)
    roles = tuple(str(r) for r in trace.threads.role)
    life = np.stack([trace.threads.start_ns, trace.threads.end_ns], axis=1).astype(np.float64)
    return Epochs(t0.astype(np.float64), t1.astype(np.float64), trace.threads.tid.astype(np.int64), roles, act, a,
                  {}, np.zeros_like(a), _stall(act), _gc_flags(act, roles), life, float(f_base_ghz),
                  "trace", has_counters=False)


def _cumulative(bounds: np.ndarray, x0: np.ndarray, x1: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Time spent inside the intervals [x0, x1) up to each bound (intervals disjoint, sorted);
    with `w`, interval i contributes w[i] spread evenly over it instead of its length."""
    if len(x0) == 0:
        return np.zeros(len(bounds))
    xp = np.stack([x0, x1], axis=1).ravel().astype(np.float64)
    yp = np.stack([np.zeros(len(x0)), (x1 - x0) if w is None else w], axis=1).ravel().cumsum()
    return np.interp(bounds, xp, yp, left=0.0, right=yp[-1])


def from_sim(sim, f_base_ghz: float | None = None, cuts: np.ndarray | None = None) -> Epochs:
    """Exact epochs of a simulated run (`scalestack.sim.engine.SimResult`): N = memory, B = store time.

    Each compute op runs its scaling part first, then memory, then the store burst, so the split
    of an epoch is exact. Running time outside compute ops (spinning) counts as scaling.
    """
    tr = sim.trace
    f = float(f_base_ghz if f_base_ghz is not None else tr.meta["frequencies"][0])
    ep = from_trace(tr, f, cuts)
    seg = sim.truth["segments"]
    bounds = np.append(ep.t0_ns, ep.t1_ns[-1:]) if len(ep.t0_ns) else np.zeros(1)
    n = np.zeros_like(ep.a_ns)
    b = np.zeros_like(ep.a_ns)
    for j, tid in enumerate(ep.tids):
        p = seg[seg[:, 0] == tid]
        p = p[np.argsort(p[:, 1], kind="stable")]
        m0 = p[:, 1] + p[:, 3]
        s0 = m0 + p[:, 4]
        n[:, j] = np.diff(_cumulative(bounds, m0, s0))
        b[:, j] = np.diff(_cumulative(bounds, s0, s0 + p[:, 5]))
    return dataclasses.replace(ep, n_ns={"crit": n * ep.active}, b_ns=b * ep.active, source="sim", has_counters=True)


def read_jsonl(path: str) -> Epochs:
    """Read a JSON-lines counter trace (format in the module docstring)."""
    meta, threads, epochs, events = None, {}, [], []
    try:
        fh = open(path)
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None
    with fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                kind = rec["kind"]
                if rec.get("v", 1) != 1:
                    raise ValueError(f"version {rec.get('v')} (this reader knows 1)")
                if kind == "meta":
                    meta = rec
                elif kind == "thread":
                    threads[int(rec["tid"])] = rec
                elif kind == "ev":
                    events.append((float(rec["ts"]), str(rec["type"]), int(rec["tid"]), rec.get("ctr"), no))
                elif kind == "epoch":
                    epochs.append((float(rec["t0"]), float(rec["t1"]), [int(t) for t in rec.get("stall", [])],
                                   rec.get("phase"), [(int(t["tid"]), t.get("role", "app"), float(t["active"]),
                                                       {k: float(v) for k, v in t.get("N", {}).items()},
                                                       float(t.get("B", 0.0))) for t in rec["threads"]]))
            except (ValueError, KeyError, TypeError) as e:
                raise TraceFormatError(f"{path}:{no}: not a counter-trace record ({e})") from None
    if meta is None or "f_base_hz" not in meta:
        raise TraceFormatError(f"{path}: no meta record with f_base_hz")
    if not epochs and events and meta is not None and "f_base_hz" in meta:
        return epochize(events, float(meta["f_base_hz"]) / 1e9, threads, path)
    if not epochs:
        raise TraceFormatError(f"{path}: no epoch records")
    if any(e[0] > e[1] for e in epochs) or any(a[1] > b[0] + 1e-12 for a, b in zip(epochs, epochs[1:], strict=False)):
        raise TraceFormatError(f"{path}: epochs must be in time order with t0 <= t1")
    roles: dict[int, str] = {t: r.get("role", "app") for t, r in threads.items()}
    for e in epochs:
        for t in e[4]:
            roles.setdefault(t[0], t[1])
    for e in epochs:
        roles.update({t: roles.get(t, "app") for t in e[2]})
    tids = np.array(sorted(roles), dtype=np.int64)
    col = {int(t): j for j, t in enumerate(tids)}
    K, T = len(epochs), len(tids)
    act = np.zeros((K, T), dtype=bool)
    stall = np.zeros((K, T), dtype=bool)
    a = np.zeros((K, T))
    b = np.zeros((K, T))
    est = sorted({k for e in epochs for t in e[4] for k in t[3]} & set(ESTIMATORS), key=ESTIMATORS.index)
    n = {k: np.zeros((K, T)) for k in est}
    gc = np.zeros(K, dtype=bool)
    for k, (_, _, st, ph, ths) in enumerate(epochs):
        gc[k] = ph == "gc"
        for t in st:
            stall[k, col[t]] = True
        for tid, _, av, nv, bv in ths:
            j = col[tid]
            act[k, j], a[k, j], b[k, j] = True, av * 1e9, bv * 1e9
            for key in est:
                if key not in nv:
                    raise TraceFormatError(f"{path}: epoch {k} thread {tid} lacks N.{key} (others have it)")
                n[key][k, j] = nv[key] * 1e9
    t0 = np.array([e[0] for e in epochs]) * 1e9
    t1 = np.array([e[1] for e in epochs]) * 1e9
    life = np.zeros((T, 2))
    for j, tid in enumerate(tids):
        rows = np.flatnonzero(act[:, j])
        lo, hi = (t0[rows[0]], t1[rows[-1]]) if len(rows) else (t0[0], t0[0])
        r = threads.get(int(tid))
        life[j] = (float(r["start"]) * 1e9, float(r["end"]) * 1e9) if r and "start" in r else (lo, hi)
    if all(e[3] is None for e in epochs):  # no phase markers: GC epochs are those a gc thread runs in
        gc = _gc_flags(act, [roles[int(t)] for t in tids])
    return Epochs(t0, t1, tids, tuple(roles[int(t)] for t in tids), act, a, n, b, stall, gc, life,
                  float(meta["f_base_hz"]) / 1e9, "jsonl", has_counters=bool(est))


COUNTERS = {"leadload": "leadload", "stall": "stall", "sqfull": "B"}  # ev counter -> estimator


def epochize(events: list, f_base_ghz: float, threads: dict | None = None, path: str = "events") -> Epochs:
    """Epochs from raw events (ts s, type, tid, ctr, line) sorted by time (spec §2.2).

    A thread runs from `switch_in` to its next `switch_out`, `sleep` or `exit`. `ctr` holds the
    thread's cumulative counters in cycles at base frequency (`leadload`, `stall`, `sqfull`);
    each running stretch's counter deltas are spread over the epochs inside it in proportion to
    time. `gc_begin` / `gc_end` mark GC phases for COOP.
    """
    threads = threads or {}
    events = sorted(events, key=lambda x: x[0])
    tids = sorted({e[2] for e in events if e[1] not in ("gc_begin", "gc_end")})
    col = {t: j for j, t in enumerate(tids)}
    open_: dict[int, tuple] = {}
    runs: list[tuple] = []
    gc_on, gc_spans = None, []
    for ts, typ, tid, ctr, no in events:
        if typ == "gc_begin":
            gc_on = ts
        elif typ == "gc_end" and gc_on is not None:
            gc_spans.append((gc_on, ts))
            gc_on = None
        elif typ == "switch_in":
            open_[tid] = (ts, ctr or {}, no)
        elif typ in ("switch_out", "sleep", "exit") and tid in open_:
            t0, c0, no0 = open_.pop(tid)
            c1 = ctr or {}
            keys = set(c0) & set(c1) & set(COUNTERS)
            if set(c0) & set(COUNTERS) != set(c1) & set(COUNTERS):
                raise TraceFormatError(f"{path}:{no}: counters {sorted(set(c1))} differ from line {no0}'s")
            runs.append((col[tid], t0 * 1e9, ts * 1e9, {k: (float(c1[k]) - float(c0[k])) / f_base_ghz for k in keys}))
    if not runs:
        raise TraceFormatError(f"{path}: no running stretch (switch_in followed by switch_out/sleep/exit)")
    ctr_keys = set(runs[0][3])
    if any(set(r[3]) != ctr_keys for r in runs):
        raise TraceFormatError(f"{path}: some running stretches lack counters the others have")
    j = np.array([r[0] for r in runs], dtype=np.int64)
    s = np.array([r[1] for r in runs])
    e = np.array([r[2] for r in runs])
    t0, t1, act = _grid(j, s, e, len(tids), float(s.min()), float(e.max()))
    bounds = np.append(t0, t1[-1:])
    a = np.where(act, (t1 - t0)[:, None], 0.0)
    vals = {COUNTERS[k]: np.zeros_like(a) for k in ctr_keys}
    for jj in range(len(tids)):
        m = np.flatnonzero(j == jj)
        m = m[np.argsort(s[m])]
        for k in ctr_keys:
            w = np.array([runs[i][3][k] for i in m])
            vals[COUNTERS[k]][:, jj] = np.diff(_cumulative(bounds, s[m], e[m], w))
    b = vals.pop("B", np.zeros_like(a))
    roles = tuple(threads.get(t, {}).get("role", "app") for t in tids)
    mid = (t0 + t1) / 2
    gc = np.zeros(len(t0), dtype=bool)
    for g0, g1 in gc_spans:
        gc |= (mid >= g0 * 1e9) & (mid < g1 * 1e9)
    if not gc_spans:
        gc = _gc_flags(act, roles)
    life = np.array([[s[j == jj].min(), e[j == jj].max()] for jj in range(len(tids))])
    for jj, t in enumerate(tids):
        if t in threads and "start" in threads[t]:
            life[jj] = (float(threads[t]["start"]) * 1e9, float(threads[t]["end"]) * 1e9)
    return Epochs(t0, t1, np.array(tids, dtype=np.int64), roles, act, a, vals, b, _stall(act), gc, life,
                  f_base_ghz, "events", has_counters=bool(vals))


def write_jsonl(ep: Epochs, path: str, pid: int = 0) -> None:
    """Write epochs as a JSON-lines counter trace (the format `read_jsonl` reads)."""
    from scalestack.fileio import atomic_write

    lines = [{"v": 1, "kind": "meta", "pid": pid, "f_base_hz": ep.f_base_ghz * 1e9, "units": "s"}]
    for j, tid in enumerate(ep.tids):
        lines.append({"v": 1, "kind": "thread", "tid": int(tid), "role": ep.roles[j],
                      "start": ep.life_ns[j, 0] / 1e9, "end": ep.life_ns[j, 1] / 1e9})
    for k in range(len(ep.t0_ns)):
        js = np.flatnonzero(ep.active[k])
        lines.append({"v": 1, "kind": "epoch", "id": k, "t0": ep.t0_ns[k] / 1e9, "t1": ep.t1_ns[k] / 1e9,
                      "stall": [int(ep.tids[j]) for j in np.flatnonzero(ep.stall[k])],
                      "phase": "gc" if ep.gc[k] else "mutator",
                      "threads": [{"tid": int(ep.tids[j]), "role": ep.roles[j], "active": ep.a_ns[k, j] / 1e9,
                                   "N": {key: v[k, j] / 1e9 for key, v in ep.n_ns.items()},
                                   "B": ep.b_ns[k, j] / 1e9} for j in js]})
    atomic_write(path, "".join(json.dumps(x) + "\n" for x in lines).encode())


# ---------------------------------------------------------------------------------------------
# Predictors


def alpha(ep: Epochs, r: float, burst: bool, estimator: str | None = None) -> np.ndarray:
    """Per-thread, per-epoch time at the target (0 where not active): (A - N - B) r + N + B."""
    n = ep.n_ns[ep.estimator(estimator)] if ep.has_counters else np.zeros_like(ep.a_ns)
    fixed = np.minimum(n + (ep.b_ns if burst else 0.0), ep.a_ns)
    return np.where(ep.active, ep.a_ns + (ep.a_ns - fixed) * (r - 1.0), 0.0)  # exactly A when r = 1


@numba.njit(cache=True)
def _across(al, active, stall, idle, clamp, delta0):
    """Algorithm 1: epoch lengths at the target, the critical thread of each (-1: idle) and
    every thread's lead after each epoch."""
    K, T = al.shape
    delta = delta0.copy()
    after = np.zeros((K, T))
    out = np.empty(K)
    crit = np.full(K, -1, np.int64)
    for k in range(K):
        best = -np.inf
        for t in range(T):
            if active[k, t]:
                e = al[k, t] - delta[t]
                if e > best:
                    best = e
                    crit[k] = t
        if crit[k] < 0:
            out[k] = idle[k]
            after[k] = delta
            continue
        if clamp and best < 0.0:
            best = 0.0
        out[k] = best
        for t in range(T):
            if active[k, t]:
                delta[t] += best - al[k, t]
            if stall[k, t]:
                delta[t] = 0.0
        after[k] = delta
    return out, crit, after


def dep(ep: Epochs, f_target_ghz: float, *, burst: bool = True, across: bool = True, clamp: bool = False,
        estimator: str | None = None, leads0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """DEP(+BURST) epoch lengths at the target (ns) and each epoch's critical thread column.

    Epochs where no thread runs (every thread sleeps on a timer or I/O) keep their length.
    leads0: the threads' leads (delta) carried in from earlier epochs (default 0).
    """
    r = ep.f_base_ghz / f_target_ghz
    al = alpha(ep, r, burst, estimator)
    idle = ep.length_ns.astype(np.float64)
    if across:
        d0 = np.zeros(al.shape[1]) if leads0 is None else np.asarray(leads0, np.float64)
        return _across(al, ep.active, ep.stall, idle, clamp, d0)[:2]
    crit = np.where(ep.active.any(axis=1), np.argmax(np.where(ep.active, al, -np.inf), axis=1), -1)
    return np.where(crit >= 0, al.max(axis=1, initial=0.0), idle), crit


def leads(ep: Epochs, f_target_ghz: float, *, burst: bool = True, clamp: bool = False,
          estimator: str | None = None, leads0: np.ndarray | None = None) -> np.ndarray:
    """Algorithm 1's lead counters (delta, ns) of every thread after each epoch."""
    al = alpha(ep, ep.f_base_ghz / f_target_ghz, burst, estimator)
    d0 = np.zeros(al.shape[1]) if leads0 is None else np.asarray(leads0, np.float64)
    return _across(al, ep.active, ep.stall, ep.length_ns.astype(np.float64), clamp, d0)[2]


def mcrit(ep: Epochs, f_target_ghz: float, estimator: str | None = None, ran_only: bool = False) -> float:
    """M+CRIT: max over threads of (L - N) r + N over the whole window (blocked time scales).

    ran_only: consider only threads that ran in the window (COOP's phases).
    """
    if len(ep.t0_ns) == 0:
        return 0.0
    r = ep.f_base_ghz / f_target_ghz
    n = ep.n_ns[ep.estimator(estimator)].sum(axis=0) if ep.has_counters else np.zeros(len(ep.tids))
    lo, hi = ep.t0_ns[0], ep.t1_ns[-1]
    life = np.clip(ep.life_ns, lo, hi)
    L = life[:, 1] - life[:, 0]
    alive = (L > 0) & (ep.active.any(axis=0) if ran_only else True)
    if not alive.any():
        return float(hi - lo)
    return float(np.max((L + (L - n) * (r - 1.0))[alive]))


def coop(ep: Epochs, f_target_ghz: float, estimator: str | None = None) -> float:
    """COOP: M+CRIT inside each run of GC and of mutator epochs, summed.

    [impl] Inside a phase only the threads that ran in it compete (a mutator blocked for a whole
    GC pause cannot be its critical thread; the main thread waiting in join never competes).
    """
    if len(ep.gc) == 0:
        return 0.0
    starts = np.flatnonzero(np.r_[True, ep.gc[1:] != ep.gc[:-1]])
    ends = np.r_[starts[1:], len(ep.gc)]
    return float(sum(mcrit(ep.window(a, b), f_target_ghz, estimator, True) for a, b in zip(starts, ends, strict=True)))


@dataclass(frozen=True)
class DvfsResult(Result):
    """Predicted run time at `f_target_ghz` from a run at `f_base_ghz`, per model.

    predicted_ns: {model: ns}; true_ns: the simulator's time at the target when known;
    critical_path: (tid, base start ns, base end ns, predicted start ns, predicted end ns) runs of
    the across-epoch DEP+BURST critical thread; unavailable: why models could not be computed.
    """

    f_base_ghz: float
    f_target_ghz: float
    measured_ns: float
    predicted_ns: dict
    estimator: str
    epochs: int
    critical_path: list
    true_ns: float | None = None
    unavailable: str = ""

    kind = "dvfs"

    def rows(self) -> list[dict]:
        out = []
        for m, v in self.predicted_ns.items():
            row = {"model": m, "predicted_ns": v, "change_pct": 100 * (v / self.measured_ns - 1)}
            if self.true_ns:
                row["error_pct"] = 100 * (v - self.true_ns) / self.true_ns
            out.append(row)
        return out


def critical_path(ep: Epochs, lengths: np.ndarray, crit: np.ndarray) -> list[tuple]:
    """Runs of consecutive epochs with the same critical thread, with base and predicted times."""
    if len(crit) == 0:
        return []
    pend = np.cumsum(lengths)
    pstart = pend - lengths
    cut = np.flatnonzero(np.r_[True, crit[1:] != crit[:-1]])
    last = np.r_[cut[1:], len(crit)] - 1
    return [(int(ep.tids[crit[a]]) if crit[a] >= 0 else -1, float(ep.t0_ns[a]), float(ep.t1_ns[b]),
             float(pstart[a]), float(pend[b])) for a, b in zip(cut, last, strict=True)]


def predict(ep: Epochs, f_target_ghz: float, *, clamp: bool = False, estimator: str | None = None,
            true_ns: float | None = None) -> DvfsResult:
    """Every model's prediction at `f_target_ghz`; without counters only the two bounds."""
    if not ep.has_counters:
        al, crit = dep(ep, f_target_ghz, burst=False, clamp=clamp)
        pred = {"all on-CPU time scales": float(al.sum()), "nothing scales": ep.measured_ns}
        return DvfsResult(ep.f_base_ghz, f_target_ghz, ep.measured_ns, pred, "none", len(ep.t0_ns),
                          critical_path(ep, al, crit), true_ns,
                          "M+CRIT, COOP, DEP and DEP+BURST are impossible: " + NO_COUNTERS)
    est = ep.estimator(estimator)
    pred = {"M+CRIT": mcrit(ep, f_target_ghz, est), "COOP": coop(ep, f_target_ghz, est)}
    pred["DEP"] = float(dep(ep, f_target_ghz, burst=False, clamp=clamp, estimator=est)[0].sum())
    pred["DEP+BURST per-epoch"] = float(dep(ep, f_target_ghz, across=False, estimator=est)[0].sum())
    lengths, crit = dep(ep, f_target_ghz, clamp=clamp, estimator=est)
    pred["DEP+BURST"] = float(lengths.sum())
    return DvfsResult(ep.f_base_ghz, f_target_ghz, ep.measured_ns, pred, est, len(ep.t0_ns),
                      critical_path(ep, lengths, crit), true_ns)


def counter_support() -> str | None:
    """None when `perf stat` can count cycles here (a PMU is exposed), else why not, in words."""
    import subprocess

    if which("perf") is None:
        return "perf is not installed"
    try:
        p = subprocess.run(["perf", "stat", "-x,", "-e", "cycles,instructions", "--", "true"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf stat failed ({e})"
    if "<not supported>" in p.stderr or "<not counted>" in p.stderr or p.returncode != 0:
        return "perf stat -e cycles says <not supported>, e.g. a VM without a virtual PMU"
    return None
