"""`scalestack classify DIR…`: the classification tree of a set of sweeps."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("dirs", nargs=-1, required=True)
def command(dirs):
    """Class (good/moderate/poor) at the largest thread count and the three largest delimiters."""
    from scalestack.analysis.classify import classify
    from scalestack.analysis.sweep import stacks
    from scalestack.collect.sweep import load_sweep

    tree: dict[str, list[str]] = {"good": [], "moderate": [], "poor": []}
    for d in dirs:
        st = stacks(load_sweep(d), load_sweep(d, "passive"))[-1]  # spin booked as SYNC when --omp-passive ran
        cls, top = classify(st)
        tree[cls].append(f"{Path(d).name}  (N={st.n}, S={st.speedup:.2f}): {', '.join(top) or '-'}")
    for cls, rows in tree.items():
        click.echo(cls)
        for row in rows:
            click.echo(f"  {row}")
