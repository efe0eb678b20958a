"""DVFS figures: predicted vs true run time across frequencies, and an energy-delay chart."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from scalestack.analysis import dvfs
from scalestack.analysis.power import F_MAX_GHZ, PowerModel, dvfs_states
from scalestack.report import figures

STYLE = {"M+CRIT": ("#999999", ":"), "COOP": ("#b07030", ":"), "DEP": ("#5080c0", "--"),
         "DEP+BURST per-epoch": ("#60a060", "--"), "DEP+BURST": ("#c03030", "-")}


def predicted_vs_true(ep: dvfs.Epochs, workload: dict | None = None, *, cores: int = 4, seed: int = 0,
                      clamp: bool = False, estimator: str | None = None) -> Figure:
    """Run time at 1-4 GHz (500 MHz steps) per predictor from one run, and the simulator's truth."""
    fs = dvfs_states(0.5)
    preds = [dvfs.predict(ep, float(f), clamp=clamp, estimator=estimator).predicted_ns for f in fs]
    fig, ax = figures.plt.subplots(figsize=(6, 4), layout="constrained")
    for m in preds[0]:
        c, ls = STYLE.get(m, ("#444444", "-"))
        ax.plot(fs, [p[m] / 1e6 for p in preds], ls, color=c, marker="o", ms=3, label=m)
    if workload is not None:
        from scalestack.sim.engine import simulate

        true = [simulate(workload, cores=cores, freq_ghz=float(f), seed=seed).runtime_ns / 1e6 for f in fs]
        ax.plot(fs, true, "k-", lw=2.5, alpha=0.35, label="true (simulator)")
    ax.axvline(ep.f_base_ghz, color="#888888", lw=0.8)
    ax.text(ep.f_base_ghz, ax.get_ylim()[1], " measured here", fontsize=7, va="top", color="#555555")
    ax.set_xlabel("clock frequency (GHz)")
    ax.set_ylabel("run time (ms)")
    ax.set_title(f"Predicted run time from one run at {ep.f_base_ghz:g} GHz", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    return fig


def energy_delay(ep: dvfs.Epochs, managed: list, *, cores: int = 4, quantum_ns: float = 5e6,
                 power: PowerModel | None = None) -> Figure:
    """Energy vs run time, both relative to f_max: each fixed frequency (DEP+BURST) and the manager."""
    from scalestack.analysis.dvfs_manager import quantum_table

    power = power or PowerModel()
    fs = dvfs_states(0.5)
    T, E, _ = quantum_table(ep, quantum_ns, fs, cores, power)
    t, e = T.sum(axis=0), E.sum(axis=0)
    ref = int(np.argmin(np.abs(fs - F_MAX_GHZ)))
    fig, ax = figures.plt.subplots(figsize=(5.5, 4), layout="constrained")
    ax.plot(t / t[ref], e / e[ref], "o-", color="#5080c0", ms=4, label="one fixed frequency (predicted)")
    for f, x, y in zip(fs, t / t[ref], e / e[ref], strict=True):
        ax.annotate(f"{f:g}", (x, y), textcoords="offset points", xytext=(4, 2), fontsize=7)
    for r in managed:
        ax.plot(1 + r.predicted_slowdown, 1 - r.predicted_saving, "s", color="#c03030", ms=6,
                label=f"manager, bound {100 * r.max_slowdown:g}% (predicted)")
        if r.true_ns is not None:
            ax.plot(1 + r.true_slowdown, 1 - r.true_saving, "D", mfc="none", color="#c03030", ms=7,
                    label=f"manager, bound {100 * r.max_slowdown:g}% (simulator)")
        ax.axvline(1 + r.max_slowdown, color="#c03030", lw=0.6, ls=":")
    ax.set_xlabel("run time relative to 4 GHz")
    ax.set_ylabel("energy relative to 4 GHz")
    ax.set_title("Energy-delay (labels: GHz)", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    return fig
