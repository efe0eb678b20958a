"""Planted phases: turn a simulated run into code samples drawn from per-phase code distributions.

The simulator says when each thread ran, not what code it ran. Here every compute op of a
workload carries a phase label (``thread["code"]``, one entry per op, None for non-compute
ops), each phase has a probability distribution over code regions, and a cpu-clock-like
sampler takes one sample every `period_ns` of each thread's RUNNING time and draws its region
from the distribution of the op running then. The result is a Trace whose `samples` table
looks like `record --sample`'s, plus the truth: the planted phase of every sample and the
cycles the thread had retired at it (a per-interval CPI for validation).

Which op ran when is recovered without touching the engine: a thread's compute ops run in
program order and each takes exactly ``round(cycles / f) + mem_ns + store_ns`` of RUNNING time
(preemption splits but never changes it), so cumulative RUNNING time maps to the op. Spinning
locks add RUNNING time that belongs to no op: workloads with them are refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scalestack.sim.engine import TID_BASE, SimResult
from scalestack.trace import SampleTable, State, Trace

BINARY = "sim-app"
REGION_BYTES = 0x100


@dataclasses.dataclass(frozen=True)
class PlantedSamples:
    """A Trace with samples, plus per-sample truth (rows in `trace.samples` order)."""

    trace: Trace
    phase: np.ndarray  # int64 planted phase of each sample
    cycles: np.ndarray  # float64 cycles retired by the sample's thread up to the sample


def code_distributions(n_phases: int, regions_per_phase: int = 6, shared_regions: int = 4,
                       shared_mass: float = 0.3, seed: int = 0) -> np.ndarray:
    """(n_phases, V) probabilities: each phase mostly hits its own regions, some mass on shared ones.

    Shared regions (library code every phase calls) keep the phases from being trivially apart.
    """
    rng = np.random.default_rng(seed)
    v = n_phases * regions_per_phase + shared_regions
    out = np.zeros((n_phases, v))
    for p in range(n_phases):
        own = rng.dirichlet(np.ones(regions_per_phase)) * (1 - shared_mass)
        out[p, p * regions_per_phase:(p + 1) * regions_per_phase] = own
        if shared_regions:
            out[p, n_phases * regions_per_phase:] = rng.dirichlet(np.ones(shared_regions)) * shared_mass
        else:
            out[p] /= out[p].sum()
    return out


def phase_workload(threads: int = 4, n_phases: int = 3, rounds: int = 6, total_cycles: float = 2.4e10,
                   serial_phase: int | None = None, imbalance: float = 0.2, cpi_jitter: float = 0.5,
                   seed: int = 0) -> dict[str, Any]:
    """A data-parallel program: in each round, every worker runs each phase's code, with a barrier after each.

    `total_cycles` of work per phase-run are split among the workers (fixed problem size), so a
    sweep over `threads` shows per-phase speedups. `serial_phase` (if given) is run by worker 1
    alone while the others wait at the barrier: a phase that cannot speed up. Phase CPIs differ
    (memory stall time per cycle is 0.1 + 0.25 * phase index of the compute time, times a
    uniform 1 +- `cpi_jitter` per op, so CPI also varies inside a phase). The order of phases in
    a round is shuffled.
    """
    rng = np.random.default_rng(seed)
    workers = max(threads, 1)
    order_per_round = [rng.permutation(n_phases) for _ in range(rounds)]
    seg_cycles = total_cycles / (rounds * n_phases)
    ths: list[dict[str, Any]] = [{"name": "main", "role": "main", "start": True,
                                  "ops": [["spawn", i] for i in range(1, workers + 1)]
                                  + [["join", i] for i in range(1, workers + 1)],
                                  "code": [None] * (2 * workers)}]
    for w in range(1, workers + 1):
        ops: list[list] = []
        code: list[int | None] = []
        for r in range(rounds):
            for p in order_per_round[r]:
                p = int(p)
                if serial_phase is not None and p == serial_phase:
                    cyc = seg_cycles if w == 1 else 0.0
                else:
                    cyc = seg_cycles / workers * (1 + imbalance * rng.uniform(-1, 1))
                if cyc > 0:
                    stall = (0.1 + 0.25 * p) * (1 + cpi_jitter * rng.uniform(-1, 1))
                    mem = int(cyc / 2.0 * stall)  # ns, at the default 2 GHz
                    ops.append(["compute", int(cyc), mem])
                    code.append(p)
                ops.append(["barrier", r * n_phases + int(np.flatnonzero(order_per_round[r] == p)[0]), workers])
                code.append(None)
        ths.append({"name": f"worker-{w}", "start": False, "ops": ops, "code": code})
    return {"name": f"phases{n_phases}", "threads": ths}


def add_samples(sim: SimResult, workload: dict[str, Any], distributions: np.ndarray,
                period_ns: int = 1_000_000, seed: int = 0) -> PlantedSamples:
    """Sample every thread once per `period_ns` of its RUNNING time (like perf's cpu-clock).

    Each sample's region is drawn from ``distributions[phase]`` of the compute op running at
    that moment; its symbol is ``region_NNN`` in binary ``sim-app``.
    """
    trace = sim.trace
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(distributions, axis=1)
    cdf[:, -1] = 1.0
    freqs = trace.meta.get("frequencies", [2.0] * len(workload["threads"]))
    st = trace.states
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("tid", "time", "cpu", "phase", "cycles")}
    for i, th in enumerate(workload["threads"]):
        tid = TID_BASE + i
        ops, code = th["ops"], th.get("code") or [None] * len(th["ops"])
        comp = [j for j, op in enumerate(ops) if op[0] == "compute"]
        if any(op[0] == "lock" and len(op) > 2 and int(op[2]) > 0 for op in ops):
            raise ValueError(f"thread {i}: spinning locks add RUNNING time no op accounts for")
        if not comp:
            continue
        f = float(freqs[i])
        cyc = np.array([float(ops[j][1]) for j in comp])
        sc = np.round(cyc / f)
        fixed = np.array([sum(int(x) for x in ops[j][2:4]) for j in comp], dtype=float)
        dur = sc + fixed
        label = np.array([-1 if code[j] is None else int(code[j]) for j in comp])
        m = (st.tid == tid) & (st.state == State.RUNNING)
        a, b, cpu = st.start_ns[m], st.end_ns[m], st.cpu[m]
        run_end = np.cumsum(b - a)
        if len(run_end) == 0 or abs(run_end[-1] - dur.sum()) > len(comp) + 1:
            raise ValueError(f"thread {i}: RUNNING time {run_end[-1] if len(run_end) else 0} ns does not match "
                             f"its compute ops ({dur.sum():.0f} ns)")
        x = rng.uniform(0, period_ns) + np.arange(0, run_end[-1], period_ns, dtype=float)
        x = x[x < run_end[-1]]
        k = np.searchsorted(run_end, x, side="right")
        run_start = run_end - (b - a)
        t = a[k] + (x - run_start[k]).astype(np.int64)
        dur_end = np.cumsum(dur)
        j = np.minimum(np.searchsorted(dur_end, x, side="right"), len(comp) - 1)
        into = x - (dur_end[j] - dur[j])
        cyc_before = np.r_[0.0, np.cumsum(cyc)][j]
        parts["tid"].append(np.full(len(x), tid, dtype=np.int32))
        parts["time"].append(t)
        parts["cpu"].append(cpu[k])
        parts["phase"].append(label[j])
        parts["cycles"].append(cyc_before + into / np.maximum(dur[j], 1) * cyc[j])
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}
    order = np.argsort(cat["time"], kind="stable")
    cat = {k: v[order] for k, v in cat.items()}
    phase = cat["phase"].astype(np.int64)
    u = rng.random(len(phase))
    region = (u[:, None] > cdf[np.maximum(phase, 0)]).sum(axis=1)
    offset = rng.integers(0, REGION_BYTES, len(phase))
    samples = SampleTable(
        tid=cat["tid"].astype(np.int32), time_ns=cat["time"].astype(np.int64), cpu=cat["cpu"].astype(np.int16),
        ip=(0x400000 + region * REGION_BYTES + offset).astype(np.uint64), offset=offset.astype(np.int64),
        symbol=np.array([f"region_{r:03d}" for r in range(cdf.shape[1])], dtype=object)[region],
        binary=[BINARY] * len(region))
    out = dataclasses.replace(trace, samples=samples)
    out = out.with_meta(sample_hz=1e9 / period_ns)
    return PlantedSamples(out, phase, cat["cycles"].astype(np.float64))


def planted_run(threads: int = 4, n_phases: int = 3, seed: int = 0, rounds: int = 4, total_cycles: float = 4.8e11,
                serial_phase: int | None = None, period_ns: int = 1_000_000, cores: int | None = None) -> PlantedSamples:
    """`phase_workload` simulated on `cores` (default: one per worker) and sampled: one call for tests."""
    from scalestack.sim.engine import simulate

    wl = phase_workload(threads, n_phases, rounds, total_cycles, serial_phase=serial_phase, seed=seed)
    sim = simulate(wl, cores=cores or threads + 1)
    return add_samples(sim, wl, code_distributions(n_phases, seed=seed), period_ns, seed=seed)


def interval_truth(planted: PlantedSamples, first: np.ndarray, last: np.ndarray,
                   order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For intervals given as sample ranges [first, last] of `order`: majority planted phase, its
    share of the interval's samples (purity), and the interval's CPI at the planted frequency."""
    ph = planted.phase[order]
    k = int(ph.max()) + 1 if len(ph) else 1
    onehot = np.zeros((len(ph) + 1, k))
    onehot[np.arange(len(ph)) + 1, ph] = 1
    cum = np.cumsum(onehot, axis=0)
    counts = cum[last + 1] - cum[first]
    truth = np.argmax(counts, axis=1)
    purity = counts.max(axis=1) / np.maximum(counts.sum(axis=1), 1)
    cyc = planted.cycles[order]
    period = 1e9 / float(planted.trace.meta.get("sample_hz", 1000))
    freq = float(planted.trace.meta.get("frequencies", [2.0])[-1])
    cpi = (last - first) * period * freq / np.maximum(cyc[last] - cyc[first], 1e-9)
    return truth, purity, cpi
