"""One self-contained HTML page: figures inlined as SVG, tables, facts and warnings.

No script, font or style is fetched from anywhere, so the page opens from an e-mail
attachment or an issue with no network.
"""

from __future__ import annotations

import html
import re

from scalestack.report import Report
from scalestack.report.text import elide, is_text_column
from scalestack.units import format_ns

NAME_CELL = 40  # names longer than this (imported traces) are cut; the whole name is on hover

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
.facts{color:#555;display:flex;flex-wrap:wrap;gap:0 1.4em} .facts span{white-space:nowrap}
.facts .data-loss b{color:#b35900} .facts .inconsistent b{color:#b00020}
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:.4em .8em;margin:.3em 0}
h1 code{font-size:.9em;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.8em 0;font-size:13px} th,td{padding:.25em .7em;border-bottom:1px solid #eee;text-align:right;vertical-align:top}
th{background:#f6f6f6} td.t,th.t{text-align:left} td.t{max-width:42em;overflow-wrap:anywhere}
h2.evidence{margin-top:2.5em;font-size:1.3em;border-bottom:2px solid #ccc}
figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top} figure svg{max-width:100%;height:auto}
figcaption{font-size:12px;color:#666}
"""


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.1f}"
    if value is None:
        return "–"
    return html.escape(str(value))


def _svg(svg: str) -> str:
    """Inline SVG: drop the XML prolog and DOCTYPE, keep the drawing."""
    svg = re.sub(r"<\?xml[^>]*\?>", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>", "", svg, flags=re.S)
    return svg.strip()


def _table(s) -> str:
    text = {k for k, _ in s.columns if is_text_column(k, s.table)}
    head = "".join(f"<th class='{'t' if k in text else ''}'>{html.escape(h)}</th>" for k, h in s.columns)
    body = []
    for row in s.table:
        cells = []
        for k, _ in s.columns:
            v = row.get(k)
            if k in text and isinstance(v, str) and k in ("name", "label", "role") and len(v) > NAME_CELL:
                cells.append(f"<td class='t' title='{html.escape(v)}'>{html.escape(elide(v, NAME_CELL))}</td>")
            else:
                cells.append(f"<td class='{'t' if k in text else ''}'>{_cell(v)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _section(s, svgs: dict[str, str]) -> str:
    parts = [f"<section id='{html.escape(s.key)}'><h2>{html.escape(s.title)}</h2>"]
    for line in s.summary:
        parts.append(f"<p>{html.escape(line)}</p>")
    for name in s.figures:
        if name in svgs:
            parts.append(f"<figure>{_svg(svgs[name])}<figcaption>{html.escape(name)}.svg / .png</figcaption></figure>")
    if s.table and s.columns:
        parts.append(_table(s))
    parts.append("</section>")
    return "\n".join(parts)


def render_html(report: Report, svgs: dict[str, str]) -> str:
    """The page: title and facts, warnings, the advice, the timeline, then the evidence."""
    f = report.facts
    facts = []
    for key, label in (("source", "source"), ("collector", "collector"), ("cores", "cores"), ("kernel", "kernel"),
                       ("exit_status", "exit status"), ("signal", "killed by signal"), ("recorded_at", "recorded")):
        if key in f:
            facts.append(f"<span>{label}: <b>{_cell(f[key])}</b></span>")
    for c in f.get("counters", []):  # the recording's completeness, coloured by severity (trace/quality.py)
        sev = c["severity"].replace(" ", "-")
        flag = f" class='{sev}' title='{c['severity']}'" if c["value"] and sev != "info" else ""
        facts.append(f"<span{flag}>{html.escape(c['label'])}: <b>{html.escape(c['text'])}</b></span>")
    facts.insert(0, f"<span>wall time: <b>{format_ns(f['wall_ns'])}</b></span>")
    facts.insert(1, f"<span>threads: <b>{f['threads']}</b></span>")
    title = elide(report.title, 100)
    full = html.escape(report.full_title or report.title, quote=True)
    style = _STYLE
    if report.timeline is not None:
        from scalestack.report.timeline import TIMELINE_STYLE

        style += TIMELINE_STYLE
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>scalestack: {html.escape(title)}</title><style>{style}</style></head><body>",
        f"<h1>scalestack report: <code title='{full}'>{html.escape(title)}</code></h1>",
        f"<div class='facts'>{''.join(facts)}</div>",
    ]
    for w in report.warnings:
        parts.append(f"<div class='warn'>warning: {html.escape(w)}</div>")
    first = [s for s in report.sections if s.key == "advice"]
    rest = [s for s in report.sections if s.key != "advice"]
    for s in first:
        parts.append(_section(s, svgs))
    if report.timeline is not None:
        from scalestack.report.timeline import timeline_html

        parts.append(timeline_html(report.timeline))
    if first and rest:
        parts.append("<h2 class='evidence'>The evidence</h2>")
    for s in rest:
        parts.append(_section(s, svgs))
    parts.append("<p class='facts' style='display:block'>Made by scalestack. Methods: Du Bois et al., criticality stacks and bottle graphs.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
