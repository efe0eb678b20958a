"""Synthetic fleets: N recordings from the workload simulator, to test and time fleet queries.

A pool of simulated runs (the named workloads of `scalestack.sim.workloads` at several thread
counts and seeds, on 2 to 8 cores) is turned into aggregate recordings (per-thread counters per
window, as `record --aggregate` writes) or Traces; each of the N recordings is one of them with
every duration scaled by its own random factor (0.8 to 1.25: runs of one program differ), and a
host, program (the workload) and date. Recordings of one partition go to one file per table, as
a collector that batches its uploads would write them.
"""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa

from scalestack.fleet.schema import TABLES, aggregate_tables, trace_tables, write_tables

WORKLOADS = ("lock_critical", "barrier_imbalance", "pipeline", "bfs", "pmd", "gc_heavy", "streamcluster")


def simulated_recording(workload: str, threads: int, seed: int, cores: int, windows: int = 8, kind: str = "aggregate"):
    """One simulated run as an AggregateRecording (`windows` windows) or a Trace."""
    from scalestack.fleet.schema import _trace_windows
    from scalestack.sim import workloads
    from scalestack.sim.engine import simulate
    from scalestack.trace.aggregate import AggregateRecording

    res = simulate(workloads.get(workload, threads, seed), cores=cores, seed=seed)
    trace = res.trace.with_meta(command=[workload], cores=cores, workload=workload)
    if kind == "trace":
        return trace.with_meta(window_ns=max(1, -(-trace.wall_ns // windows)))
    window_ns = max(1, -(-trace.wall_ns // windows))
    edges, sums = _trace_windows(trace, window_ns)
    n_win, n = sums["crit_ns"].shape
    w, r = np.nonzero(np.any(np.stack(list(sums.values())) > 0, axis=0))
    busy = sums["crit_ns"].sum(axis=1)
    th = trace.threads
    cols = {"window": w.astype(np.int64), "start_ns": edges[w], "end_ns": edges[w + 1], "busy_ns": busy[w],
            "tid": th.tid[r].astype(np.int64), "pid": th.pid[r].astype(np.int64),
            "name": th.name[r].astype(object), **{c: sums[c][w, r] for c in sums}}
    main = th.tid[th.role == "main"]
    meta = {"collector": "sim", "command": [workload], "window_ns": window_ns, "cores": cores,
            "root_pid": int(main[0]) if len(main) else None}
    return AggregateRecording(cols, meta)


def generate(root: str, n: int, *, seed: int = 0, hosts: int = 20, days: int = 7, kind: str = "aggregate",
             pool: int = 32, start_date: str = "2026-11-01", per_file: int | None = None) -> dict[str, int]:
    """Write `n` synthetic recordings into the fleet dataset at `root`.

    kind: "aggregate" (per-window counters only), "trace" (with per-lock waits) or "mixed"
    (every fourth one a trace). per_file: recordings per file (default: all of a partition's, as a
    batching collector writes them; 1: as adding each recording by itself does). Returns counts:
    recordings, files, rows per table.
    """
    rng = np.random.default_rng(seed)
    kinds = ["aggregate"] if kind == "aggregate" else ["trace"] if kind == "trace" else ["aggregate", "trace"]
    bases = []
    for k in range(pool):
        wl = WORKLOADS[k % len(WORKLOADS)]
        threads = int(rng.integers(2, 9))
        cores = int(rng.choice([2, 4, 8]))
        kd = kinds[k % len(kinds)]
        rec = simulated_recording(wl, threads, int(rng.integers(0, 1000)), cores, kind=kd)
        tables = trace_tables(rec, "base", rec.meta["window_ns"]) if kd == "trace" else aggregate_tables(rec, "base")
        bases.append((wl, {name: t.to_pydict() if name == "recordings" else
                           {c: t.column(c).to_numpy(zero_copy_only=False) for c in t.column_names}
                           for name, t in tables.items()}))
    day0 = datetime.date.fromisoformat(start_date)
    parts: dict[tuple[str, str, str], list[tuple[int, int, float]]] = {}
    for i in range(n):
        b = int(rng.integers(0, len(bases)))
        if kind == "mixed":  # every fourth recording a trace
            want = "trace" if i % 4 == 3 else "aggregate"
            b = b - b % 2 + (1 if want == "trace" else 0)
            b = min(b, len(bases) - 1)
        part = (f"host{int(rng.integers(0, hosts)):03d}", bases[b][0],
                (day0 + datetime.timedelta(days=int(rng.integers(0, days)))).isoformat())
        parts.setdefault(part, []).append((i, b, float(rng.uniform(0.8, 1.25))))
    files = 0
    rows = {name: 0 for name in TABLES}
    batches = []
    for part, recs in sorted(parts.items()):
        step = per_file or len(recs)
        batches += [(part, recs[k:k + step]) for k in range(0, len(recs), step)]
    for part, recs in batches:
        out: dict[str, dict[str, list]] = {name: {c: [] for c in TABLES[name].names} for name in TABLES}
        for i, b, f in recs:
            rid = f"synthetic-{seed}-{i:07d}"
            for name, cols in bases[b][1].items():
                _scaled(out[name], cols, rid, f, name)
        tables = {}
        for name, cols in out.items():
            arrays = {}
            for field in TABLES[name]:
                chunks = cols[field.name]
                arrays[field.name] = (np.concatenate(chunks) if chunks and isinstance(chunks[0], np.ndarray)
                                      else [v for c in chunks for v in c])
            tables[name] = pa.table({k: pa.array(v, type=TABLES[name].field(k).type) for k, v in arrays.items()})
            rows[name] += tables[name].num_rows
        files += len(write_tables(root, part, f"synthetic-{seed}-{recs[0][0]:07d}", tables))
    return {"recordings": n, "files": files, **{f"{k}_rows": v for k, v in rows.items()}}


_TIMES = {"start_ns", "wall_ns", "window_ns", "window_start_ns", "window_end_ns", "crit_ns", "running_ns",
          "runnable_ns", "sync_wait_ns", "io_wait_ns", "sleep_ns", "wait_ns"}


def _scaled(out: dict[str, list], cols: dict, rid: str, f: float, table: str) -> None:
    """Append one base recording's rows with every duration scaled by f (times kept from 0)."""
    n = len(next(iter(cols.values())))
    if n == 0:
        return
    for c, v in cols.items():
        if c == "recording_id":
            out[c].append(np.array([rid] * n, dtype=object))
        elif c in _TIMES:
            v = np.asarray(v, dtype=np.int64)
            out[c].append(np.rint(v * f).astype(np.int64))
        else:
            kind = object if isinstance(v[0], str) else np.bool_ if isinstance(v[0], (bool, np.bool_)) else np.int64
            out[c].append(np.asarray(v, dtype=kind))
