"""The report in the terminal: facts, warnings, and each section's sentences and table (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from scalestack.report import Report, Section
from scalestack.report.text import elide, is_text_column
from scalestack.units import format_ns


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "–" if value is None else str(value)


def section_table(section: Section, limit: int = 40, more: str = "in report.json") -> Table:
    """A section's rows as a table that fits the console: text columns wrap where it is too
    narrow, number columns keep their width (a cut number, "11…", would lose the figure)."""
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    rows = section.table[:limit]
    for key, head in section.columns:
        if is_text_column(key, rows):  # as narrow as its longest word (up to 10), or the table's room
            word = max([len(w) for row in rows for w in _fmt(row.get(key)).split()] + [1])
            table.add_column(head, justify="left", overflow="fold", min_width=min(word, 10))
        else:
            width = max([len(_fmt(row.get(key))) for row in rows] + [max(map(len, head.split()), default=0)])
            table.add_column(head, justify="right", min_width=width)  # the header may wrap, the figures never
    for row in rows:
        # Text, not markup: a stripped binary's frame, [libz.so.1+0x4a08], or a C++ name's [abi:cxx11]
        # would read as a style tag and vanish
        table.add_row(*[Text(_fmt(row.get(k))) for k, _ in section.columns])
    if len(section.table) > limit:
        table.caption = f"{len(section.table) - limit} more rows {more}"
    return table


def print_report(report: Report, console: Console | None = None, sections: list[str] | None = None) -> None:
    console = console or Console(width=max(Console().width, 110))
    f = report.facts
    console.print(f"[bold]{escape(elide(report.title, 100))}[/]  wall {format_ns(f['wall_ns'])}, {f['threads']} threads"
                  + (f", {f['cores']} cores" if "cores" in f else ""))
    if f.get("counters"):
        console.print(" · ".join(f"{c['label']} {c['text']}" for c in f["counters"]))
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    for s in report.sections:
        if sections is not None and s.key not in sections:
            continue
        console.print(f"\n[bold underline]{s.title}[/]")
        for line in s.summary:
            console.print(line, markup=False)
        if s.table and s.columns:
            console.print(section_table(s))
