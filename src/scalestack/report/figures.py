"""Figures in the papers' conventions: criticality stack, bottle graph, bottle graphs over time.

Colours follow the thesis (ch. 5): the runtime's main thread turquoise, GC threads brown, the
JIT compiler dark green, other runtime service threads grey; application threads get distinct
colours. Boxes thinner than 0.5% of the run are not drawn (they are listed under the figure).
"""

from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from scalestack.analysis.bottle import BottleResult, WindowedBottleResult  # noqa: E402
from scalestack.analysis.criticality import CriticalityResult  # noqa: E402
from scalestack.errors import UserError  # noqa: E402
from scalestack.report.text import elide  # noqa: E402

ROLE_COLOURS = {"main": "#40c4c4", "gc": "#8b5a2b", "jit": "#1e6b30", "runtime": "#9a9a9a"}
APP_COLOURS = ["#4c72b0", "#dd8452", "#c44e52", "#8172b3", "#da8bc3", "#ccb974", "#64b5cd", "#55a868",
               "#e17c05", "#5f4690", "#cc503e", "#0f8554", "#994e95", "#1d6996", "#edad08", "#73af48"]
HIDE_BELOW = 0.005
# a thread's state, in the timeline of report.html (the waits in the speedup stack's colours)
STATE_COLOURS = {"running": "#55a868", "runnable": "#e8a33d", "sync_wait": "#c44e52", "io_wait": "#8172b3",
                 "sleep": "#c9d3e0", "unknown": "#eeeeee"}


def colours_for(labels: list[str], roles: list[str]) -> dict[str, str]:
    """A colour per label: role colours for runtime threads, distinct ones for the rest."""
    out, k = {}, 0
    for label, role in sorted(zip(labels, roles, strict=True)):  # the same colours in every figure
        if role in ROLE_COLOURS:
            out[label] = ROLE_COLOURS[role]
        else:
            out[label] = APP_COLOURS[k % len(APP_COLOURS)]
            k += 1
    return out


def criticality_stack(res: CriticalityResult, title: str = "Criticality stack") -> Figure:
    """One stacked bar of each thread's share of the run (%), most critical at the bottom."""
    fig, ax = plt.subplots(figsize=(3.6, 5.2), layout="constrained")
    order = res.order
    share = res.share * 100
    labels = [f"{res.names[i]} ({res.tids[i]})" for i in order]
    colours = colours_for(labels, [str(res.roles[i]) for i in order])
    bottom, hidden = 0.0, []
    for label, i in zip(labels, order, strict=True):
        if share[i] < HIDE_BELOW * 100:
            hidden.append(label)
            continue
        ax.bar([0], [share[i]], bottom=bottom, width=0.6, color=colours[label], edgecolor="white", linewidth=0.8,
               label=f"{elide(label, 30)}: {share[i]:.1f}%")
        if share[i] >= 4:
            ax.text(0, bottom + share[i] / 2, f"{share[i]:.0f}%", ha="center", va="center", fontsize=8, color="white")
        bottom += share[i]
    ax.set_xlim(-0.6, 0.6)
    ax.set_ylim(0, 100)
    ax.set_xticks([])
    ax.set_ylabel("share of run time (%)")
    ax.set_title(title, fontsize=10)
    handles, texts = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], texts[::-1], fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    _footnote(fig, hidden)
    return fig


def bottle_graph(res: BottleResult, title: str = "Bottle graph", ax=None) -> Figure:
    """Boxes centred on x = 0: height = criticality (s), width = parallelism, widest at the bottom."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    else:
        fig = ax.figure
    total = res.height_ns or 1.0
    colours = colours_for([b.label for b in res.boxes], [b.role for b in res.boxes])
    y, hidden, max_w = 0.0, [], 1.0
    for box in res.boxes:
        if box.height_ns / total < HIDE_BELOW:
            hidden.append(box.label)
            continue
        h, w = box.height_ns / 1e9, box.width
        ax.add_patch(Rectangle((-w / 2, y), w, h, facecolor=colours[box.label], edgecolor="black", linewidth=0.6,
                               label=f"{elide(box.label, 30)}  (P={w:.2f})"))
        if own and h / (total / 1e9) > 0.06:
            ax.text(0, y + h / 2, box.label if len(box.label) < 24 else box.label[:22] + "…", ha="center",
                    va="center", fontsize=7, color="white")
        y += h
        max_w = max(max_w, w)
    lim = max_w / 2 * 1.1
    ax.set_xlim(-lim, lim)
    ax.set_ylim(0, max(y, 1e-9) * 1.04)
    # a box reaching x = ±p/2 has parallelism p: the ticks are labelled with p on both sides
    ticks = parallelism_ticks(max_w)
    ax.set_xticks([-t / 2 for t in ticks[::-1]] + [0] + [t / 2 for t in ticks])
    ax.set_xticklabels([_tick(t) for t in ticks[::-1]] + ["0"] + [_tick(t) for t in ticks], fontsize=7)
    ax.axvline(0, color="#cccccc", linewidth=0.5, zorder=0)
    if own:
        ax.set_xlabel("box width = parallelism: threads running at once while this box's thread ran")
        ax.set_ylabel("box height = criticality: its share of the run (s)")
        ax.set_title(title, fontsize=10)
        handles, texts = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], texts[::-1], fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
        _footnote(fig, hidden)
    return fig


def parallelism_ticks(max_w: float) -> list[float]:
    """Tick values 0 < p <= max_w for the bottle graph's width axis: a 1-2-5 step giving 1 to 4
    ticks per side, so a graph whose widest box has parallelism 1.3 reads 0.5, 1 (not one lone 1
    mirrored on both sides, which reads "1 ... 1")."""
    for step in [0.25, 0.5] + [m * 10**e for e in range(0, 9) for m in (1, 2, 5)]:
        n = int(np.floor(max_w / step + 1e-9))
        if n <= 4:
            break
    return [round(step * k, 4) for k in range(1, max(n, 1) + 1)]


def _tick(t: float) -> str:
    return f"{t:g}"


def bottle_strip(res: WindowedBottleResult, title: str = "Bottle graphs over time") -> Figure:
    """One small bottle graph per window, side by side along a time axis."""
    n = len(res.windows)
    shown = res.windows if n <= 40 else res.windows[:: -(-n // 40)]
    fig, axes = plt.subplots(1, len(shown), figsize=(max(6.4, 0.9 * len(shown)), 4.2), sharey=True,
                             layout="constrained", squeeze=False)
    height: dict[str, float] = {}
    role_of: dict[str, str] = {}
    for w in res.windows:
        for b in w.boxes:
            height[b.label] = height.get(b.label, 0.0) + b.height_ns
            role_of[b.label] = b.role
    colours = colours_for(list(height), [role_of[k] for k in height])
    total = sum(height.values()) or 1.0
    labels = [k for k in sorted(height, key=height.get, reverse=True) if height[k] / total >= HIDE_BELOW]
    top = max((w.height_ns for w in shown), default=1.0) / 1e9
    t0 = res.windows[0].t0_ns if res.windows else 0
    for ax, w in zip(axes[0], shown, strict=True):
        y = 0.0
        max_w = max([b.width for b in w.boxes if b.height_ns > 0] + [1.0])
        for b in w.boxes:
            if b.height_ns <= 0:
                continue
            h = b.height_ns / 1e9
            ax.add_patch(Rectangle((-b.width / 2, y), b.width, h, facecolor=colours[b.label], edgecolor="black",
                                   linewidth=0.3))
            y += h
        ax.set_xlim(-max_w / 2 * 1.1, max_w / 2 * 1.1)
        ax.set_ylim(0, top * 1.05 if top > 0 else 1)
        ax.set_xticks([])
        ax.set_xlabel(f"{(w.t0_ns - t0) / 1e9:.2f}s", fontsize=6)
        ax.tick_params(axis="y", labelsize=6)
    axes[0][0].set_ylabel("criticality per window (s)")
    handles = [Rectangle((0, 0), 1, 1, facecolor=colours[lb]) for lb in labels[:16]]
    fig.legend(handles, [elide(lb, 30) for lb in labels[:16]], fontsize=6, loc="outside right upper", frameon=False)
    fig.suptitle(f"{title} (window {res.window_ns / 1e6:g} ms)", fontsize=10)
    return fig


# The figure of each result type, by the result's `kind` (what `-o x.png` draws): a command
# needs no `if kind == ...` of its own, and a new analysis registers its figure here.
FIGURES: dict[str, Callable[..., Figure]] = {
    "criticality": criticality_stack,
    "bottle": bottle_graph,
    "bottle-windows": bottle_strip,
}


def figure_of(res, kind: str) -> Figure:
    """The figure of `res`: by its own `kind` attribute where it has one (a windowed bottle graph),
    else by the `kind` the caller names."""
    draw = FIGURES.get(getattr(res, "kind", "") or kind) or FIGURES.get(kind)
    if draw is None:
        raise UserError(f"{kind} has no figure; write .json instead")
    return draw(res)


def _footnote(fig: Figure, hidden: list[str]) -> None:
    if hidden:
        text = "not drawn (< 0.5%): " + ", ".join(hidden[:8]) + (f" and {len(hidden) - 8} more" if len(hidden) > 8 else "")
        fig.text(0.01, -0.01, text, fontsize=6, color="#555555", ha="left", va="top")


def render(fig: Figure, fmt: str) -> bytes:
    """The figure as PNG or SVG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
