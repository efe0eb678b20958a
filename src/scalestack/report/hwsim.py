"""Hardware speedup stacks drawn in the thesis's style (Fig. 3.10): one bar per stack, height N,
base speedup at the bottom (blue), positive interference on it (red; base + red = estimated
speedup), then the delimiters; the measured speedup as a black tick."""

from __future__ import annotations

from pathlib import Path

from scalestack.hwsim.stack import STACK_COMPONENTS, HwSpeedupStack

COLOURS = {"base": "#1f4e9c", "positive": "#c0392b", "net_negative_llc": "#2e8b57", "memory": "#e6a100",
           "spinning": "#7b3fa0", "yielding": "#8c8c8c", "imbalance": "#40b0c0"}


def stacks_figure_obj(stacks: list[HwSpeedupStack], title: str = "Hardware speedup stacks (eq. 3.8)"):
    from scalestack.report.figures import plt

    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(stacks) + 2), 4))
    for x, s in enumerate(stacks):
        bottom = 0.0
        for c in ("base", *STACK_COMPONENTS):
            v = max(getattr(s, c), 0.0)
            ax.bar(x, v, bottom=bottom, color=COLOURS[c], width=0.7, label=c.replace("_", " ") if x == 0 else None)
            bottom += v
        if s.speedup is not None:
            ax.plot([x - 0.4, x + 0.4], [s.speedup, s.speedup], color="black", lw=2,
                    label="measured speedup" if x == 0 else None)
    ax.set_xticks(range(len(stacks)), [s.name for s in stacks], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("speedup units (stack height = N)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def stacks_figure(stacks: list[HwSpeedupStack], path: str | Path) -> None:
    """Write the figure; the format follows the suffix (.png or .svg), atomically."""
    from scalestack.fileio import atomic_write
    from scalestack.report.figures import render

    fmt = Path(path).suffix.lstrip(".").lower()
    if fmt not in ("png", "svg"):
        from scalestack.errors import UserError

        raise UserError(f"cannot tell the figure format of {path}: use .png, .svg or .json")
    atomic_write(path, render(stacks_figure_obj(stacks), fmt))
