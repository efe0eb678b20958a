"""Eklov's software speedup stack run inside the memory-hierarchy simulator, against its truth.

On hardware the protocol (spec `eklov-speedup-stacks.md` §2) can only *approximate* "no
contention": a pirate thread steals C(N-1)/N of the LLC, the profiled thread runs alone between
barriers, and waits timed in the real run are subtracted. The simulator can switch each source of
contention off exactly (`HwConfig.llc_partition`, `private_memory`, `sync_free`), so both stacks
can be built from the same machine and compared component by component:

truth     S_pirate = T(1) / T(N) with the LLC set-partitioned C/N per thread, private DRAM, no waits;
          S_nosync = T(1) / T(N) with shared LLC and DRAM, no waits; S_meas = T(1) / T(N) real.
protocol  S_pirate = T(1) / max_i T_prof,i: thread i alone next to a pirate looping over W bytes
          (engine pirate mode: re-warmed at the start and at every barrier, the held time left out),
          fetch ratio checked exactly; S_nosync = T(1) / max_i (t_i - wait_i) from the real run's
          lock and barrier waits (the join counted as a barrier); S_meas as the truth.

Both are assembled by `eklov.stack.EklovStack.from_runs`; times in ns of the simulated clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scalestack.eklov.stack import EklovStack, pirate_size
from scalestack.errors import UserError
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import simulate, sync_dense
from scalestack.hwsim.config import HwConfig
from scalestack.hwsim.traces import MemTrace, from_arrays, parallel_kernel
from scalestack.results import Result

PIRATE_BASE = 1 << 46  # the pirate's own address space
COMPONENTS = ("cache", "memory", "sync")


def pirate_stream(w_bytes: int, line_bytes: int = 64, gap: int = 4, seed: int = 0, order: str = "sawtooth"
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One loop of the pirate over every line of its W-byte set, in a fixed shuffled order.

    Shuffled rather than sequential so the stride prefetcher never pulls a line beyond the set;
    contiguous lines so the set covers every LLC set evenly (W/C of each set's ways).
    `order="sawtooth"` walks the order forward then backward: under LRU a cyclic loop that loses
    one line to the target re-fetches it over its own next line, which it then misses too (a
    cascade through the whole set every pass); walking back, the oldest line of a set is the
    target's, so a stolen line costs one miss. `order="cyclic"` keeps the plain loop.
    """
    lines = max(1, w_bytes // line_bytes)
    perm = np.random.default_rng(seed).permutation(lines).astype(np.int64)
    if order == "sawtooth":
        perm = np.concatenate([perm, perm[::-1]])
    elif order != "cyclic":
        raise UserError(f"pirate order {order!r}: use sawtooth or cyclic")
    return np.full(perm.size, gap, np.int64), PIRATE_BASE + perm * line_bytes, np.zeros(perm.size, np.uint8)


@dataclasses.dataclass(frozen=True)
class Isolated:
    """One isolated run: profiled thread `thread` next to a pirate of `w_bytes` (counts after its first warm-up)."""

    thread: int
    t_prof_cycles: float  # the thread's cycles between barriers (held time left out)
    held_cycles: float
    pirate_accesses: int  # LLC accesses of the pirate while the profiled thread ran
    pirate_misses: int
    rewarm_misses: int  # lines the target stole during a segment, re-fetched before the next (and after the last)
    pirate_lines: int
    segments: int
    pirate_gap: int
    bus_cycles: int  # data-bus cycles one line takes

    @property
    def bus_share(self) -> float:
        """Share of the data bus the pirate's co-run misses took while the profiled thread ran."""
        return self.pirate_misses * self.bus_cycles / self.t_prof_cycles if self.t_prof_cycles > 0 else 0.0

    @property
    def fetch_ratio(self) -> float:
        """The paper's check: the pirate's LLC misses per LLC access while co-running."""
        return self.pirate_misses / self.pirate_accesses if self.pirate_accesses else 0.0

    @property
    def lost_share(self) -> float:
        """Share of W missing at the end of a segment, on average (exact here: the re-warm refetches it)."""
        return self.rewarm_misses / (self.pirate_lines * self.segments) if self.pirate_lines and self.segments else 0.0

    def valid(self, threshold: float, bus_threshold: float = 0.05) -> bool:
        """The paper's fetch-ratio check, the same bound on the share of W lost, and the pirate's
        own memory traffic bounded (a fast pirate with a small ratio can still load the bus)."""
        return self.fetch_ratio <= threshold and self.lost_share <= threshold and self.bus_share <= bus_threshold


def isolated_run(trace: MemTrace, thread: int, w_bytes: int, config: HwConfig | None = None,
                 pirate_gap: int = 1, order: str = "sawtooth") -> Isolated:
    """Thread `thread` alone with a pirate of `w_bytes` on another core sharing the LLC.

    The pirate warms its set before the first segment, stops and re-warms at every barrier while
    the profiled thread is held (the hold is not counted in T_prof), and makes one more pass after
    the last segment so the lines stolen then are counted too. `pirate_gap` instructions per pirate
    access (1: four accesses a cycle, the dispatch width). The other threads are held on another
    socket as in the paper, so they never touch this LLC.
    """
    cfg = (config or HwConfig()).validate()
    if w_bytes <= 0 or w_bytes > cfg.llc_bytes:
        raise UserError(f"pirate size {w_bytes} B must be positive and at most the LLC's {cfg.llc_bytes} B")
    a, b = trace.offsets[thread], trace.offsets[thread + 1]
    own = (trace.gaps[a:b], sync_dense(trace)[a:b], trace.stores[a:b])
    both = from_arrays([own, pirate_stream(w_bytes, cfg.line_bytes, max(1, int(pirate_gap)), order=order)],
                       separate=False)
    p = cfg.params()
    p[E.P_PIRATE] = 1
    out = E.simulate(p, both.offsets, both.gaps, both.addrs, both.stores, np.array([0, 1], np.int64),
                     np.zeros(3, np.int64))
    t, pir = out[0], out[1]
    return Isolated(thread=thread, t_prof_cycles=float(t[E.C_CYC] - t[E.C_HELD]), held_cycles=float(t[E.C_HELD]),
                    pirate_accesses=int(pir[E.C_LLCA] - pir[E.C_RWA]), pirate_misses=int(pir[E.C_LLCM] - pir[E.C_RWM]),
                    rewarm_misses=int(pir[E.C_RWM]), pirate_lines=max(1, w_bytes // cfg.line_bytes),
                    segments=int((trace.stores[a:b] == E.S_BARRIER).sum()) + 1, pirate_gap=int(pirate_gap),
                    bus_cycles=int(p[E.P_BUS]))


def truth_times(trace: MemTrace, config: HwConfig | None = None) -> dict[str, float]:
    """Phase times (cycles) with contention switched off exactly, and the real run's."""
    cfg = (config or HwConfig()).validate()
    n = trace.threads
    if cfg.llc_sets % n:
        raise UserError(f"{n} threads cannot share the LLC's {cfg.llc_sets} sets evenly (use a power of two)")
    pirate = simulate(trace, cfg.replace(llc_partition=True, private_memory=True, sync_free=True))
    nosync = simulate(trace, cfg.replace(sync_free=True))
    return {"pirate": float(pirate[:, E.C_CYC].max()), "nosync": float(nosync[:, E.C_CYC].max())}


def measured_run(trace: MemTrace, config: HwConfig | None = None) -> dict[str, float]:
    """The real run: T(N) and T_nosync = max_i (t_i - wait_i), the join treated as a barrier.

    A thread that ends early waits at the join until T(N), so t_i - wait_i is its own end time
    less its lock and barrier waits (spinning plus yielding plus the wake-up latency).
    """
    cnt = simulate(trace, config)
    own = cnt[:, E.C_CYC] - cnt[:, E.C_SPIN] - cnt[:, E.C_YIELD]
    return {"meas": float(cnt[:, E.C_CYC].max()), "nosync": float(own.max()),
            "wait": float((cnt[:, E.C_SPIN] + cnt[:, E.C_YIELD]).sum())}


@dataclasses.dataclass(frozen=True)
class Workload:
    """A strong-scaling program: `make(n)` gives its n-thread trace (n = 1 is the baseline T(1))."""

    name: str
    make: Callable[[int], MemTrace]
    about: str = ""


def workloads(accesses: int, llc_bytes: int = 2 << 20, seed: int = 0) -> list[Workload]:
    """The validation set: the paper's microbenchmarks (a lock in the inner loop plus barriers over
    tiny / random / sequential data) and three kernels chosen for one component each."""
    def k(kind, ws_per_thread=None, ws_total=None, **kw):
        def make(n: int) -> MemTrace:
            ws = ws_per_thread * n if ws_per_thread else ws_total
            return parallel_kernel(kind, n, max(1, accesses // n), ws, shared=0.0, seed=seed, **kw)
        return make

    sync = {"locks": 1, "lock_every": 24, "critical": 4, "barriers": 8}
    return [
        Workload("ub-tiny", k("random", ws_per_thread=4 << 10, **sync), "4 KB per thread, lock + barriers"),
        Workload("ub-rnd", k("random", ws_total=8 << 20, **sync), "random over 8 MB split, lock + barriers"),
        Workload("ub-seq", k("stream", ws_total=8 << 20, **sync), "sequential over 8 MB split, lock + barriers"),
        Workload("fits-llc", k("random", ws_per_thread=llc_bytes * 3 // 4, barriers=4),
                 "3/4 of the LLC per thread: fits alone, not in C/N"),
        Workload("l1", k("random", ws_per_thread=16 << 10, barriers=4), "16 KB per thread (L1-sized)"),
        Workload("stream", k("stream", ws_total=32 << 20, barriers=4), "streaming over 32 MB split"),
    ]


@dataclasses.dataclass(frozen=True)
class EklovSimValidation(Result):
    """Truth and protocol stacks of one workload; errors in units of N (divide by N for %)."""

    kind = "hwsim-eklov-validation"
    name: str
    truth: EklovStack
    protocol: EklovStack
    fetch_ratio: dict[int, float]  # per N, the worst profiled thread's pirate fetch ratio
    lost_share: dict[int, float]  # per N, the worst share of W the target took from the pirate
    bus_share: dict[int, float]  # per N, the largest share of the bus the pirate's misses took
    flagged: dict[int, int]  # per N, profiled threads whose pirate failed the check (kept, not discarded)

    def error(self, comp: str, n: int) -> float:
        """(protocol - truth) / N for one component."""
        return (getattr(self.protocol, comp)(n) - getattr(self.truth, comp)(n)) / n

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for n in self.truth.counts:
            row: dict[str, Any] = {"workload": self.name, "n": n, "s_meas": self.truth.s_meas(n)}
            for c in COMPONENTS:
                row[f"{c}_truth"] = getattr(self.truth, c)(n)
                row[f"{c}_protocol"] = getattr(self.protocol, c)(n)
                row[f"{c}_err_pct"] = 100 * self.error(c, n)
            row["fetch_ratio"] = self.fetch_ratio[n]
            row["lost_share"] = self.lost_share[n]
            row["bus_share"] = self.bus_share[n]
            row["flagged"] = self.flagged[n]
            out.append(row)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rows": self.rows(), "truth": self.truth.to_dict(),
                "protocol": self.protocol.to_dict()}


def validate(workload: Workload, counts: Sequence[int], config: HwConfig | None = None, pirate_gap: int = 1,
             threshold: float = 0.01, order: str = "sawtooth") -> EklovSimValidation:
    """Run truth and protocol for every N of `counts` and assemble both stacks.

    References
    ----------
    Eklov et al. (seed 001) §3-§4; spec `eklov-speedup-stacks.md` §1-§2.
    """
    cfg = (config or HwConfig()).validate()
    ns = 1.0 / cfg.freq_ghz  # ns per cycle
    t1 = float(simulate(workload.make(1), cfg)[:, E.C_CYC].max()) * ns
    tp, tn, tm, pp, pn = {}, {}, {}, {}, {}
    ratio, lost, bus, flagged = {}, {}, {}, {}
    for n in counts:
        tr = workload.make(n)
        truth = truth_times(tr, cfg)
        real = measured_run(tr, cfg)
        iso = [isolated_run(tr, t, pirate_size(cfg.llc_bytes, n), cfg, pirate_gap, order) for t in range(n)]
        tp[n], tn[n], tm[n] = [truth["pirate"] * ns], [truth["nosync"] * ns], [real["meas"] * ns]
        pp[n], pn[n] = [max(r.t_prof_cycles for r in iso) * ns], [real["nosync"] * ns]
        ratio[n] = max(r.fetch_ratio for r in iso)
        lost[n] = max(r.lost_share for r in iso)
        bus[n] = max(r.bus_share for r in iso)
        flagged[n] = sum(not r.valid(threshold) for r in iso)
    return EklovSimValidation(
        name=workload.name,
        truth=EklovStack.from_runs([t1], tp, tn, tm),
        protocol=EklovStack.from_runs([t1], pp, pn, tm, discarded=flagged),
        fetch_ratio=ratio, lost_share=lost, bus_share=bus, flagged=flagged,
    )
