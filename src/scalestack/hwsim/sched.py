"""Progress-aware scheduling of multi-program mixes on fewer cores (thesis Sec. 7.2, spec 5a).

N programs share K < N cores in time slices. Round-robin gives equal slices; progress-aware
scheduling runs, at each slice, the K programs with the least estimated isolated-equivalent
progress (the highest slowdown), using the cycle-accounting counters. Fairness (Eyerman and
Eeckhout) = min_i progress_i / max_i progress_i, with progress_i = isolated-equivalent cycles /
elapsed wall cycles; reported from the estimates and from the ground truth (each program's
executed prefix replayed alone).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scalestack.hwsim import engine as E
from scalestack.hwsim.config import HwConfig
from scalestack.hwsim.traces import MemTrace
from scalestack.results import Result

POLICIES = {"round-robin": 0, "progress-aware": 1}


@dataclasses.dataclass(frozen=True)
class SchedResult(Result):
    """Per-program progress and the fairness of one time-shared run."""

    kind = "hwsim-schedule"
    policy: str
    cores: int
    slice_cycles: int
    names: tuple[str, ...]
    wall_cycles: float
    run_cycles: tuple[float, ...]
    isolated_est: tuple[float, ...]
    isolated_measured: tuple[float, ...]

    @property
    def progress(self) -> np.ndarray:
        return np.asarray(self.isolated_measured) / self.wall_cycles

    @property
    def fairness(self) -> float:
        """min/max of the true progress (1 = equal progress, 0 = a program starves)."""
        p = self.progress
        return float(p.min() / p.max()) if p.max() > 0 else 0.0

    @property
    def fairness_est(self) -> float:
        p = np.asarray(self.isolated_est)
        return float(p.min() / p.max()) if p.max() > 0 else 0.0

    def rows(self) -> list[dict[str, Any]]:
        return [{"program": n, "run_cycles": r, "isolated_est": e, "isolated_measured": m,
                 "progress": m / self.wall_cycles}
                for n, r, e, m in zip(self.names, self.run_cycles, self.isolated_est, self.isolated_measured, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        from scalestack.results import jsonable

        return jsonable({"policy": self.policy, "cores": self.cores, "slice_cycles": self.slice_cycles,
                         "wall_cycles": self.wall_cycles, "fairness": self.fairness,
                         "fairness_est": self.fairness_est, "programs": self.rows()})


def schedule(trace: MemTrace, cores: int, policy: str = "progress-aware", config: HwConfig | None = None,
             slice_cycles: int = 10_000_000) -> SchedResult:
    """Run every thread of `trace` (one program each) time-shared on `cores` cores.

    Parameters
    ----------
    trace : one single-threaded program per thread (see `mix`).
    cores : cores to share (fewer than programs).
    policy : "round-robin" or "progress-aware".
    config : the machine; slice_cycles : the time slice (5 ms at 2 GHz = 10 M cycles).

    Returns
    -------
    SchedResult

    References
    ----------
    Thesis Sec. 7.2; spec `thesis-methods.md` Sec. 5a.
    """
    from scalestack.errors import UserError
    from scalestack.hwsim.accounting import simulate
    from scalestack.hwsim.traces import from_arrays

    if policy not in POLICIES:
        raise UserError(f"unknown policy {policy!r}: use {' or '.join(POLICIES)}")
    if cores < 1 or slice_cycles < 1:
        raise UserError("cores and slice_cycles must be positive")
    cfg = (config or HwConfig()).validate()
    sel = np.arange(trace.threads, dtype=np.int64)
    out = E.simulate(cfg.params(), trace.offsets.astype(np.int64), trace.gaps, trace.addrs, trace.stores, sel,
                     np.array([slice_cycles, cores, POLICIES[policy]], np.int64))
    from scalestack.hwsim.accounting import estimate

    est = [estimate(out[k])["isolated"] for k in range(trace.threads)]
    iso = []
    for k in range(trace.threads):
        n_acc = int(out[k, E.C_ACC])
        if n_acc == 0:
            iso.append(0.0)
            continue
        a = trace.offsets[k]
        part = from_arrays([(trace.gaps[a:a + n_acc], trace.addrs[a:a + n_acc], trace.stores[a:a + n_acc])],
                           separate=False)
        iso.append(float(simulate(part, cfg)[0, E.C_CYC]))
    return SchedResult(policy=policy, cores=cores, slice_cycles=slice_cycles, names=trace.names,
                       wall_cycles=float(out[0, E.C_WALL]), run_cycles=tuple(float(x) for x in out[:, E.C_CYC]),
                       isolated_est=tuple(est), isolated_measured=tuple(iso))
