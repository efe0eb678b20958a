"""Serial windows and who counts as a worker: the inputs of speedup stacks for native programs.

A *serial window* is a span of the run in which at most one of the program's working threads is
active (RUNNING or RUNNABLE: a thread waiting for a CPU wants to work, so a parallel span stretched
by another process is not mistaken for a serial one) and no GC thread is: whichever thread it is,
the other N−1 slots of an N-thread run wait. Spans with no active thread at all (the whole program
waits for a disk, a pipe or a timer) count too: they do not shrink with N either. A span whose one
active thread is RUNNABLE is a *contention window* instead: the others wait for a thread that other
processes keep off the cores (measured on a shared 2-core machine: 8-12 ms each, a fifth of a run),
which is CPU contention, not serial code. The count of active threads is a sweep line over the
sorted interval endpoints (NumPy cumsum), and the overlap of any interval [a, b) with the windows
is G(b) − G(a), G the cumulative window time.

Threads are sorted into three kinds (`classify_threads`), among the *candidates* (roles main and
app, of the process that is active the longest; GC, JIT and runtime threads are never workers):

* a **driver**: works alone or not at all (≤ 25% of its RUNNING time beside another active
  candidate; waiting for a CPU is not work) and waits (blocked) through at least half of the
  others' activity in its life, with at least one worker beside it. The one with the most time
  alone is the driver: Jikes' MainThread, the thread that runs a JVM's main() (found by this
  behaviour, not by its name: HotSpot's launcher thread, which holds the `main` role and only
  waits, has little time alone), a pthread program's main that only spawns and joins.
* a **coordinator**: mostly waits while others work: active beside them < 25% of the time they are
  active in its life, and RUNNING beside them < 25% of the busiest candidate's RUNNING time (its
  serial work of its own does not count): xz's main thread at -T2, an I/O feeder, the JVM launcher.
  Given the thread count the run asked for, only the surplus over that many workers is demoted, the
  least active first, so a worker with a small share of skewed work between barriers stays one.
  Shown on its own line; its waits are not SYNC and it is not one of the N slots.
* a **worker**: every other candidate. The per-thread terms (SYNC, IMB, CONT) sum over workers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from scalestack.trace import State, Trace

CANDIDATE_ROLES = ("main", "app")
ACTIVE_STATES = (int(State.RUNNING), int(State.RUNNABLE))
DRIVER_PARALLEL_MAX = 0.25  # a driver's RUNNING time beside other candidates, at most this share of its RUNNING time
DRIVER_WAIT_MIN = 0.50  # ... and it waits through at least this share of the others' activity in its life
COORDINATOR_MAX = 0.25  # a coordinator is active less than this share of the time others are active in its life


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Sweep line of the active candidate (and GC) threads over [t0, t1].

    u: sorted breakpoints; on [u[k], u[k+1]) `r[k]` candidates are active (RUNNING or RUNNABLE),
    `run[k]` of them RUNNING, and `g[k]` GC threads active. Cumulative times before u[k]:
    serial_cum (serial windows: r ≤ 1, no GC, and the lone thread, if any, RUNNING), cont_cum
    (contention windows: the lone active thread waits for a CPU: the others wait for a thread that
    other processes keep off the cores, a loss of CPU contention, not of serial code), solo_cum
    (r == 1), busy_cum (r ≥ 1), gcwin_cum (no candidate, ≥ 1 GC thread: a stop-the-world window).
    """

    u: np.ndarray
    r: np.ndarray
    run: np.ndarray
    g: np.ndarray
    serial_cum: np.ndarray
    cont_cum: np.ndarray
    solo_cum: np.ndarray
    busy_cum: np.ndarray
    gcwin_cum: np.ndarray

    def _in(self, cum: np.ndarray, a, b) -> np.ndarray:
        lo, hi = float(self.u[0]), float(self.u[-1])
        a = np.clip(np.asarray(a, dtype=np.float64), lo, hi)
        b = np.clip(np.asarray(b, dtype=np.float64), lo, hi)
        return np.interp(b, self.u, cum) - np.interp(a, self.u, cum)

    def serial_in(self, a, b) -> np.ndarray:
        """Serial-window time inside each [a, b)."""
        return self._in(self.serial_cum, a, b)

    def cont_in(self, a, b) -> np.ndarray:
        """Contention-window time inside each [a, b)."""
        return self._in(self.cont_cum, a, b)

    def solo_in(self, a, b) -> np.ndarray:
        """Time with exactly one candidate active inside each [a, b)."""
        return self._in(self.solo_cum, a, b)

    def busy_in(self, a, b) -> np.ndarray:
        """Time with at least one candidate active inside each [a, b)."""
        return self._in(self.busy_cum, a, b)

    def excluded_in(self, a, b) -> np.ndarray:
        """Serial, contention and stop-the-world GC window time inside each [a, b) (disjoint windows)."""
        return self.serial_in(a, b) + self.cont_in(a, b) + self._in(self.gcwin_cum, a, b)

    @property
    def serial_ns(self) -> float:
        return float(self.serial_cum[-1])

    @property
    def cont_ns(self) -> float:
        return float(self.cont_cum[-1])

    def serial_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """The serial windows as merged [start, end) arrays."""
        m = _serial_mask(self.r[:-1], self.run[:-1], self.g[:-1]) & (np.diff(self.u) > 0)
        if not np.any(m):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        edge = np.diff(np.concatenate([[0], m.astype(np.int8), [0]]))
        return self.u[:-1][edge[:-1] == 1], self.u[1:][edge[1:] == -1]


def _serial_mask(r, run, g):
    return (g == 0) & ((r == 0) | ((r == 1) & (run == 1)))


def _active(trace: Trace, rows_mask: np.ndarray, states=ACTIVE_STATES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thread row, start, end) of the intervals of the threads in rows_mask in one of `states`."""
    st = trace.states
    if len(st) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = trace.thread_index(st.tid)
    m = np.isin(st.state, states) & rows_mask[rows] & (st.end_ns > st.start_ns)
    return rows[m], st.start_ns[m], st.end_ns[m]


def sweep(trace: Trace, candidates: np.ndarray, gc: np.ndarray | None = None) -> Sweep:
    """The sweep line of `candidates` (bool per thread row) and `gc` threads over the trace window."""
    t0, t1 = int(trace.start_ns), int(trace.end_ns)
    gc = np.zeros(len(trace.threads), bool) if gc is None else gc
    parts = [_active(trace, candidates), _active(trace, candidates, (int(State.RUNNING),)), _active(trace, gc)]
    ts, ds = [np.array([t0, t1], dtype=np.int64)], [np.zeros((2, 3), dtype=np.int64)]
    for col, (_, a, b) in enumerate(parts):
        a, b = np.clip(a, t0, t1), np.clip(b, t0, t1)
        d = np.zeros((2 * len(a), 3), dtype=np.int64)
        d[: len(a), col], d[len(a):, col] = 1, -1
        ts.append(np.concatenate([a, b]))
        ds.append(d)
    t, d = np.concatenate(ts), np.concatenate(ds)
    order = np.argsort(t, kind="stable")
    u = t[order]
    c = np.cumsum(d[order], axis=0)
    r, run, g = c[:, 0], c[:, 1], c[:, 2]
    dt = np.diff(u)
    rk, runk, gk = r[:-1], run[:-1], g[:-1]

    def cum(mask):
        out = np.zeros(len(u), dtype=np.float64)
        np.cumsum(dt * mask, out=out[1:])
        return out

    return Sweep(u, r, run, g, cum(_serial_mask(rk, runk, gk)), cum((rk == 1) & (runk == 0) & (gk == 0)),
                 cum(rk == 1), cum(rk >= 1), cum((rk == 0) & (gk > 0)))


@dataclasses.dataclass(frozen=True)
class ThreadKinds:
    """Per thread row: 'driver', 'coordinator', 'worker' or '' (not a candidate), and the figures
    the rule used (ns): active, alone (active in a serial window), others (others active in its life)."""

    kind: np.ndarray
    active_ns: np.ndarray
    alone_ns: np.ndarray
    others_ns: np.ndarray
    sweep: Sweep

    @property
    def workers(self) -> np.ndarray:
        return self.kind == "worker"

    @property
    def driver(self) -> int | None:
        hit = np.flatnonzero(self.kind == "driver")
        return int(hit[0]) if hit.size else None

    def lines(self, trace: Trace) -> list[dict]:
        """One line per driver or coordinator: who it is and how it spent the run."""
        wall = max(trace.wall_ns, 1)
        out = []
        for i in np.flatnonzero((self.kind == "driver") | (self.kind == "coordinator")):
            out.append({"tid": int(trace.threads.tid[i]), "name": str(trace.threads.name[i]), "kind": str(self.kind[i]),
                        "active_pct": 100 * float(self.active_ns[i]) / wall,
                        "alone_pct": 100 * float(self.alone_ns[i]) / wall,
                        "waits_while_others_work_pct": 100 * float(self.others_ns[i] - (self.active_ns[i]
                                                                                      - self.alone_ns[i])) / wall})
        return out


def program_threads(trace: Trace) -> np.ndarray:
    """The candidate threads (bool per thread row): roles main and app, of the process that is active
    the longest. A shell or launcher process around the program (``sh -c "xz … > out"``) only waits
    for it: its thread is not one of the program's, neither a worker nor a serial part."""
    th = trace.threads
    cand = np.isin(np.asarray(th.role, dtype=object), CANDIDATE_ROLES)
    pids = np.asarray(th.pid)
    if len(np.unique(pids[cand])) <= 1:
        return cand
    rows, a, b = _active(trace, cand)
    per = np.bincount(rows, weights=(b - a).astype(np.float64), minlength=len(th))
    upids, inv = np.unique(pids, return_inverse=True)
    by_pid = np.bincount(inv, weights=per, minlength=len(upids))
    return cand & (pids == upids[np.argmax(by_pid)])


def classify_threads(trace: Trace, slots: int | None = None, drivers: bool = True) -> ThreadKinds:
    """Drivers, coordinators and workers among the candidate threads (module docstring).

    slots: the thread count the run was asked for (the sweep's N), when known. Candidates that meet
    the coordinator rule are then demoted only while more than `slots` working threads remain, the
    least active beside others first: a worker with a small share of skewed work between barriers
    waits while the others work just as a coordinator does, but it is one of the N the run asked for.
    """
    roles = np.asarray(trace.threads.role, dtype=object)
    cand = program_threads(trace)
    sw = sweep(trace, cand, np.asarray(roles == "gc", dtype=bool))
    n = len(trace.threads)
    rows, a, b = _active(trace, cand)
    a = np.clip(a, trace.start_ns, trace.end_ns)
    b = np.clip(b, trace.start_ns, trace.end_ns)
    active = np.bincount(rows, weights=(b - a).astype(np.float64), minlength=n)
    # where one candidate is active, an active candidate is that one: its overlap is its time alone
    alone = np.bincount(rows, weights=sw.solo_in(a, b), minlength=n)
    # G(t) of "r >= 1" counts the thread itself too: others were active in its life for busy - alone
    others = sw.busy_in(trace.threads.start_ns, trace.threads.end_ns) - alone
    # working beside another active candidate: RUNNING (a main thread that waits for a CPU after its
    # pthread_create on a loaded machine is not working beside its workers) while r >= 2
    rrows, ra, rb = _active(trace, cand, (int(State.RUNNING),))
    ra, rb = np.clip(ra, trace.start_ns, trace.end_ns), np.clip(rb, trace.start_ns, trace.end_ns)
    running = np.bincount(rrows, weights=(rb - ra).astype(np.float64), minlength=n)
    beside = running - np.bincount(rrows, weights=sw.solo_in(ra, rb), minlength=n)
    # and not waiting (blocked) while others are active: RUNNABLE beside them is wanting to work
    beside_act = active - alone
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(others > 0, beside_act / np.where(others > 0, others, 1), np.inf)
    # ... and far less active beside others than the busiest candidate: a worker with a small share of skewed work
    # between barriers also waits while others work, but does a fair part of the typical work
    typical = float(running[cand].max()) if np.any(cand) else 0.0
    coord = cand & (share < COORDINATOR_MAX) & (beside < COORDINATOR_MAX * typical)

    def kinds(driver: int | None) -> np.ndarray:
        k = np.where(cand, "worker", "").astype(object)
        if driver is not None:
            k[driver] = "driver"
        pool = np.flatnonzero(coord & (k == "worker"))
        if slots is not None:  # keep the N working threads the run asked for
            spare = int(np.sum(k == "worker")) - int(slots)
            pool = pool[np.argsort(beside[pool], kind="stable")][:max(spare, 0)]
        if len(pool) < int(np.sum(k == "worker")):  # never every worker
            k[pool] = "coordinator"
        return k

    if drivers:
        drv = cand & (beside <= DRIVER_PARALLEL_MAX * running) & (beside_act <= (1 - DRIVER_WAIT_MIN) * others) \
            & (others > 0)
        if np.any(drv):
            k = kinds(int(np.flatnonzero(drv)[np.argmax(alone[drv])]))
            if np.any(k == "worker"):
                return ThreadKinds(k, active, alone, others, sw)
    return ThreadKinds(kinds(None), active, alone, others, sw)
