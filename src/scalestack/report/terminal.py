"""The report in the terminal: facts, warnings, and each section's sentences and table (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scalestack.report import Report, Section
from scalestack.report.text import elide, is_text_column
from scalestack.units import format_ns


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "–" if value is None else str(value)


def section_table(section: Section, limit: int = 40) -> Table:
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for key, head in section.columns:
        # prose (the advice's findings and evidence) wraps; a cut sentence would lose the advice
        prose = any(isinstance(row.get(key), str) and len(row[key]) > 40 for row in section.table[:limit])
        table.add_column(head, justify="left" if is_text_column(key, section.table[:limit]) else "right",
                         no_wrap=not prose)
    for row in section.table[:limit]:
        table.add_row(*[_fmt(row.get(k)) for k, _ in section.columns])
    if len(section.table) > limit:
        table.caption = f"{len(section.table) - limit} more rows in report.json"
    return table


def print_report(report: Report, console: Console | None = None, sections: list[str] | None = None) -> None:
    console = console or Console(width=max(Console().width, 110))
    f = report.facts
    console.print(f"[bold]{escape(elide(report.title, 100))}[/]  wall {format_ns(f['wall_ns'])}, {f['threads']} threads"
                  + (f", {f['cores']} cores" if "cores" in f else ""))
    if f.get("counters"):
        console.print(" · ".join(f"{c['label']} {c['text']}" for c in f["counters"]))
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    for s in report.sections:
        if sections is not None and s.key not in sections:
            continue
        console.print(f"\n[bold underline]{s.title}[/]")
        for line in s.summary:
            console.print(line)
        if s.table and s.columns:
            console.print(section_table(s))
