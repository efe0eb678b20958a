"""Hardware speedup stacks drawn in the thesis's style (Fig. 3.10): one bar per stack, height N,
base speedup at the bottom (blue), positive interference on it (red; base + red = estimated
speedup), then the delimiters; the measured speedup as a black tick."""

from __future__ import annotations

from pathlib import Path

from scalestack.hwsim.stack import STACK_COMPONENTS, HwSpeedupStack, classify_stacks, render_tree
from scalestack.report import Report, Section, write_report

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


def stack_section(stacks: list[HwSpeedupStack]):
    """A report section (report.html, report.json, figures) for a set of hardware speedup stacks."""
    rows = [s.rows()[0] for s in stacks]
    errs = [abs(s.error) for s in stacks if s.error is not None]
    summary = [f"{len(stacks)} hardware speedup stacks (thesis eq. 3.8) from the simulated counters; "
               "the black tick is the speedup measured against the sequential run."]
    if errs:
        summary.append(f"average |S^ - S| / N: {100 * sum(errs) / len(errs):.1f}% (thesis 3.0-5.1% at 2-16 threads)")
    tree = classify_stacks(stacks)
    summary.append("classification (spec Sec. 4): " + render_tree(tree).replace("\n", " / "))
    cols = [("name", "stack"), ("n", "N"), ("speedup", "S"), ("estimated", "S^"), ("error_pct", "error %"),
            ("base", "base"), *[(c, c.replace("_", " ")) for c in STACK_COMPONENTS]]
    return Section("hwsim_stack", "Hardware speedup stacks (simulated)", summary=summary, table=rows,
                   columns=cols, figures={"hwsim_stacks": stacks_figure_obj(stacks)},
                   data={"stacks": rows, "tree": tree})


def write_stack_report(stacks: list[HwSpeedupStack], out_dir: str, freq_ghz: float = 2.0) -> dict[str, str]:
    """report.html/.json and the figures; wall time is the longest simulated parallel run."""
    facts = {"wall_ns": max(s.t_parallel for s in stacks) / freq_ghz, "threads": max(s.n for s in stacks),
             "source": "scalestack hwsim (simulated)"}
    rep = Report(title="Hardware speedup stacks", facts=facts, warnings=[],
                 sections=[stack_section(stacks)])
    return write_report(rep, out_dir)
