"""Phase figures: a timeline lane per thread coloured by phase (the paper's thread execution
reconstruction), a bottle graph per phase, and the speedup of each phase across thread counts."""

from __future__ import annotations

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from scalestack.analysis.phases import PhaseResult  # noqa: E402

PHASE_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
                 "#ccb974", "#64b5cd", "#1d6996", "#edad08"]


def phase_colour(phase: int) -> str:
    return PHASE_COLOURS[(phase - 1) % len(PHASE_COLOURS)]


def phase_timeline(res: PhaseResult) -> Figure:
    """One lane per thread and run; each interval drawn in its phase's colour, gaps white (idle)."""
    iv = res.intervals
    lanes = []
    for r, info in enumerate(res.runs):
        for tid in np.unique(iv["tid"][iv["run"] == r]):
            lanes.append((r, int(tid), f"{info['label']} {tid}" if len(res.runs) > 1 else str(tid)))
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(lanes)), layout="constrained")
    t0 = {r: float(iv["t_start_ns"][iv["run"] == r].min()) for r in range(len(res.runs)) if np.any(iv["run"] == r)}
    for y, (r, tid, _) in enumerate(lanes):
        m = (iv["run"] == r) & (iv["tid"] == tid)
        a = (iv["t_start_ns"][m] - t0[r]) / 1e9
        w = (iv["t_end_ns"][m] - iv["t_start_ns"][m]) / 1e9
        cols = [phase_colour(int(p)) for p in iv["phase"][m]]
        ax.broken_barh(list(zip(a, w, strict=True)), (y - 0.4, 0.8), facecolors=cols, linewidth=0)
    ax.set_yticks(range(len(lanes)), [lab for *_, lab in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first sample (s)")
    ax.set_title("Phases per thread (white: no samples, the thread did not run)")
    ax.legend(handles=[Patch(color=phase_colour(c), label=f"phase {c}") for c in range(1, res.k + 1)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return fig


def phase_bottles(res: PhaseResult, run: str | None = None, min_share: float = 0.01) -> Figure:
    """A bottle graph per phase: box per thread, height = its criticality in the phase (s),
    width = its parallelism there; widest at the bottom. Phases under `min_share` of the time
    are left out (named in the title)."""
    run = run or res.runs[-1]["label"]
    boxes = [b for b in res.boxes if b["run"] == run]
    heights = {c: sum(b["height_ns"] for b in boxes if b["phase"] == c) for c in range(1, res.k + 1)}
    total = sum(heights.values()) or 1.0
    shown = [c for c in heights if heights[c] / total >= min_share] or list(heights)
    hidden = [c for c in heights if c not in shown]
    fig, axes = plt.subplots(1, len(shown), figsize=(2.2 * len(shown) + 0.6, 3.6), layout="constrained",
                             squeeze=False)
    top = max(heights.values(), default=0) / 1e9
    wmax = max((b["width"] for b in boxes), default=1.0)
    for ax, c in zip(axes[0], shown, strict=True):
        y = 0.0
        for j, b in enumerate(sorted((b for b in boxes if b["phase"] == c), key=lambda b: -b["width"])):
            h, w = b["height_ns"] / 1e9, b["width"]
            ax.add_patch(Rectangle((0, y), w, h, facecolor=phase_colour(c), alpha=0.45 + 0.5 * (j % 2),
                                   edgecolor="white"))
            if h > 0.04 * max(top, 1e-12):
                ax.text(w / 2, y + h / 2, str(b["tid"]), ha="center", va="center", fontsize=7)
            y += h
        ax.set_xlim(0, max(np.ceil(wmax), 1.0))
        ax.set_ylim(0, max(top, 1e-9) * 1.05)
        ax.set_xticks(np.arange(0, max(np.ceil(wmax), 1.0) + 1))
        ax.set_title(f"phase {c} ({heights[c] / total * 100:.0f}%)", fontsize=9)
        ax.set_xlabel("parallelism", fontsize=8)
    axes[0, 0].set_ylabel("criticality in the phase (s)")
    note = f"; phases under {min_share * 100:.0f}% not drawn: {', '.join(map(str, hidden))}" if hidden else ""
    fig.suptitle(f"Bottle graph per phase ({run}){note}", fontsize=10)
    return fig


def phase_speedups(res: PhaseResult) -> Figure | None:
    """Per-phase speedup over the run with the fewest threads, against thread count (>= 2 runs)."""
    if len(res.runs) < 2:
        return None
    fig, ax = plt.subplots(figsize=(4.8, 3.6), layout="constrained")
    n = [ri["n_threads"] for ri in res.runs]
    for c in range(1, res.k + 1):
        pts = sorted((r["n_threads"], r["speedup"]) for r in res.phases if r["phase"] == c and r["speedup"])
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", color=phase_colour(c), label=f"phase {c}")
    lim = [min(n), max(n)]
    ax.plot(lim, [1, max(n) / min(n)], ls=":", color="grey", label="linear")
    ax.set_xticks(sorted(set(n)))
    ax.set_xlabel("threads")
    ax.set_ylabel(f"speedup over {min(n)} thread(s)")
    ax.set_title("Speedup per phase")
    ax.legend(fontsize=8, frameon=False)
    return fig
