"""Per-thread cycle accounting: estimated isolated time from the counters, and its ground truth.

Estimates (thesis Sec. 6.2.1, spec Sec. 3):
- inter-thread miss penalty, extrapolated: sampled inter-miss penalty x LLC accesses / sampled
  accesses; interpolated: all-miss penalty x sampled inter misses / sampled misses;
- memory waiting (bus, bank, inter-thread row-buffer misses) on intra-thread misses, counted only
  while the miss blocks a full ROB, extrapolated from the sampled sets (eq. 6.3);
- positive interference: sampled inter-thread hits x LLC accesses / sampled accesses x the average
  LLC load-miss penalty;
- isolated estimate = cycles - negative + positive; error per eq. 6.5 against a replay alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scalestack.errors import UserError
from scalestack.hwsim import engine as E
from scalestack.hwsim.config import HwConfig
from scalestack.hwsim.traces import MemTrace
from scalestack.results import Result


@dataclasses.dataclass(frozen=True)
class ThreadAccount:
    name: str
    cycles: float
    instructions: int
    llc_accesses: int
    llc_misses: int
    inter_miss_penalty: float
    inter_miss_penalty_interp: float
    memory_wait: float
    positive: float
    isolated_est: float
    isolated_est_interp: float
    isolated_measured: float | None

    @property
    def error(self) -> float | None:
        """Eq. 6.5: (estimated isolated - measured isolated) / measured isolated."""
        if not self.isolated_measured:
            return None
        return (self.isolated_est - self.isolated_measured) / self.isolated_measured

    @property
    def error_interp(self) -> float | None:
        if not self.isolated_measured:
            return None
        return (self.isolated_est_interp - self.isolated_measured) / self.isolated_measured

    @property
    def interference(self) -> float | None:
        """Measured slowdown from sharing: (cycles - isolated) / isolated."""
        if not self.isolated_measured:
            return None
        return (self.cycles - self.isolated_measured) / self.isolated_measured


@dataclasses.dataclass(frozen=True)
class AccountingResult(Result):
    """Per-thread cycles, interference by cause and estimated isolated time for one run."""

    kind = "hwsim-accounting"
    config: dict[str, Any]
    threads: tuple[ThreadAccount, ...]
    counters: dict[str, tuple[float, ...]]

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for t in self.threads:
            d = dataclasses.asdict(t)
            d["error_pct"] = None if t.error is None else 100 * t.error
            d["error_interp_pct"] = None if t.error_interp is None else 100 * t.error_interp
            d["interference_pct"] = None if t.interference is None else 100 * t.interference
            out.append(d)
        return out

    def to_dict(self) -> dict[str, Any]:
        from scalestack.results import jsonable

        return jsonable({"config": self.config, "threads": self.rows(), "counters": self.counters})


def estimate(c: np.ndarray) -> dict[str, float]:
    """Isolated-time estimate from one core's counter vector (float64[NC])."""
    cyc = c[E.C_CYC]
    scale = c[E.C_LLCA] / c[E.C_SACC] if c[E.C_SACC] > 0 else 0.0
    inter = c[E.C_SINTERPEN] * scale
    smiss = c[E.C_SINTERM] + c[E.C_SINTRAM]
    interp = c[E.C_ALLPEN] * c[E.C_SINTERM] / smiss if smiss > 0 else 0.0
    wait = c[E.C_SINTRAWAIT] * scale
    # the penalty such a miss would have had in isolation: the measured load-miss stall minus the
    # interference already estimated in it (the raw average is inflated by the co-runners' traffic)
    avg_pen = max(c[E.C_LMSTALL] - inter - wait, 0.0) / c[E.C_LMISS] if c[E.C_LMISS] > 0 else 0.0
    pos = c[E.C_SINTERH] * scale * avg_pen
    return {
        "inter": inter, "interp": interp, "wait": wait, "positive": pos,
        "isolated": max(cyc - inter - wait + pos, 0.0),
        "isolated_interp": max(cyc - interp - wait + pos, 0.0),
    }


def simulate(trace: MemTrace, config: HwConfig | None = None, threads: np.ndarray | None = None) -> np.ndarray:
    """Raw counters, float64[threads, NC], of the given threads sharing the machine."""
    cfg = (config or HwConfig()).validate()
    sel = np.arange(trace.threads, dtype=np.int64) if threads is None else np.asarray(threads, np.int64)
    out = E.simulate(cfg.params(), trace.offsets.astype(np.int64), trace.gaps, sync_dense(trace), trace.stores,
                     sel, np.zeros(3, np.int64))
    if out.shape[0] and out[0, E.C_DEAD]:
        raise UserError("the threads deadlock: every unfinished thread waits on a lock or barrier that is never "
                        "released (check the trace's acquire/release pairs and that every thread reaches each barrier)")
    return out


def sync_dense(trace: MemTrace) -> np.ndarray:
    """Addresses with lock/barrier ids of sync events renumbered 0..K-1 (the kernel's table index)."""
    sync = trace.stores >= E.S_ACQUIRE
    if not sync.any():
        return trace.addrs
    addrs = trace.addrs.copy()
    _, inv = np.unique(addrs[sync], return_inverse=True)
    addrs[sync] = inv
    return addrs


def isolated_cycles(trace: MemTrace, config: HwConfig | None = None) -> np.ndarray:
    """Ground truth: each thread replayed alone on the same machine (same instructions)."""
    return np.array([simulate(trace, config, np.array([t]))[0, E.C_CYC] for t in range(trace.threads)])


def account(trace: MemTrace, config: HwConfig | None = None, ground_truth: bool = True) -> AccountingResult:
    """Run all threads together, estimate each one's isolated time, and (optionally) measure it.

    Parameters
    ----------
    trace : the per-thread access streams, one thread per core.
    config : the machine (thesis Table 6.2 defaults).
    ground_truth : also replay every thread alone to report the eq. 6.5 error.

    Returns
    -------
    AccountingResult

    References
    ----------
    Thesis Sec. 6.2.1-6.2.3; spec `thesis-methods.md` Sec. 3.
    """
    cfg = (config or HwConfig()).validate()
    cnt = simulate(trace, cfg)
    iso = isolated_cycles(trace, cfg) if ground_truth else None
    rows = []
    for t in range(trace.threads):
        e = estimate(cnt[t])
        rows.append(ThreadAccount(
            name=trace.names[t], cycles=float(cnt[t, E.C_CYC]), instructions=int(cnt[t, E.C_INS]),
            llc_accesses=int(cnt[t, E.C_LLCA]), llc_misses=int(cnt[t, E.C_LLCM]),
            inter_miss_penalty=e["inter"], inter_miss_penalty_interp=e["interp"], memory_wait=e["wait"],
            positive=e["positive"], isolated_est=e["isolated"], isolated_est_interp=e["isolated_interp"],
            isolated_measured=None if iso is None else float(iso[t]),
        ))
    counters = {name: tuple(float(x) for x in cnt[:, k]) for k, name in enumerate(E.COUNTERS)}
    return AccountingResult(config=cfg.to_dict(), threads=tuple(rows), counters=counters)
