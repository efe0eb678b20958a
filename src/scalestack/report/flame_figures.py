"""The criticality-weighted flame graph of the "Critical functions" section: one box per function
on a call path, its width the criticality of the samples under it, callers below their callees'
row (root at the bottom, as flamegraph.pl draws), drawn with matplotlib into the self-contained
report (no external scripts)."""

from __future__ import annotations

import hashlib

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from scalestack.report.text import elide

MAX_DEPTH = 40


def flame_boxes(paths: dict[str, float]) -> list[tuple[int, float, float, str]]:
    """(depth, x0, width, function) of every box: paths sorted so that equal prefixes are adjacent,
    adjacent equal prefixes at one depth merged into one box."""
    boxes: list[list] = []
    open_at: dict[int, list] = {}  # depth -> the box still growing there
    x = 0.0
    for path, w in sorted(paths.items()):
        if w <= 0:
            continue
        frames = path.split(";")[:MAX_DEPTH]
        for d, fn in enumerate(frames):
            box = open_at.get(d)
            same_prefix = box is not None and box[4] == tuple(frames[:d + 1]) and abs(box[1] + box[2] - x) < 1e-6
            if same_prefix:
                box[2] += w
            else:
                box = [d, x, w, fn, tuple(frames[:d + 1])]
                boxes.append(box)
                open_at[d] = box
        for d in [k for k in open_at if k >= len(frames)]:
            del open_at[d]
        x += w
    return [(b[0], b[1], b[2], b[3]) for b in boxes]


def _colour(name: str) -> tuple[float, float, float]:
    h = int(hashlib.md5(name.encode()).hexdigest()[:6], 16)
    return (0.85 + 0.15 * ((h & 0xFF) / 255), 0.35 + 0.45 * (((h >> 8) & 0xFF) / 255), 0.1 + 0.2 * ((h >> 16) / 255))


def flame_graph(paths: dict[str, float], title: str = "Critical functions (criticality-weighted)") -> Figure:
    boxes = flame_boxes(paths)
    total = sum(w for w in paths.values() if w > 0) or 1.0
    depth = max((b[0] for b in boxes), default=0) + 1
    fig = Figure(figsize=(10, 0.9 + 0.24 * depth), layout="constrained")
    ax = fig.add_subplot()
    for d, x0, w, fn in boxes:
        ax.add_patch(Rectangle((x0 / total, d), w / total, 0.92, facecolor=_colour(fn), edgecolor="white",
                               linewidth=0.3))
        if w / total > 0.04:
            chars = max(int(w / total * 140), 4)
            ax.text((x0 + w / 2) / total, d + 0.46, elide(fn, chars), ha="center", va="center", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, depth)
    ax.set_yticks([])
    ax.set_xlabel("share of the run's criticality")
    ax.set_title(title, fontsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return fig
