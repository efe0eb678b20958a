"""`scalestack scale`: record a thread-count sweep and print its speedup stacks."""

from __future__ import annotations

import json

import click

from scalestack.errors import UserError


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--threads", default="1,2,4", help="Thread counts, comma-separated.")
@click.option("--repeat", default=1, type=int, help="Runs per thread count (median wall time kept).")
@click.option("--env", "envs", multiple=True, help="VAR={threads}: set per run.")
@click.option("-o", "--output", default="sweep", help="Sweep directory.")
@click.option("--from", "from_dir", help="Recompute from a saved sweep directory.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--report", "report_dir", help="Also write report.html, report.json and the figures here.")
@click.option("--gc-log", is_flag=True,
              help="java only: add -Xlog:gc per run and print its pause times beside the GC component.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def command(threads, repeat, envs, output, from_dir, as_json, report_dir, gc_log, cmd):
    """Run CMD once per thread count ({threads} is replaced) and print the speedup stacks."""
    from scalestack.sweep import (
        gc_checks,
        load_gc_logs,
        load_sweep,
        run_sweep,
        stacks,
        sweep_report,
    )

    if not from_dir:
        if not cmd:
            raise UserError("no command: give 'scalestack scale --threads 1,2 -- CMD {threads}' or --from DIR")
        try:
            counts = [int(x) for x in threads.split(",")]
        except ValueError:
            raise UserError(f"--threads {threads!r} is not a comma-separated list of integers") from None
        env = dict(e.split("=", 1) for e in envs if "=" in e)
        from rich.progress import Progress

        with Progress() as prog:
            task = prog.add_task("recording", total=len(counts) * repeat)
            run_sweep(list(cmd), counts, output, repeat=repeat, env=env,
                      progress=lambda: prog.advance(task), gc_log=gc_log)
        from_dir = output
    traces = load_sweep(from_dir)
    res = stacks(traces)
    logs = load_gc_logs(from_dir)
    if report_dir:
        sweep_report(traces, report_dir, logs)
        click.echo(f"scalestack: wrote {report_dir}/report.html", err=True)
    checks = gc_checks(traces, logs)
    if as_json:
        out = [r.to_dict() for r in res]
        click.echo(json.dumps({"stacks": out, "gc_log": checks} if checks else out, indent=2))
        return
    click.echo(f"{'N':>3} {'speedup':>8} {'gc':>6} {'seq':>6} {'sync':>6} {'imb':>6} {'cont':>6} {'other':>6}")
    for r in res:
        click.echo(f"{r.n:>3} {r.speedup:8.2f} {r.gc:6.2f} {r.seq:6.2f} {r.sync:6.2f} {r.imb:6.2f} "
                   f"{r.cont:6.2f} {r.other:6.2f}")
    if checks:
        click.echo("\n-Xlog:gc cross-check (GC term from the trace vs from the JVM's pause log)")
        click.echo(f"{'N':>3} {'pauses':>6} {'log ms':>8} {'GC box ms':>9} {'GC run ms':>9} {'gc':>6} {'gc(log)':>7}")
        for c in checks:
            click.echo(f"{c['n']:>3} {c['pauses']:>6} {c['log_pause_ms']:8.1f} {c['gc_height_ms']:9.1f} "
                       f"{c['gc_running_ms']:9.1f} {c['gc_term']:6.2f} {c['gc_term_log']:7.2f}")
