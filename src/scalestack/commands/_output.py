"""Print an analysis result, or write it as a figure or JSON chosen by the file's extension."""

from __future__ import annotations

import os

import click

from scalestack.errors import UserError


def emit(res, as_json: bool, output: str | None, kind: str) -> None:
    from scalestack.fileio import atomic_write

    if output:
        ext = os.path.splitext(output)[1].lower().lstrip(".")
        if ext == "json":
            atomic_write(output, res.to_json().encode())
        elif ext in ("png", "svg", "pdf"):
            from scalestack.report import figures

            atomic_write(output, figures.render(figures.figure_of(res, kind), ext))
        else:
            raise UserError(f"cannot tell the format of {output}: use .png, .svg, .pdf or .json")
        click.echo(f"scalestack: wrote {output}", err=True)
        return
    if as_json:
        click.echo(res.to_json())
        return
    from rich.console import Console

    from scalestack.report import Section
    from scalestack.report.terminal import section_table

    rows = res.rows()
    if not rows:
        click.echo("no threads")
        return
    from scalestack.units import format_ns

    first = min((r["window_start_ns"] for r in rows if "window_start_ns" in r), default=0)
    for r in rows:  # durations read better with their unit; a window's start, from the first one's
        if "window_start_ns" in r:
            r["window_start_ns"] -= first
        for k in [k for k in r if k.endswith("_ns")]:
            r[k[:-3]] = format_ns(r.pop(k))
    cols = [(k, k.replace("_", " ")) for k in rows[0]]
    Console(width=max(Console().width, 110)).print(section_table(Section(kind, kind, table=rows, columns=cols),
                                                                 more="(all of them: --json)"))
