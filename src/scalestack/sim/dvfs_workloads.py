"""Random Java-like workloads for validating DVFS prediction (spec dep-burst.md §2.3).

App threads do compute ops with DRAM time (non-scaling) and allocation store bursts (the store
queue full: non-scaling, as the paper's BURST assumes), take locks, and stop at stop-the-world
collections run by two GC threads (copying: memory- and store-heavy). Mixes:

* ``mem``: memory-intensive (large DRAM share, GC share well above 10%);
* ``store``: allocation-heavy (long store bursts in app and GC threads);
* ``lock``: many short critical sections on two locks, little memory time;
* ``compute``: mostly core-bound.
"""

from __future__ import annotations

import numpy as np

MIXES = ("mem", "store", "lock", "compute")

# per mix: (DRAM share of an app op, store share, lock probability, GC work scale)
_MIX = {"mem": (0.45, 0.05, 0.1, 3.0), "store": (0.1, 0.35, 0.1, 2.0), "lock": (0.1, 0.05, 0.8, 0.5),
        "compute": (0.03, 0.01, 0.1, 0.3)}


def java_like(mix: str, seed: int = 0, app_threads: int | None = None, gcs: int = 5) -> dict:
    """One random workload of `mix`: main spawns app and 2 GC threads, `gcs` collections."""
    rng = np.random.default_rng(seed)
    mem_share, sto_share, p_lock, gc_scale = _MIX[mix]
    na = int(app_threads or rng.integers(2, 7))
    ngc = 2
    parties = na + ngc

    def op(cyc: float, mem: float, sto: float) -> list:
        # a compute op: CYCLES, then DRAM ns and store ns as shares of its time at 2 GHz
        m = rng.uniform(0.5, 1.5) * mem
        s = rng.uniform(0.0, 2.0) * sto
        t = cyc / 2.0
        return ["compute", int(cyc), int(t * m / max(1 - m - s, 0.1)), int(t * s / max(1 - m - s, 0.1))]

    app = [[] for _ in range(na)]
    gc = [[] for _ in range(ngc)]
    for k in range(gcs):
        for w in range(na):
            for _ in range(int(rng.integers(3, 9))):
                if rng.random() < p_lock:
                    lk = int(rng.integers(0, 2))
                    app[w] += [op(rng.uniform(20e3, 120e3), mem_share, sto_share), ["lock", lk],
                               op(rng.uniform(5e3, 40e3), mem_share, sto_share), ["unlock", lk]]
                else:
                    app[w].append(op(rng.uniform(50e3, 400e3), mem_share * rng.uniform(0, 2), sto_share))
            app[w] += [["barrier", 2 * k, parties], ["barrier", 2 * k + 1, parties]]
        for g in range(ngc):
            gc[g] += [["barrier", 2 * k, parties]]
            for _ in range(int(rng.integers(1, 4))):
                gc[g].append(op(rng.uniform(30e3, 150e3) * gc_scale, 0.4, 0.3))
                if rng.random() < 0.5:
                    gc[g] += [["lock", 9], op(rng.uniform(2e3, 10e3), 0.2, 0.1), ["unlock", 9]]
            gc[g] += [["barrier", 2 * k + 1, parties]]
    threads = [{"name": "main", "role": "main", "start": True,
                "ops": [["spawn", i] for i in range(1, parties + 1)] + [["join", i] for i in range(1, parties + 1)]}]
    threads += [{"name": f"app-{w}", "role": "app", "start": False, "ops": app[w]} for w in range(na)]
    threads += [{"name": f"GC Thread#{g}", "role": "gc", "start": False, "ops": gc[g]} for g in range(ngc)]
    return {"name": f"java_{mix}_{seed}", "threads": threads}
