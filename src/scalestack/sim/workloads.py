"""Named workloads reproducing the papers' patterns, and a seeded random generator."""

from __future__ import annotations

import json

import numpy as np

UNIT = 1000  # cycles per time unit of the thesis Fig. 3.2 example (1 unit = 1 us at 1 GHz)


def fig32() -> dict:
    """Thesis Fig. 3.2: one critical section, then a barrier; run at 1 GHz, C = 6.5, 5, 5, 5.5 us."""
    u = UNIT

    def c(k):
        return ["compute", k * u]

    return {"name": "fig32", "mutex_policy": {"0": "unfair"}, "threads": [
        {"name": "main", "role": "main", "start": True,
         "ops": [c(2), c(1), ["lock", 0], c(1), ["unlock", 0], c(7), ["barrier", 0, 4]]},
         # split 2+1 so worker-3 (event queued earlier) reaches the lock first at t=3
        {"name": "worker-1", "start": True,
         "ops": [c(3), c(3), ["lock", 0], c(4), ["unlock", 0], c(6), ["barrier", 0, 4]]},
        {"name": "worker-2", "start": True,
         "ops": [c(3), c(7), ["lock", 0], c(3), ["unlock", 0], c(3), ["barrier", 0, 4]]},
        {"name": "worker-3", "start": True,
         "ops": [c(3), ["lock", 0], c(4), ["unlock", 0], c(10), ["barrier", 0, 4]]},
    ]}


def barrier_imbalance(threads: int = 4, seed: int = 0) -> dict:
    """Fork-join phases; one thread has twice the work of the others in every phase."""
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": [["spawn", i] for i in range(1, threads)]}]
    work = [[["compute", 2_000_000 if i == 1 else 1_000_000, 50_000], ["barrier", 0, threads - 1]] * 5
            for i in range(1, threads)]
    ths += [{"name": f"worker-{i}", "start": False, "ops": [op for op in work[i - 1]]} for i in range(1, threads)]
    ths[0]["ops"] += [["join", i] for i in range(1, threads)]
    return {"name": "barrier_imbalance", "threads": ths}


def lock_critical(threads: int = 4, seed: int = 0) -> dict:
    """fluidanimate-like: many short critical sections on a few locks around parallel work."""
    rng = np.random.default_rng(seed)
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": [["spawn", i] for i in range(1, threads)] + [["join", i] for i in range(1, threads)]}]
    for i in range(1, threads):
        ops = []
        for _ in range(20):
            m = int(rng.integers(0, 2))
            ops += [["compute", int(rng.integers(50_000, 150_000))], ["lock", m],
                    ["compute", 40_000 * (3 if i == 1 else 1)], ["unlock", m]]
        ths.append({"name": f"worker-{i}", "start": False, "ops": ops})
    return {"name": "lock_critical", "threads": ths}


def random_workload(threads: int = 8, seed: int = 0) -> dict:
    """Random phases of parallel work, locks and barriers among `threads` workers plus a main thread.

    The main thread runs a sequential part, spawns workers, joins them, and runs a tail.
    """
    rng = np.random.default_rng(seed)
    nw = threads - 1
    nlocks = int(rng.integers(1, 4))
    phases = int(rng.integers(2, 6))
    skew = rng.lognormal(0, 0.5, nw)
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": [["compute", int(rng.integers(10_000, 500_000))]] + [["spawn", i] for i in range(1, threads)]
            + [["join", i] for i in range(1, threads)] + [["compute", int(rng.integers(10_000, 300_000))]]}]
    ops = [[] for _ in range(nw)]
    for p in range(phases):
        for w in range(nw):
            for _ in range(int(rng.integers(1, 6))):
                ops[w].append(["compute", int(rng.integers(20_000, 400_000) * skew[w]),
                               int(rng.integers(0, 50_000))])
                if rng.random() < 0.5:
                    m = int(rng.integers(0, nlocks))
                    ops[w] += [["lock", m], ["compute", int(rng.integers(5_000, 100_000))], ["unlock", m]]
            if p < phases - 1:
                ops[w].append(["barrier", p, nw])
    ths += [{"name": f"worker-{w + 1}", "start": False, "ops": ops[w]} for w in range(nw)]
    policy = {str(m): ("unfair" if rng.random() < 0.5 else "fifo") for m in range(nlocks)}
    return {"name": f"random-{seed}", "threads": ths, "mutex_policy": policy}


def _forkjoin(name: str, workers: list[list], main_pre=(), main_post=(), policy=None, extra=()) -> dict:
    n = len(workers)
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": list(main_pre) + [["spawn", i + 1] for i in range(n)] + [["join", i + 1] for i in range(n)]
            + list(main_post)}]
    ths += [{"name": f"worker-{i + 1}", "start": False, "ops": w} for i, w in enumerate(workers)]
    ths += list(extra)
    return {"name": name, "threads": ths, "mutex_policy": policy or {}}


def bfs(threads: int = 4, seed: int = 0) -> dict:
    """BFS-like: every level, worker 1 runs a sequential step while the others wait at a barrier."""
    nw = threads - 1
    work = [[] for _ in range(nw)]
    for lvl in range(6):
        for w in range(nw):
            work[w] += [["compute", 200_000, 20_000], ["barrier", 2 * lvl, nw]]
            if w == 0:
                work[w].append(["compute", 300_000])  # the sequential frontier merge
            work[w].append(["barrier", 2 * lvl + 1, nw])
    return _forkjoin("bfs", work)


def pipeline(threads: int = 4, seed: int = 0) -> dict:
    """Pipeline: stages linked by bounded queues; the middle stage is the slowest."""
    ns = max(threads - 1, 2)
    items = 30
    work = []
    for s_ in range(ns):
        ops = []
        for _ in range(items):
            if s_ > 0:
                ops.append(["get", s_ - 1])
            ops.append(["compute", 300_000 if s_ == ns // 2 else 100_000])
            if s_ < ns - 1:
                ops.append(["put", s_, 2])
        work.append(ops)
    return _forkjoin("pipeline", work)


def pmd(threads: int = 4, seed: int = 0) -> dict:
    """Work stealing with one huge job (pmd): workers take jobs from a shared lock-protected pool."""
    rng = np.random.default_rng(seed)
    nw = threads - 1
    jobs = [int(x) for x in rng.integers(50_000, 150_000, 12 * nw)]
    jobs[3] = 4_000_000
    work = [[] for _ in range(nw)]
    free = [0] * nw
    for j in jobs:  # list scheduling: the earliest-free worker takes the next job
        w = int(np.argmin(free))
        work[w] += [["lock", 0], ["compute", 5_000], ["unlock", 0], ["compute", j]]
        free[w] += j + 5_000
    return _forkjoin("pmd", work)


def gc_heavy(threads: int = 4, seed: int = 0) -> dict:
    """GC-heavy managed app: app threads allocate; stop-the-world pauses run by two GC threads.

    A pause is two barriers among all app and GC threads: app threads stop at the first, the GC
    threads collect, and everyone resumes at the second.
    """
    nw = threads - 1
    ngc = 2
    parties = nw + ngc
    work = [[] for _ in range(nw)]
    gcs = [[] for _ in range(ngc)]
    for k in range(5):
        for w in range(nw):
            work[w] += [["compute", 400_000 + 50_000 * w, 30_000], ["barrier", 2 * k, parties],
                        ["barrier", 2 * k + 1, parties]]
        for g in range(ngc):
            gcs[g] += [["barrier", 2 * k, parties], ["compute", 150_000, 50_000], ["barrier", 2 * k + 1, parties]]
    extra = [{"name": f"GC Thread#{g}", "role": "gc", "start": False, "ops": gcs[g]} for g in range(ngc)]
    wl = _forkjoin("gc_heavy", work, extra=extra)
    wl["threads"][0]["ops"] = ([["spawn", nw + 1 + g] for g in range(ngc)] + wl["threads"][0]["ops"]
                               + [["join", nw + 1 + g] for g in range(ngc)])
    return wl


def streamcluster(threads: int = 4, seed: int = 0) -> dict:
    """streamcluster-like: identical threads serialised on one hot lock (critical-section dominated)."""
    rng = np.random.default_rng(seed)
    work = []
    for _ in range(threads - 1):
        ops = []
        for _ in range(30):
            ops += [["compute", int(rng.integers(40_000, 80_000))], ["lock", 0], ["compute", 30_000],
                    ["unlock", 0]]
        work.append(ops)
    return _forkjoin("streamcluster", work)


def shifting_critical(threads: int = 4, seed: int = 0, ratio: float = 3.0) -> dict:
    """The critical worker changes from phase to phase (thesis §4.4, Lu non-cont. with 16 threads):
    in barrier phase p, worker p mod W has `ratio` times the others' work. Over the whole run the
    workers' criticalities even out, though in every phase the program waits for one of them."""
    nw = threads - 1
    work = [[] for _ in range(nw)]
    for phase in range(2 * nw):
        for w in range(nw):
            work[w] += [["compute", int(300_000 * ratio) if w == phase % nw else 300_000, 20_000], ["barrier", phase, nw]]
    return _forkjoin("shifting_critical", work)


def participates(threads: int = 4, seed: int = 0, spin_ns: int = 0, phases: int = 4) -> dict:
    """OpenMP-like: the main thread is one of the `threads` workers (it participates, as libgomp's
    master does), with a serial part before, between and after the parallel loops. Workers spawned
    once wait at a barrier while the main thread runs a serial part. spin_ns > 0: every barrier wait
    spins that long before it blocks (OMP_WAIT_POLICY=active). The same total work at every count."""
    rng = np.random.default_rng(seed)
    total = 8_000_000
    serial = [int(x) for x in rng.integers(100_000, 300_000, phases + 1)]
    n = threads
    main = [["compute", serial[0]]] + [["spawn", i] for i in range(1, n)]
    work = [[] for _ in range(n)]
    for p in range(phases):
        jitter = rng.uniform(0.97, 1.03, n)
        jitter /= jitter.mean()  # the same work in every phase at every thread count: nothing is inflated
        for w in range(n):
            work[w] += [["compute", int(total / phases / n * jitter[w])], ["barrier", 2 * p, n, spin_ns]]
            if p < phases - 1:
                if w == 0:
                    work[w].append(["compute", serial[p + 1]])
                work[w].append(["barrier", 2 * p + 1, n, spin_ns])
    ths = [{"name": "main", "role": "main", "start": True,
            "ops": main + work[0] + [["join", i] for i in range(1, n)] + [["compute", serial[-1]]]}]
    ths += [{"name": f"omp-{i}", "start": False, "ops": work[i]} for i in range(1, n)]
    return {"name": f"participates-{n}" + ("-spin" if spin_ns else ""), "threads": ths,
            "serial_cycles": sum(serial)}


def coordinator(threads: int = 4, seed: int = 0, items: int = 48) -> dict:
    """A coordinator plus `threads` workers (xz -T, an I/O feeder): the main thread reads every item
    (2% of its work) into a bounded queue the workers take from, then joins them and writes a tail.
    It mostly waits while the workers work: its thread dict says so ("kind": "coordinator")."""
    rng = np.random.default_rng(seed)
    n = threads
    per = items // n
    work = [int(x) for x in rng.integers(150_000, 250_000, items)]
    main = [["compute", 200_000]] + [["spawn", i] for i in range(1, n + 1)]
    for k in range(per * n):
        main += [["compute", work[k] // 50], ["put", 0, 2 * n]]
    main += [["join", i] for i in range(1, n + 1)] + [["compute", 100_000]]
    ths = [{"name": "main", "role": "main", "start": True, "kind": "coordinator", "ops": main}]
    for i in range(n):
        ops = []
        for k in range(per):
            ops += [["get", 0], ["compute", work[i * per + k]]]
        ths.append({"name": f"worker-{i + 1}", "start": False, "ops": ops})
    return {"name": f"coordinator-{n}", "threads": ths}


def spin_barriers(threads: int = 4, seed: int = 0) -> dict:
    """`participates` with spin-then-block barriers (50 us of spinning, then a futex wait)."""
    return participates(threads, seed, spin_ns=50_000)


NAMED = {"fig32": fig32, "barrier_imbalance": barrier_imbalance, "bfs": bfs, "lock_critical": lock_critical,
         "pipeline": pipeline, "pmd": pmd, "gc_heavy": gc_heavy, "streamcluster": streamcluster,
         "shifting_critical": shifting_critical, "random": random_workload, "participates": participates,
         "coordinator": coordinator, "spin_barriers": spin_barriers}


def get(name: str, threads: int | None = None, seed: int = 0) -> dict:
    """A named workload, or a JSON file path."""
    if name.endswith((".json", ".yaml", ".yml")):
        with open(name) as f:
            if name.endswith(".json"):
                return json.load(f)
            import yaml

            return yaml.safe_load(f)
    if name not in NAMED:
        from scalestack.errors import UserError

        raise UserError(f"unknown workload {name!r}; see 'scalestack sim list'")
    if name == "fig32":
        return fig32()
    return NAMED[name](threads or 4, seed)
