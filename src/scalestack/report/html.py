"""One self-contained HTML page: figures inlined as SVG, tables, facts and warnings.

No script, font or style is fetched from anywhere, so the page opens from an e-mail
attachment or an issue with no network.
"""

from __future__ import annotations

import html
import re

from scalestack.report import Report
from scalestack.units import format_ns

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
.facts{color:#555} .facts span{margin-right:1.4em;white-space:nowrap}
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:.4em .8em;margin:.3em 0}
table{border-collapse:collapse;margin:.8em 0;font-size:13px} th,td{padding:.25em .7em;border-bottom:1px solid #eee;text-align:right}
th{background:#f6f6f6} td.t,th.t{text-align:left}
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


def render_html(report: Report, svgs: dict[str, str]) -> str:
    f = report.facts
    facts = []
    for key, label in (("source", "source"), ("collector", "collector"), ("cores", "cores"), ("kernel", "kernel"),
                       ("exit_status", "exit status"), ("signal", "killed by signal"), ("n_events", "events"),
                       ("lost_events", "lost events"), ("chain_gaps_traced", "dropped scheduler events"),
                       ("recorded_at", "recorded")):
        if key in f:
            facts.append(f"<span>{label}: <b>{_cell(f[key])}</b></span>")
    facts.insert(0, f"<span>wall time: <b>{format_ns(f['wall_ns'])}</b></span>")
    facts.insert(1, f"<span>threads: <b>{f['threads']}</b></span>")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>scalestack: {html.escape(report.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>scalestack report: <code>{html.escape(report.title)}</code></h1>",
        f"<div class='facts'>{''.join(facts)}</div>",
    ]
    for w in report.warnings:
        parts.append(f"<div class='warn'>warning: {html.escape(w)}</div>")
    for s in report.sections:
        parts.append(f"<section id='{html.escape(s.key)}'><h2>{html.escape(s.title)}</h2>")
        for line in s.summary:
            parts.append(f"<p>{html.escape(line)}</p>")
        for name in s.figures:
            if name in svgs:
                parts.append(f"<figure>{_svg(svgs[name])}<figcaption>{html.escape(name)}.svg / .png</figcaption></figure>")
        if s.table and s.columns:
            head = "".join(f"<th class='{'t' if k in ('name', 'label', 'role') else ''}'>{html.escape(h)}</th>"
                           for k, h in s.columns)
            body = []
            for row in s.table:
                cells = "".join(f"<td class='{'t' if k in ('name', 'label', 'role') else ''}'>{_cell(row.get(k))}</td>"
                                for k, _ in s.columns)
                body.append(f"<tr>{cells}</tr>")
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        parts.append("</section>")
    parts.append("<p class='facts'>Made by scalestack. Methods: Du Bois et al., criticality stacks and bottle graphs.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
