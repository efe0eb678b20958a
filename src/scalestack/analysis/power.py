"""Voltage/frequency states and a CMOS power model, shared by DVFS prediction and boosting.

Both the DEP+BURST energy manager (spec dep-burst.md §3) and the thesis's critical-thread
boosting (thesis-methods.md §5c) need the energy of a run at other frequencies. The papers
used McPAT; we use the textbook model behind it, with the spec's voltage curve:

* V(f) = 0.11 · f[GHz] + 0.63 (1 GHz → 0.74 V, 4 GHz → 1.07 V), states 1–4 GHz in 125 MHz steps;
* dynamic power of a busy core ∝ V² · f (for a fixed amount of work, energy ∝ V²);
* static (leakage) power of every core, busy or idle, ∝ V (Butts & Sohi), for the whole run.

The absolute watts are our assumption (a 22 nm out-of-order core at 4 GHz: 4 W dynamic,
1.5 W leakage); results are reported normalised to a reference run, where they cancel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

F_MIN_GHZ = 1.0
F_MAX_GHZ = 4.0
F_STEP_GHZ = 0.125
TRANSITION_NS = 2_000  # one DVFS transition (spec §3.1)


def voltage(f_ghz: float | np.ndarray) -> float | np.ndarray:
    """Supply voltage at frequency f (GHz), the spec's linear fit."""
    return 0.11 * f_ghz + 0.63


def dvfs_states(step_ghz: float = F_STEP_GHZ, lo: float = F_MIN_GHZ, hi: float = F_MAX_GHZ) -> np.ndarray:
    """The available frequencies (GHz), lowest first: 25 states at 125 MHz, 7 at 500 MHz."""
    n = int(round((hi - lo) / step_ghz))
    return lo + step_ghz * np.arange(n + 1)


@dataclasses.dataclass(frozen=True)
class PowerModel:
    """Per-core power at a reference point, scaled to other (V, f) by the CMOS laws above."""

    dynamic_w: float = 4.0  # one busy core at ref_ghz
    static_w: float = 1.5  # leakage of one core at V(ref_ghz)
    ref_ghz: float = F_MAX_GHZ

    def dynamic_power(self, f_ghz: float) -> float:
        """Watts drawn by one busy core at f (∝ V² f)."""
        v, v0 = voltage(f_ghz), voltage(self.ref_ghz)
        return self.dynamic_w * (v / v0) ** 2 * (f_ghz / self.ref_ghz)

    def static_power(self, f_ghz: float) -> float:
        """Leakage watts of one core whose supply is set for f (∝ V)."""
        return self.static_w * voltage(f_ghz) / voltage(self.ref_ghz)

    def energy_j(self, busy_ns: Mapping[float, float], wall_ns: float, cores: int,
                 idle_ghz: float | None = None) -> float:
        """Energy of a run: busy core-time per frequency ({GHz: ns}) plus every core's leakage.

        Leakage is charged for `cores` cores over `wall_ns`: at each busy frequency for the time
        spent there, and at `idle_ghz` (default: the lowest frequency used) for the idle rest.
        """
        dyn = sum(self.dynamic_power(f) * t for f, t in busy_ns.items())
        busy_total = sum(busy_ns.values())
        idle = max(cores * wall_ns - busy_total, 0.0)
        f_idle = idle_ghz if idle_ghz is not None else (min(busy_ns) if busy_ns else self.ref_ghz)
        stat = sum(self.static_power(f) * t for f, t in busy_ns.items()) + self.static_power(f_idle) * idle
        return (dyn + stat) * 1e-9
