"""Deterministic discrete-event simulator of a multi-threaded program (ground truth for what-if).

A workload is a dict::

    {"name": "fig32", "threads": [
        {"name": "main", "role": "main", "start": true,
         "ops": [["compute", 3000, 0, 0], ["lock", 0], ["compute", 1000], ["unlock", 0],
                 ["barrier", 0, 4], ["spawn", 1], ["join", 1], ["sleep", 500]]},
        ...],
     "mutex_policy": {"0": "unfair"}}

Ops: ``compute CYCLES [MEM_NS [STORE_NS]]`` takes CYCLES/f ns (f in GHz, the thread's
frequency) plus the non-scaling memory and store-burst time; ``lock M`` / ``unlock M`` (FIFO
hand-off, or LIFO hand-off for "unfair" mutexes: the last waiter barges in; ``lock M SPIN_NS``
spins on its core, RUNNING in the trace and "spinning" in the truth, for up to SPIN_NS first); ``barrier B N
[SPIN_NS]`` (the same spin-then-block wait, as libgomp's active wait policy does at a barrier);
``put Q CAP`` / ``get Q`` on a bounded
FIFO queue (a producer blocks while Q holds CAP items, a consumer while it is empty; a waiting
consumer is handed the item directly); ``spawn T`` (thread index T starts); ``join T``; ``sleep NS``. Threads with ``start`` true run
at time 0. Threads beyond the core count wait RUNNABLE in a FIFO run queue; without `timeslice_ns` a
thread keeps its core until it blocks, with it the one that ran that long goes to the back (round robin).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalestack.trace import State, Trace, make_trace

ADDR_BASE = {"lock": 0x1000, "barrier": 0x2000, "join": 0x3000, "queue": 0x4000}
TID_BASE = 1000


@dataclass(frozen=True)
class SimResult:
    """Trace as a recording would give it, plus ground truth.

    truth: dict with ``runtime_ns``, per-thread ``compute_ns``/``memory_ns``/``store_ns`` and
    ``waits``: list of (tid, start_ns, end_ns, reason, culprit_tid).
    ``segments``: int64 rows (tid, start_ns, end_ns, scaling_ns, memory_ns, store_ns), one per
    stretch of a compute op on a core, scaling part first (exact DVFS inputs).
    """

    trace: Trace
    truth: dict
    events: int

    @property
    def runtime_ns(self) -> int:
        return int(self.truth["runtime_ns"])


class Policy:
    """Frequency policy hook (thesis Ch. 7 boosting): called every `period_ns` of simulated time.

    `decide(now_ns, criticality_ns, freq_ghz)` gets the running criticality counters (thesis
    §4.2.2 online algorithm, ns, per thread index) and the current frequencies; it returns
    {thread index: GHz} for the threads to change, or None.
    """

    period_ns: int = 10_000_000

    def decide(self, now_ns: int, criticality_ns: np.ndarray, freq_ghz: list[float]) -> dict[int, float] | None:
        return None

    # A policy may also define `react(now_ns, active, freq_ghz) -> {thread index: GHz} | None`: called
    # after every event that changed which threads run (active[i]: thread i is RUNNING), for rules
    # that act at once rather than at period ends (thesis §7: drop the boost of a descheduled
    # thread, boost a thread left running alone). `attach(...)` gives it the simulator's live state.


def simulate(workload: dict[str, Any], *, cores: int = 4, freq_ghz: float | dict[int, float] = 2.0,
             seed: int = 0, timeslice_ns: int = 0, policy: Policy | None = None) -> SimResult:
    """Run `workload` on `cores` cores; `freq_ghz` is one frequency or {thread index: GHz}.

    timeslice_ns > 0: round-robin, a thread that has run that long is preempted (to the back of
    the run queue) when others wait for a core. policy: called every policy.period_ns and may
    change per-thread frequencies; running compute segments are re-timed from that instant.
    Deterministic: ties are broken by event sequence numbers, never by randomness.
    """
    ths = workload["threads"]
    n = len(ths)
    freq = [float(freq_ghz.get(i, 2.0)) if isinstance(freq_ghz, dict) else float(freq_ghz) for i in range(n)]
    unfair = {int(k) for k, v in workload.get("mutex_policy", {}).items() if v == "unfair"}
    ops = [t["ops"] for t in ths]
    pc = [0] * n
    core_of = [-1] * n
    free = list(range(cores - 1, -1, -1))
    runq: list[int] = []
    heap: list[tuple[int, int, int, int]] = []
    seq = 0
    owner: dict[int, int] = {}
    waiters: dict[int, list[int]] = {}
    arrived: dict[int, list[int]] = {}
    joiners: dict[int, list[int]] = {}
    qcount: dict[int, int] = {}
    getters: dict[int, list[int]] = {}
    putters: dict[int, list[int]] = {}
    done = [False] * n
    started = [False] * n
    start_ns = [0] * n
    end_ns = [0] * n
    cur = [None] * n  # (start, state, cpu, addr)
    pend_waker = [-1] * n
    reason = [("", -1)] * n
    rows: list[tuple] = []
    waits: list[tuple] = []
    split = np.zeros((n, 3), dtype=np.int64)
    events = 0
    spin_since = [-1] * n  # spin-then-block: spinning since (still RUNNING in the trace), else -1
    spin_gen = [0] * n
    spin_on: list[tuple[str, int]] = [("", -1)] * n  # what a spinning thread waits for: ("lock" | "barrier", id)
    seg: list[list | None] = [None] * n  # running compute segment: [cycles left, fixed ns left, since]
    fixed = [[0, 0] for _ in range(n)]  # its memory and store ns not yet run (memory runs first)
    pieces: list[tuple] = []  # (tid, start, end, scaling, memory, store ns) per stretch on a core
    gen = [0] * n
    run_since = [0] * n
    crit = np.zeros(n)
    act = [False] * n
    online = {"n": 0, "t": 0}
    live = [0]
    busy: dict[float, int] = {}  # core-ns spent running (spinning included) at each frequency
    busy_mark = [0] * n  # since when thread i has been running at freq[i]
    react = getattr(policy, "react", None)
    activity_changed = [False]
    if policy is not None and hasattr(policy, "attach"):  # online DVFS managers read the run so far
        policy.attach(rows=rows, cur=cur, pieces=pieces, seg=seg, fixed=fixed, freq=freq, owner=owner,
                      waiters=waiters, arrived=arrived, workload=workload)

    def add_busy(i: int, now: int) -> None:
        if now > busy_mark[i]:
            busy[freq[i]] = busy.get(freq[i], 0) + now - busy_mark[i]
        busy_mark[i] = now

    def set_state(i: int, now: int, state: int, cpu: int = -1, addr: int = 0) -> None:
        c = cur[i]
        if c is not None:
            if c[1] == state and c[2] == cpu and c[3] == addr:
                return
            if now > c[0]:
                w = pend_waker[i] if c[1] != State.RUNNING else -1
                rows.append((TID_BASE + i, c[0], now, c[1], c[2], c[3], TID_BASE + w if w >= 0 else -1))
                if c[1] != State.RUNNING:
                    r, who = reason[i]
                    waits.append((TID_BASE + i, c[0], now, r, TID_BASE + who if who >= 0 else -1))
        pend_waker[i] = -1
        t0 = now
        if c is not None and now == c[0] and rows and rows[-1][0] == TID_BASE + i and rows[-1][2] == now \
                and rows[-1][3:6] == (state, cpu, addr):  # a zero-length detour: extend the previous row
            t0 = rows.pop()[1]
        cur[i] = (t0, state, cpu, addr)
        a = state == State.RUNNING
        if a != act[i]:  # online criticality counters (thesis §4.2.2)
            if online["n"] > 0 and now > online["t"]:
                share = (now - online["t"]) / online["n"]
                for j in range(n):
                    if act[j]:
                        crit[j] += share
            online["t"] = now
            online["n"] += 1 if a else -1
            act[i] = a
            activity_changed[0] = True
            if a:
                run_since[i] = now
                busy_mark[i] = now
            else:
                add_busy(i, now)

    def push(t: int, i: int, kind: int, token: int | None = None) -> None:
        nonlocal seq
        seq += 1
        if kind == 0:
            gen[i] += 1
        heapq.heappush(heap, (t, seq, i, kind, gen[i] if token is None else token))

    def plan(i: int, now: int) -> None:
        g = seg[i]
        g[2] = now
        push(now + int(round(g[0] / freq[i])) + g[1], i, 0)

    def account(i: int, now: int) -> None:
        """Consume the work done by a running segment since it was (re)planned: scaling part first."""
        g = seg[i]
        el = now - g[2]
        sc = int(round(g[0] / freq[i]))
        if el >= sc:
            split[i, 0] += sc
            g[1] -= el - sc
            g[0] = 0.0
        else:
            split[i, 0] += el
            g[0] = max(g[0] - el * freq[i], 0.0)
        fm = min(max(el - sc, 0), fixed[i][0])
        fs = max(el - sc, 0) - fm
        fixed[i][0] -= fm
        fixed[i][1] -= fs
        pieces.append((TID_BASE + i, g[2], now, min(el, sc), fm, fs))
        g[2] = now

    def set_freqs(change: dict[int, float], now: int) -> None:
        """New frequencies from a policy; running segments are re-timed from `now`."""
        for j, f in change.items():
            if float(f) == freq[j]:
                continue
            if act[j]:
                add_busy(j, now)
            if seg[j] is not None and core_of[j] >= 0:
                account(j, now)
                freq[j] = float(f)
                plan(j, now)
            else:
                freq[j] = float(f)

    def ready(i: int, now: int, waker: int, why: str) -> None:
        pend_waker[i] = waker
        if free:
            c = free.pop()
            core_of[i] = c
            set_state(i, now, State.RUNNING, c)
            push(now, i, 3)
        else:
            set_state(i, now, State.RUNNABLE)
            reason[i] = ("cpu", -1)
            runq.append(i)

    def release_core(i: int, now: int) -> None:
        c = core_of[i]
        core_of[i] = -1
        if runq:
            j = runq.pop(0)
            core_of[j] = c
            set_state(j, now, State.RUNNING, c)
            push(now, j, 3)
        else:
            free.append(c)

    def block(i: int, now: int, state: int, addr: int, why: str, culprit: int) -> None:
        reason[i] = (why, culprit)
        set_state(i, now, state, -1, addr)
        release_core(i, now)

    def step(i: int, now: int) -> None:
        prog = ops[i]
        if seg[i] is not None:  # resumed after a preemption
            plan(i, now)
            return
        while pc[i] < len(prog):
            op = prog[pc[i]]
            pc[i] += 1
            kind = op[0]
            if kind == "compute":
                cyc = int(op[1])
                mem = int(op[2]) if len(op) > 2 else 0
                sto = int(op[3]) if len(op) > 3 else 0
                split[i, 1] += mem
                split[i, 2] += sto
                seg[i] = [float(cyc), mem + sto, now]
                fixed[i] = [mem, sto]
                plan(i, now)
                return
            if kind == "lock":
                m = int(op[1])
                if m not in owner:
                    owner[m] = i
                    continue
                waiters.setdefault(m, []).append(i)
                if len(op) > 2 and int(op[2]) > 0:  # spin (on the core) before blocking
                    spin_since[i] = now
                    spin_gen[i] += 1
                    spin_on[i] = ("lock", m)
                    push(now + int(op[2]), i, 4, spin_gen[i])
                    return
                block(i, now, State.SYNC_WAIT, ADDR_BASE["lock"] + m, "lock", owner[m])
                return
            if kind == "unlock":
                m = int(op[1])
                q = waiters.get(m)
                if q:
                    j = q.pop() if m in unfair else q.pop(0)
                    owner[m] = j
                    if spin_since[j] >= 0:  # still spinning: it takes the lock without sleeping
                        waits.append((TID_BASE + j, spin_since[j], now, "spinning", TID_BASE + i))
                        spin_since[j] = -1
                        spin_gen[j] += 1
                        push(now, j, 3)
                    else:
                        ready(j, now, i, "lock")
                else:
                    owner.pop(m, None)
                continue
            if kind == "barrier":
                b, cnt = int(op[1]), int(op[2])
                arr = arrived.setdefault(b, [])
                if len(arr) + 1 >= cnt:
                    arrived[b] = []
                    for j in arr:
                        if spin_since[j] >= 0:  # still spinning: it goes on without sleeping
                            waits.append((TID_BASE + j, spin_since[j], now, "spinning", TID_BASE + i))
                            spin_since[j] = -1
                            spin_gen[j] += 1
                            push(now, j, 3)
                        else:
                            ready(j, now, i, "barrier")
                    continue
                arr.append(i)
                if len(op) > 3 and int(op[3]) > 0:  # spin-then-block (libgomp's active wait policy)
                    spin_since[i] = now
                    spin_gen[i] += 1
                    spin_on[i] = ("barrier", b)
                    push(now + int(op[3]), i, 4, spin_gen[i])
                    return
                block(i, now, State.SYNC_WAIT, ADDR_BASE["barrier"] + b, "barrier", -1)
                return
            if kind == "put":
                q, cap = int(op[1]), int(op[2])
                g = getters.get(q)
                if g:
                    ready(g.pop(0), now, i, "queue")
                elif qcount.get(q, 0) < cap:
                    qcount[q] = qcount.get(q, 0) + 1
                else:
                    putters.setdefault(q, []).append(i)
                    block(i, now, State.SYNC_WAIT, ADDR_BASE["queue"] + q, "queue full", -1)
                    return
                continue
            if kind == "get":
                q = int(op[1])
                if qcount.get(q, 0) > 0:
                    pw = putters.get(q)
                    if pw:  # the item of the first blocked producer takes the freed slot
                        ready(pw.pop(0), now, i, "queue")
                    else:
                        qcount[q] -= 1
                    continue
                getters.setdefault(q, []).append(i)
                block(i, now, State.SYNC_WAIT, ADDR_BASE["queue"] + q, "queue empty", -1)
                return
            if kind == "spawn":
                j = int(op[1])
                start_thread(j, now)
                continue
            if kind == "join":
                j = int(op[1])
                if done[j]:
                    continue
                joiners.setdefault(j, []).append(i)
                block(i, now, State.SYNC_WAIT, ADDR_BASE["join"] + j, "join", j)
                return
            if kind == "sleep":
                block(i, now, State.SLEEP, 0, "sleep", -1)
                push(now + int(op[1]), i, 1)
                return
            raise ValueError(f"unknown op {kind!r} in thread {i}")
        # thread exits
        done[i] = True
        live[0] -= 1
        end_ns[i] = now
        set_state(i, now, -1)
        cur[i] = None
        release_core(i, now)
        for j in joiners.pop(i, []):
            ready(j, now, i, "join")

    def start_thread(j: int, now: int) -> None:
        started[j] = True
        live[0] += 1
        start_ns[j] = now
        ready(j, now, -1, "")

    for i, t in enumerate(ths):
        if t.get("start", i == 0):
            start_thread(i, 0)
    tick = 0
    if timeslice_ns > 0 or policy is not None:
        tick = min(x for x in (timeslice_ns, policy.period_ns if policy else 0) if x > 0)
        push(tick, -1, 2)
    last_t = 0
    while heap:
        item = heapq.heappop(heap)
        t, _, i, kind, g = item
        if react is not None and activity_changed[0] and t > last_t:
            # every event of instant last_t is done: the policy reacts then, before time moves on
            heapq.heappush(heap, item)
            activity_changed[0] = False
            set_freqs(react(last_t, list(act), list(freq)) or {}, last_t)
            continue
        last_t = t
        events += 1
        if kind == 1:
            ready(i, t, -1, "sleep")
        elif kind == 3:
            step(i, t)
        elif kind == 4:
            if g == spin_gen[i] and spin_since[i] >= 0:  # spun out: block
                waits.append((TID_BASE + i, spin_since[i], t, "spinning", -1))
                spin_since[i] = -1
                what, obj = spin_on[i]
                if what == "barrier":
                    block(i, t, State.SYNC_WAIT, ADDR_BASE["barrier"] + obj, "barrier", -1)
                else:
                    block(i, t, State.SYNC_WAIT, ADDR_BASE["lock"] + obj, "lock", owner.get(obj, -1))
        elif kind == 0:
            if g == gen[i]:  # else a stale completion of a preempted or re-timed segment
                sc = int(round(seg[i][0] / freq[i]))
                split[i, 0] += sc
                pieces.append((TID_BASE + i, seg[i][2], t, sc, fixed[i][0], fixed[i][1]))
                seg[i] = None
                step(i, t)
        else:
            if live[0] == 0:
                continue
            if policy is not None and t % policy.period_ns == 0:
                if online["n"] > 0 and t > online["t"]:
                    share = (t - online["t"]) / online["n"]
                    for j in range(n):
                        if act[j]:
                            crit[j] += share
                online["t"] = t
                set_freqs(policy.decide(t, crit.copy(), list(freq)) or {}, t)
            if timeslice_ns > 0 and runq:
                waiting = len(runq)
                for j in sorted(range(n), key=lambda x: run_since[x]):  # longest on its core first
                    if waiting and core_of[j] >= 0 and seg[j] is not None and t - run_since[j] >= timeslice_ns:
                        waiting -= 1
                        account(j, t)
                        gen[j] += 1  # drop its pending completion
                        runq.append(j)
                        set_state(j, t, State.RUNNABLE)
                        reason[j] = ("cpu", -1)
                        release_core(j, t)
                        core_of[j] = -1
            push(t + tick, -1, 2)
    if not all(done[i] for i in range(n) if started[i]):
        stuck = [ths[i].get("name", str(i)) for i in range(n) if started[i] and not done[i]]
        raise ValueError(f"deadlock: threads {stuck} never finish")
    idx = [i for i in range(n) if started[i]]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 7)
    runtime = max(end_ns) if n else 0
    trace = make_trace(
        threads={"tid": np.array([TID_BASE + i for i in idx], dtype=np.int32),
                 "name": [ths[i].get("name", f"worker-{i}") for i in idx],
                 "role": [ths[i].get("role", "main" if i == 0 else "app") for i in idx],
                 "start_ns": np.array([start_ns[i] for i in idx], dtype=np.int64),
                 "end_ns": np.array([end_ns[i] for i in idx], dtype=np.int64),
                 "pid": np.full(len(idx), TID_BASE, dtype=np.int32)},
        states={"tid": arr[:, 0].astype(np.int32), "start_ns": arr[:, 1], "end_ns": arr[:, 2],
                "state": arr[:, 3].astype(np.uint8), "cpu": arr[:, 4].astype(np.int16),
                "addr": arr[:, 5].astype(np.uint64), "waker": arr[:, 6].astype(np.int32)},
        meta={"source": "sim", "cores": cores, "workload": workload.get("name", ""), "seed": seed,
              "threads": len(idx), "root_tid": TID_BASE, "frequencies": freq},
    )
    for i in range(n):
        if act[i]:
            add_busy(i, runtime)
    truth = {"runtime_ns": runtime, "compute_ns": split[:, 0].tolist(), "memory_ns": split[:, 1].tolist(),
             "store_ns": split[:, 2].tolist(), "waits": waits, "busy_ns_by_freq": busy,
             "segments": np.array(pieces, dtype=np.int64).reshape(-1, 6)}
    return SimResult(trace, truth, events)
