"""Figures of the Eklov speedup stack, as in the paper: the four speedup curves (perfect, pirate,
no-sync, measured) against N, and one bar per N, N high, stacked measured + sync + memory + cache.
Negative components (measurement error, or a superlinear effect) are drawn hatched below zero."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# memory is not purple: the speedup stacks beside these in a sweep report use purple for CPU contention
COLOURS = {"s_meas": "#2b4c7e", "sync": "#c44e52", "memory": "#da8bc3", "cache": "#55a868"}
LABELS = {"s_meas": "measured speedup", "sync": "synchronization", "memory": "memory", "cache": "cache"}
ORDER = ("s_meas", "sync", "memory", "cache")
CURVES = (("perfect", "perfect", "--", "#888888"), ("s_pirate", "pirate (cache only)", "o-", COLOURS["cache"]),
          ("s_nosync", "no sync (cache + memory)", "s-", COLOURS["memory"]),
          ("s_meas", "measured", "^-", COLOURS["s_meas"]))


def eklov_curves(rows: list[dict], title: str = "Speedup curves") -> Figure:
    fig, ax = plt.subplots(figsize=(4.4, 3.4))
    ns = [r["n"] for r in rows]
    for key, label, style, colour in CURVES:
        ax.plot(ns, [r[key] for r in rows], style, color=colour, label=label, markersize=4)
    ax.set_xlabel("threads (N)")
    ax.set_ylabel("speedup over one thread")
    ax.set_xticks(ns)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def eklov_stacks(rows: list[dict], title: str = "Speedup stacks") -> Figure:
    fig, ax = plt.subplots(figsize=(1.6 + 1.1 * len(rows), 4.2))
    for x, r in enumerate(rows):
        up, down = 0.0, 0.0
        for key in ORDER:
            v = r[key]
            if v >= 0:
                ax.bar(x, v, bottom=up, width=0.6, color=COLOURS[key], edgecolor="white", linewidth=0.6)
                if v > 0.08 * max(r["n"], 1):
                    ax.text(x, up + v / 2, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white")
                up += v
            else:
                ax.bar(x, v, bottom=down, width=0.6, color=COLOURS[key], hatch="//", edgecolor="black", linewidth=0.4)
                down += v
        ax.plot([x - 0.35, x + 0.35], [r["n"], r["n"]], color="black", linewidth=1)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(rows)), [f"N={r['n']}" for r in rows])
    ax.set_ylabel("speedup (bar height = N)")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(facecolor=COLOURS[k], label=LABELS[k]) for k in reversed(ORDER)], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.spines[["top", "right"]].set_visible(False)
    return fig
