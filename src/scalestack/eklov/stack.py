"""The Eklov speedup stack: N = cache + memory + sync + measured speedup, from measured times.

Bottlenecks are added in the paper's fixed order (none -> +cache -> +memory -> +sync), so each
component is the gap between two neighbouring speedup curves:

    cache(N)  = N - S_pirate(N)        S_pirate = T(1) / T_prof(N)  (isolated, pirate of C(N-1)/N)
    memory(N) = S_pirate(N) - S_nosync(N)   S_nosync = T(1) / max_i(t_i - wait_i)  (real run, shim timing)
    sync(N)   = S_nosync(N) - S_meas(N)     S_meas = T(1) / T(N)   (real run, no shim)

Components are reported as measured, negative values included (measurement error is shown, not
hidden). Every time is given as its repeats; curves use the median, and each component carries the
range obtained by pairing the extreme repeats of the two curves it separates.
The multi-instance variant (N copies of a single-threaded program) uses normalized throughput
with fixed-work runs instead of speedup: Thr_pirate = N T_alone / T_pirate(C/N), Thr_meas = N T_alone /
mean_i T_i(N), and no sync component.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from scalestack.results import Result


def _median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float))) if len(values) else float("nan")


def _range(values: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return (float(a.min()), float(a.max())) if a.size else (float("nan"), float("nan"))


@dataclass(frozen=True)
class EklovStack(Result):
    """Speedup stack per thread (or instance) count.

    Attributes
    ----------
    counts : the N values, ascending.
    t1_ns : the repeats of the baseline T(1) (real one-thread run, or one instance alone).
    pirate_ns, nosync_ns, meas_ns : per N, the repeats of T_prof(N), T_nosync(N), T(N).
    mode : "threads" or "instances".
    discarded : per N, pirate segments (or runs) dropped because the pirate's self-check failed.
    warnings : what made this measurement less certain (the multi-instance result carries them here).
    """

    counts: tuple[int, ...]
    t1_ns: tuple[float, ...]
    pirate_ns: Mapping[int, tuple[float, ...]]
    nosync_ns: Mapping[int, tuple[float, ...]]
    meas_ns: Mapping[int, tuple[float, ...]]
    mode: str = "threads"
    discarded: Mapping[int, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    kind = "eklov_stack"

    @classmethod
    def from_runs(cls, t1_ns: Sequence[float], pirate_ns: Mapping[int, Sequence[float]],
                  nosync_ns: Mapping[int, Sequence[float]] | None, meas_ns: Mapping[int, Sequence[float]],
                  mode: str = "threads", discarded: Mapping[int, int] | None = None) -> EklovStack:
        """Build from repeats. `nosync_ns=None` means a program without synchronization (S_nosync = S_meas)."""
        counts = tuple(sorted(set(pirate_ns) | set(meas_ns)))
        missing = [n for n in counts if n not in pirate_ns or n not in meas_ns or (nosync_ns is not None and n not in nosync_ns)]
        if missing or not len(t1_ns):
            raise ValueError(f"every count needs T(1), pirate, no-sync and measured times; missing for {missing}")
        ns = nosync_ns if nosync_ns is not None else meas_ns
        stack = cls(counts=counts, t1_ns=tuple(float(t) for t in t1_ns),
                    pirate_ns={n: tuple(float(t) for t in pirate_ns[n]) for n in counts},
                    nosync_ns={n: tuple(float(t) for t in ns[n]) for n in counts},
                    meas_ns={n: tuple(float(t) for t in meas_ns[n]) for n in counts},
                    mode=mode, discarded=dict(discarded or {}))
        moved = stack.baseline_warning()  # derived from the repeats, so every stack built carries it
        return replace(stack, warnings=(moved,)) if moved else stack

    # speedup (or normalized throughput) curves, medians of the repeats
    def _curve(self, times: Mapping[int, tuple[float, ...]], n: int) -> float:
        t1 = _median(self.t1_ns)
        if self.mode == "instances":  # fixed work per instance: N copies done in T(N) instead of N T_alone
            return n * t1 / _median(times[n])
        return t1 / _median(times[n])

    def s_pirate(self, n: int) -> float:
        return self._curve(self.pirate_ns, n)

    def s_nosync(self, n: int) -> float:
        return self._curve(self.nosync_ns, n)

    def s_meas(self, n: int) -> float:
        return self._curve(self.meas_ns, n)

    def cache(self, n: int) -> float:
        return n - self.s_pirate(n)

    def memory(self, n: int) -> float:
        return self.s_pirate(n) - self.s_nosync(n)

    def sync(self, n: int) -> float:
        return self.s_nosync(n) - self.s_meas(n)

    def component_range(self, name: str, n: int) -> tuple[float, float]:
        """Lowest and highest value of a component over the repeats' extremes (its run-to-run spread)."""
        t1 = _median(self.t1_ns)
        scale = n * t1 if self.mode == "instances" else t1

        def speed(times):  # fastest and slowest repeat as speedups (high, low)
            lo, hi = _range(times[n])
            return scale / lo, scale / hi

        if name == "cache":
            hi_s, lo_s = speed(self.pirate_ns)
            return n - hi_s, n - lo_s
        upper, lower = {"memory": (self.pirate_ns, self.nosync_ns), "sync": (self.nosync_ns, self.meas_ns)}[name]
        u_hi, u_lo = speed(upper)
        l_hi, l_lo = speed(lower)
        return u_lo - l_hi, u_hi - l_lo

    def baseline_warning(self, limit: float = 1.25) -> str | None:
        """A sentence when the repeats of T(1) differ by more than `limit` (max / min): every curve
        divides by their median, so a baseline that moved makes every component uncertain, and the
        [min, max] spread (taken at the median T(1)) does not show it."""
        lo, hi = _range(self.t1_ns)
        if len(self.t1_ns) < 2 or not lo > 0 or hi / lo <= limit:
            return None
        what = "one instance alone" if self.mode == "instances" else "the one-thread run"
        return (f"the baseline T(1) ({what}) took {lo / 1e6:.1f} to {hi / 1e6:.1f} ms over {len(self.t1_ns)} repeats "
                f"({hi / lo:.2f}x): the machine's load or the cache it leaves the program changed between runs, and "
                "every speedup divides by T(1), so the components are that uncertain; repeat with more --repeat "
                "or on a quieter machine")

    def rows(self) -> list[dict]:
        out = []
        for n in self.counts:
            row = {"n": n, "perfect": float(n), "s_pirate": self.s_pirate(n), "s_nosync": self.s_nosync(n),
                   "s_meas": self.s_meas(n), "cache": self.cache(n), "memory": self.memory(n), "sync": self.sync(n)}
            for comp in ("cache", "memory", "sync"):
                row[f"{comp}_min"], row[f"{comp}_max"] = self.component_range(comp, n)
            row["discarded"] = int(self.discarded.get(n, 0))
            out.append(row)
        return out

    def to_dict(self) -> dict:
        return {"mode": self.mode, "t1_ns": list(self.t1_ns), "rows": self.rows(),
                "pirate_ns": {str(n): list(v) for n, v in self.pirate_ns.items()},
                "nosync_ns": {str(n): list(v) for n, v in self.nosync_ns.items()},
                "meas_ns": {str(n): list(v) for n, v in self.meas_ns.items()},
                "discarded": {str(n): int(k) for n, k in self.discarded.items()}, "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: Mapping) -> EklovStack:
        """The inverse of to_dict (the repeats are kept, so every row is recomputed, not trusted)."""
        def per_n(key):
            return {int(n): tuple(float(t) for t in v) for n, v in d[key].items()}

        stack = cls.from_runs(d["t1_ns"], per_n("pirate_ns"), per_n("nosync_ns"), per_n("meas_ns"),
                              mode=d.get("mode", "threads"),
                              discarded={int(n): int(k) for n, k in d.get("discarded", {}).items()})
        return replace(stack, warnings=tuple(str(w) for w in d["warnings"])) if "warnings" in d else stack


def pirate_size(llc_bytes: int, n: int) -> int:
    """Working set W that leaves the target C/N of the cache: C (N-1) / N (spec §2.3)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return llc_bytes * (n - 1) // n


def nosync_time(phase_ns: Sequence[float], wait_ns: Sequence[float]) -> float:
    """T_nosync = max_i (t_i - wait_i): each thread's phase time less its lock + barrier (+ join) waits."""
    t = np.asarray(phase_ns, dtype=float) - np.asarray(wait_ns, dtype=float)
    if t.size == 0:
        raise ValueError("no threads")
    return float(t.max())
