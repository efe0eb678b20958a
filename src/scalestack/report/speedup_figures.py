"""Speedup stacks in the thesis's style: one bar per thread count, N high, the measured speedup at
the bottom, positive residual interference right above it, then the delimiters; and the speedup
curve against the ideal. Negative components (positive interference, superlinear effects) are
drawn hatched below zero, so the bars still show every term."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from scalestack.analysis.speedup import COMPONENTS, SpeedupStack  # noqa: E402
from scalestack.report.figures import ROLE_COLOURS  # noqa: E402

COLOURS = {"speedup": "#2b4c7e", "other": "#b8b8b8", "gc": ROLE_COLOURS["gc"], "seq": ROLE_COLOURS["main"],
           "sync": "#c44e52", "imb": "#e8a33d", "cont": "#8172b3"}
LABELS = {"speedup": "actual speedup", "other": "other (interference)", "gc": "garbage collection",
          "seq": "sequential part", "sync": "synchronization", "imb": "imbalance", "cont": "CPU contention"}
ORDER = ("speedup", "other", "gc", "seq", "sync", "imb", "cont")


def speedup_stacks(stacks: list[SpeedupStack], title: str = "Speedup stacks") -> Figure:
    fig, ax = plt.subplots(figsize=(1.4 + 1.1 * len(stacks), 4.2))
    for x, st in enumerate(stacks):
        up, down = 0.0, 0.0
        for key in ORDER:
            v = st.speedup if key == "speedup" else getattr(st, key)
            if v >= 0:
                ax.bar(x, v, bottom=up, width=0.6, color=COLOURS[key], edgecolor="white", linewidth=0.6)
                if v > 0.12 * max(st.n, 1):
                    ax.text(x, up + v / 2, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white")
                up += v
            else:
                ax.bar(x, v, bottom=down, width=0.6, color=COLOURS[key], hatch="//", edgecolor="black",
                       linewidth=0.4)
                down += v
        ax.plot([x - 0.35, x + 0.35], [st.n, st.n], color="black", linewidth=1)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(stacks)), [f"N={s.n}" for s in stacks])
    ax.set_ylabel("speedup (bar height = N)")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(facecolor=COLOURS[k], label=LABELS[k]) for k in ORDER], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def speedup_curve(stacks: list[SpeedupStack], title: str = "Speedup") -> Figure:
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    ns = [s.n for s in stacks]
    ax.plot(ns, ns, "--", color="#888888", label="ideal")
    ax.plot(ns, [s.speedup for s in stacks], "o-", color=COLOURS["speedup"], label="actual")
    ax.set_xlabel("threads (N)")
    ax.set_ylabel("speedup over the smallest N")
    ax.set_xticks(ns)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


assert set(ORDER) == {"speedup", *COMPONENTS}
