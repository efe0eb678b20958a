"""The report of an aggregate recording (`record --aggregate`): criticality stack, bottle graph
and per-window strip, from its per-thread counters."""

from __future__ import annotations

import numpy as np

from scalestack.analysis.bottle import bottle
from scalestack.analysis.criticality import criticality
from scalestack.report import Report, Section
from scalestack.report.figures import bottle_graph, bottle_strip, criticality_stack
from scalestack.report.text import command_line, short_command
from scalestack.trace.aggregate import STATE_COLUMNS, AggregateRecording
from scalestack.units import format_ns


def build_report(rec: AggregateRecording, window: int | None = None, group_by=None, title: str | None = None):
    """The report of an aggregate recording: thread states, criticality stack, bottle graph(s).

    The same sections, figures and JSON keys as a trace's report, from counters."""
    tids, names, roles = rec.threads()
    sums = rec.per_thread()
    start, end, busy = rec.windows()
    span = int(end[-1] - start[0]) if len(start) else 0
    rows = [{"tid": int(t), "name": str(n), "role": str(r),
             **{f"{c[:-3]}_ms": float(sums[c][i]) / 1e6 for c in STATE_COLUMNS}}
            for i, (t, n, r) in enumerate(zip(tids, names, roles, strict=True))]
    cols = [("tid", "tid"), ("name", "name"), ("role", "role"), ("running_ms", "running"),
            ("runnable_ms", "runnable"), ("sync_wait_ms", "sync wait"), ("io_wait_ms", "io wait"), ("sleep_ms", "sleep")]
    threads = Section("threads", "Threads and their states",
                      [f"{len(tids)} threads over {format_ns(span)} in {len(start)} windows of "
                       f"{format_ns(rec.window_ns)} (in-kernel counters, no trace); times in ms."],
                      rows, cols, {}, {"threads": rows})
    crit = criticality(rec)
    crows = crit.rows()
    for r in crows:
        r["criticality_ms"] = r["criticality_ns"] / 1e6
        r["running_ms"] = r["running_ns"] / 1e6
    summary = []
    if crit.most_critical_tid is not None:
        i = int(np.flatnonzero(crit.tids == crit.most_critical_tid)[0])
        summary.append(f"Most critical: {crit.names[i]} ({crit.most_critical_tid}) with {crit.share[i] * 100:.1f}% "
                       "of the run time.")
    ccols = [("tid", "tid"), ("name", "name"), ("role", "role"), ("share_pct", "share %"),
             ("criticality_ms", "criticality ms"), ("running_ms", "running ms"), ("parallelism", "parallelism")]
    csec = Section("criticality", "Criticality stack", summary, crows, ccols, {"criticality": criticality_stack(crit)},
                   crit.to_dict())
    bres = bottle(rec, group_by=group_by)
    brows = [{**r, "height_ms": r["height_ns"] / 1e6, "area_ms": r["area_ns"] / 1e6} for r in bres.rows()]
    brows.reverse()
    bcols = [("label", "box"), ("role", "role"), ("height_ms", "height ms"), ("width", "width"),
             ("area_ms", "area ms"), ("share_pct", "share %")]
    figures = {"bottle": bottle_graph(bres)}
    data = bres.to_dict()
    bsummary = ["Box height = criticality, width = parallelism, area = running time (from per-window counters)."]
    wres = bottle(rec, group_by=group_by, window=window or rec.window_ns)
    if len(wres.windows) > 1:
        figures["bottle-windows"] = bottle_strip(wres)
        data["windows"] = wres.to_dict()
        bsummary.append(f"{len(wres.windows)} windows of {format_ns(wres.window_ns)} in bottle-windows.")
    bsec = Section("bottle", "Bottle graph", bsummary, brows, bcols, figures, data)
    meta = rec.meta
    facts = {k: meta[k] for k in ("collector", "command", "exit_status", "cores", "kernel", "recorded_at", "window_ns")
             if meta.get(k) is not None}
    facts["wall_ns"] = span
    facts["threads"] = len(tids)
    warnings = []
    if meta.get("spins_failed") or meta.get("table_full"):
        warnings.append(f"{meta.get('spins_failed', 0)} switches taken without the aggregator's lock (a CPU "
                        "stalled mid-update; their criticality weights are approximate), "
                        f"{meta.get('table_full', 0)} threads not kept (table full)")
    cmd = meta.get("command")
    return Report(title or (short_command(cmd) if cmd else f"pid {meta.get('attached_pid')}"), facts, warnings,
                  [threads, csec, bsec], full_title=command_line(cmd))
