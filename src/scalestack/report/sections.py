"""The built-in report sections: the trace's threads and states, criticality, bottle graphs."""

from __future__ import annotations

import numpy as np

from scalestack.report import ReportOptions, Section, register_section, state_rows
from scalestack.report.figures import bottle_graph, bottle_strip, criticality_stack
from scalestack.report.source import StoredTrace, WholeTrace
from scalestack.units import format_ns


@register_section("threads", order=10)
def threads_section(source: WholeTrace | StoredTrace, options: ReportOptions) -> Section:
    rows = state_rows(source)
    cols = [("tid", "tid"), ("name", "name"), ("role", "role"), ("running_ms", "running"),
            ("runnable_ms", "runnable"), ("sync_wait_ms", "sync wait"), ("io_wait_ms", "io wait"),
            ("sleep_ms", "sleep"), ("unknown_ms", "unknown")]
    m = source.meta
    summary = [f"{len(source.threads)} threads over {format_ns(source.wall_ns)}; times in ms."]
    if m.get("lost_events") or m.get("chain_gaps_traced"):
        summary.append(f"The kernel lost {m.get('lost_events', 0)} events (ring buffer) and dropped "
                       f"{m.get('chain_gaps_traced', 0)} scheduler events of these threads; see the warnings.")
    return Section("threads", "Threads and their states", summary, rows, cols, {}, {"threads": rows})


@register_section("criticality", order=20)
def criticality_section(source: WholeTrace | StoredTrace, options: ReportOptions) -> Section:
    res = source.criticality(options.active)
    rows = res.rows()
    for r in rows:
        r["criticality_ms"] = r["criticality_ns"] / 1e6
        r["running_ms"] = r["running_ns"] / 1e6
    summary = []
    top = res.most_critical_tid
    if top is not None:
        i = int(np.flatnonzero(res.tids == top)[0])
        n = int(np.sum(res.running_ns > 0))
        summary.append(f"Most critical: {res.names[i]} ({top}) with {res.share[i] * 100:.1f}% of the run time "
                       f"(an even split would give each of the {n} threads {100 / max(n, 1):.1f}%).")
    if res.idle_ns > 0:
        summary.append(f"No thread was {res.active.replace('+', ' or ')} for {format_ns(res.idle_ns)} "
                       f"({res.idle_ns / res.span_ns * 100:.1f}% of the span): idle time, not in the stack.")
    cols = [("tid", "tid"), ("name", "name"), ("role", "role"), ("share_pct", "share %"),
            ("criticality_ms", "criticality ms"), ("running_ms", "running ms"), ("parallelism", "parallelism")]
    return Section("criticality", "Criticality stack", summary, rows, cols,
                   {"criticality": criticality_stack(res)}, res.to_dict())


@register_section("bottle", order=30)
def bottle_section(source: WholeTrace | StoredTrace, options: ReportOptions) -> Section:
    res = source.bottle(options.group_by, options.active)
    rows = [{**r, "height_ms": r["height_ns"] / 1e6, "area_ms": r["area_ns"] / 1e6} for r in res.rows()]
    rows.reverse()  # top of the graph (the neck) first
    summary = ["Box height = criticality (its share of the run time), width = parallelism (threads running "
               "beside it, itself included), area = running time. Tall, narrow boxes limit the program."]
    if res.boxes:
        tallest = max(res.boxes, key=lambda b: b.height_ns)
        summary.append(f"Tallest box: {tallest.label}, {tallest.height_ns / max(res.height_ns, 1) * 100:.1f}% of the "
                       f"run time at parallelism {tallest.width:.2f}: shortening its work shortens the run most.")
    cols = [("label", "box"), ("role", "role"), ("height_ms", "height ms"), ("width", "width"),
            ("area_ms", "area ms"), ("share_pct", "share %")]
    figures = {"bottle": bottle_graph(res)}
    data = res.to_dict()
    if options.window is not None:
        wres = source.bottle(options.group_by, options.active, window=options.window)
        figures["bottle-windows"] = bottle_strip(wres)
        data["windows"] = wres.to_dict()
        summary.append(f"{len(wres.windows)} windows of {format_ns(wres.window_ns)} in bottle-windows.")
        marks = [{"kind": "window", "label": f"window {k + 1}", "t0_ns": int(w.t0_ns),
                  "t1_ns": int(w.t0_ns + w.span_ns)} for k, w in enumerate(wres.windows)]
        return Section("bottle", "Bottle graph", summary, rows, cols, figures, data, marks)
    return Section("bottle", "Bottle graph", summary, rows, cols, figures, data)


@register_section("advice", order=5)
def advice_section(source: WholeTrace | StoredTrace, options: ReportOptions) -> Section:
    res = source.advise()
    rows = [{"rank": r["rank"], "finding": r["title"], "advice": r["detail"],
             "gain": f"{r['predicted_speedup']:.2f}x" if r["predicted_speedup"] != 1.0 else ""} for r in res.rows()]
    return Section("advice", "What to do about it", [f"{len(rows)} findings, largest predicted gain first."], rows,
                   [("rank", "#"), ("finding", "finding"), ("advice", "evidence and advice"), ("gain", "gain")], {},
                   res.to_dict())


# registers the phases, critical functions and locks sections
from scalestack.report import phase_section, where_section  # noqa: E402,F401
