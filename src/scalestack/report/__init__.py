"""Reports: a list of sections, each rendered to the terminal, JSON, figures and one HTML page.

A section is built by one function and holds plain data: sentences, a table, named matplotlib
figures and a JSON dict. Renderers (`terminal`, `html`, and the JSON/figure writers here) know
nothing about analyses. A builder reads its analyses from a source (`report.source`): a Trace in
memory, or a stored trace read in time chunks; `source.trace` is the Trace itself, or None for a
stored one. To add an analysis to every report, register a builder::

    from scalestack.report import Section, register_section

    @register_section("speedup", order=40)
    def speedup_section(source, options):
        if source.trace is None:
            return None  # this analysis needs the rows in memory
        ...compute from source.trace...
        return Section("speedup", "Speedup stack", summary=[...], table=rows, columns=[...],
                       figures={"speedup": fig}, data=result.to_dict())

A builder returns None when its analysis does not apply to the trace.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from scalestack.fileio import atomic_write, output_dir
from scalestack.report.source import StoredTrace, WholeTrace
from scalestack.report.text import command_line, elide, short_command
from scalestack.results import jsonable
from scalestack.trace import State, Trace
from scalestack.trace.quality import counters


@dataclasses.dataclass
class ReportOptions:
    window: int | str | None = None
    group_by: Any = None
    active: str = "running"
    between: tuple[int, int] | None = None
    timeline: bool = True  # the interactive timeline in report.html


@dataclasses.dataclass
class Section:
    key: str
    title: str
    summary: list[str] = dataclasses.field(default_factory=list)
    table: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    columns: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (row key, header)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> matplotlib Figure
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    # spans the timeline offers to select: {"kind": "window"|"phase", "label", "t0_ns", "t1_ns", "tid"?}
    marks: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Report:
    title: str
    facts: dict[str, Any]
    warnings: list[str]
    sections: list[Section]
    full_title: str = ""  # the title before shortening (the whole command line), shown on hover
    timeline: dict[str, Any] | None = None  # the HTML page's interactive timeline (report.timeline)

    def to_dict(self) -> dict[str, Any]:
        out = {"title": self.title, "command_line": self.full_title or self.title, "facts": self.facts,
               "warnings": self.warnings,
               "sections": {s.key: {"title": s.title, "summary": s.summary, **s.data} for s in self.sections}}
        if self.timeline is not None:
            out["timeline"] = self.timeline["summary"]
        return jsonable(out)


_BUILDERS: list[tuple[int, str, Callable[[Trace, ReportOptions], Section | None]]] = []


def register_section(key: str, order: int = 50):
    """Decorator: add a section builder to every report, sorted by `order`."""
    def deco(fn: Callable[[Trace, ReportOptions], Section | None]):
        _BUILDERS[:] = [b for b in _BUILDERS if b[1] != key]
        _BUILDERS.append((order, key, fn))
        _BUILDERS.sort(key=lambda b: b[0])
        return fn
    return deco


def build_report(trace: Trace | WholeTrace | StoredTrace, options: ReportOptions | None = None,
                 title: str | None = None) -> Report:
    """Every registered section of a Trace (or of a source: `StoredTrace` reads a stored trace in
    time chunks), and the timeline."""
    from scalestack.report import sections  # noqa: F401  (registers the built-in sections)

    options = options or ReportOptions()
    if isinstance(trace, StoredTrace):
        if options.between is not None:
            raise ValueError("a stored trace is reported whole; load the part with --between instead")
        source = trace
    else:
        if isinstance(trace, WholeTrace):
            trace = trace.trace
        source = WholeTrace(trace.between(*options.between) if options.between is not None else trace)
    built = [s for _, _, fn in _BUILDERS if (s := fn(source, options)) is not None]
    full = title or _title(source)
    report = Report(short_command(full) if title is None else elide(title, 200), facts(source), source.warnings,
                    built, full_title=full)
    if options.timeline:
        report.timeline = source.timeline(options, [m for s in built for m in s.marks])
    return report


def _title(source) -> str:
    cmd = source.meta.get("command")
    return command_line(cmd) if cmd else str(source.meta.get("input", source.meta.get("workload", "trace")))


def facts(trace) -> dict[str, Any]:
    """The run's facts (source, command, counters...) of a Trace or a report source."""
    m = trace.meta
    keys = ("source", "command", "exit_status", "signal", "cores", "kernel", "perf_version", "collector",
            "recorded_at", "n_events", "lost_events", "chain_gaps_traced", "chain_gaps", "workload", "seed")
    out = {k: m[k] for k in keys if m.get(k) is not None}
    out["wall_ns"] = trace.wall_ns
    out["threads"] = len(trace.threads)
    out["counters"] = counters(m)
    return out


def state_rows(trace) -> list[dict[str, Any]]:
    """Each thread's time in each state (ms) of a Trace or a report source."""
    times = trace.time_in_states()
    th = trace.threads
    return [{"tid": int(th.tid[i]), "name": str(th.name[i]), "role": str(th.role[i]),
             **{f"{s.label}_ms": times[i, s] / 1e6 for s in State}} for i in range(len(th))]


def write_report(report: Report, out_dir: str) -> dict[str, str]:
    """report.html, report.json and every figure as PNG and SVG into out_dir; returns the paths."""
    from scalestack.report.figures import render
    from scalestack.report.html import render_html

    output_dir(out_dir, "the report directory")
    written: dict[str, str] = {}
    svgs: dict[str, str] = {}
    for section in report.sections:
        for name, fig in section.figures.items():
            png, svg = render_both(fig, render)
            for ext, data in (("png", png), ("svg", svg)):
                path = os.path.join(out_dir, f"{name}.{ext}")
                atomic_write(path, data)
                written[f"{name}.{ext}"] = path
            svgs[name] = svg.decode("utf-8")
    path = os.path.join(out_dir, "report.json")
    atomic_write(path, json.dumps(report.to_dict(), indent=2, allow_nan=False).encode())
    written["report.json"] = path
    path = os.path.join(out_dir, "report.html")
    atomic_write(path, render_html(report, svgs).encode("utf-8"))
    written["report.html"] = path
    return written


def render_both(fig, render) -> tuple[bytes, bytes]:
    """PNG and SVG of one figure (rendering closes it, so SVG is drawn first from a copy)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    return render(fig, "png"), buf.getvalue()
