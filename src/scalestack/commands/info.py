"""`scalestack info`: what a trace holds, per thread, and everything dubious about it."""

from __future__ import annotations

import json

import click

from scalestack.commands._analysis_options import analyse_stored, chunk_option
from scalestack.trace import State
from scalestack.trace.quality import counters, summary_line


def summary(th, times, m, wall_ns: int, warnings: list[str]) -> dict:
    """Per-thread time in each state (`times`, rows as the thread table `th`) plus the trace's
    facts (its meta `m`), as plain data: the same from a whole trace and from one read in chunks."""
    threads = []
    for i in range(len(th)):
        threads.append({
            "tid": int(th.tid[i]), "pid": int(th.pid[i]), "name": str(th.name[i]), "role": str(th.role[i]),
            "start_ns": int(th.start_ns[i]), "end_ns": int(th.end_ns[i]),
            "start_known": bool(th.start_known[i]), "exited": bool(th.exited[i]),
            **{f"{s.label}_ns": int(times[i, s]) for s in State},
        })
    keys = ("source", "command", "input", "exit_status", "signal", "cores", "kernel", "perf_version", "clock",
            "recorded_at", "lost_events", "lost_chunks", "chain_gaps", "chain_gaps_traced", "missing_wakeups",
            "double_running", "repaired_intervals", "repair_uncertainty_ns", "steal_ns", "n_events")
    return {"wall_ns": wall_ns, "threads": threads, **{k: m.get(k) for k in keys if k in m},
            "counters": counters(m), "warnings": warnings}


def _whole(trace, _window) -> tuple:
    return trace.threads, trace.time_in_states(), trace.meta, trace.wall_ns, trace.warnings


def _in_chunks(path, _window, max_rows, progress) -> tuple:
    """What `_whole` gives, from the thread table, the meta and the state rows read a time chunk at
    a time: the whole state table is never held (info of a 37.5 M-row trace: 1.93 GB whole, 0.38 GB
    so)."""
    from scalestack.analysis import chunked
    from scalestack.trace.store import read_meta

    threads, times = chunked.time_in_states(path, max_rows=max_rows, progress=progress)
    meta = read_meta(path)
    # as Trace gives them: analyse_stored chunks only a trace whose meta has start_ns (and
    # chunked.time_in_states requires end_ns)
    return threads, times, meta, int(meta["end_ns"]) - int(meta["start_ns"]), list(meta.get("warnings", []))


@click.command()
@click.argument("path", metavar="TRACE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@chunk_option
def command(path, as_json, chunk_rows):
    """Threads, roles, time in each state, wall time, lost events and warnings of TRACE."""
    threads, times, m, wall_ns, warnings = analyse_stored(path, None, chunk_rows, _whole, _in_chunks)
    data = summary(threads, times, m, wall_ns, warnings)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 110))
    from rich.markup import escape

    from scalestack.report.text import short_command

    cmd = short_command(m["command"]) if m.get("command") else short_command(str(m.get("input", "")))
    console.print(f"[bold]{escape(path)}[/]  {m.get('source', '?')}")
    if cmd:
        whole = " ".join(m.get("command") or []) or str(m.get("input", ""))
        console.print(f"{'command' if m.get('command') else 'imported from'}: {escape(cmd)}"
                      + ("  (whole line: info --json)" if cmd != whole else ""))
    console.print(
        f"wall {wall_ns / 1e9:.6f} s   threads {len(threads)}"
        + (f"   cores {m['cores']}" if m.get("cores") else "")
        + (f"   exit {m['exit_status']}" if m.get("exit_status") is not None else "")
        + (f"   killed by signal {m['signal']}" if m.get("signal") else "")
    )
    console.print(summary_line(m))
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    check = m.get("kernel_runtime_check") or {}
    kernel = check.get("per_thread", {}) if check.get("available") else {}
    cols = ["tid", "name", "role", "running", "runnable", "sync", "io", "sleep", "unknown", "repair±"]
    if kernel:
        cols.append("kernel")
    for col in cols:
        table.add_column(col, justify="left" if col in ("name", "role") else "right", no_wrap=True)
    unc = m.get("repair_uncertainty_ns") or {}
    after = m.get("running_unreported_ns") or {}
    # ms, or µs for a run shorter than 1 ms (a simulated one: 11 µs read 0.0 in every column)
    unit, per = ("µs", 1e3) if wall_ns < 1_000_000 else ("ms", 1e6)
    for row in data["threads"]:
        cells = [f"{row[f'{s.label}_ns'] / per:.1f}" for s in State]
        u = unc.get(str(row["tid"]), 0)
        extra = []
        if kernel:
            k = kernel.get(str(row["tid"]))
            late = after.get(str(row["tid"]), 0)
            extra.append((f"{k[1] / per:.1f}" if k else "") + (f" +{late / per:.1f}" if late >= 50_000 else ""))
        table.add_row(str(row["tid"]), escape(row["name"] + ("" if row["start_known"] else " *")), row["role"], *cells,
                      f"{u / per:.1f}" if u else "", *extra)
    console.print(table)
    console.print(f"times in {unit}; * = thread existed before recording (its first state is unknown); "
                  "repair± = how far repairs of missing kernel events could be off"
                  + ("; kernel = CPU time the scheduler itself charged (sched_stat_runtime)" if kernel else "")
                  + ("; +x = RUNNING at the trace's end that the scheduler charges after it" if kernel and after else ""))
    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
