"""`scalestack scale`: record a thread-count sweep and print its speedup stacks."""

from __future__ import annotations

import json
import os

import click

from scalestack.errors import UserError
from scalestack.fileio import output_dir
from scalestack.units import parse_counts


def _assignments(option: str, values: tuple, example: str) -> dict:
    """VAR=VALUE options as a dict; one that is not is the user's mistake, said in one line."""
    bad = next((e for e in values if "=" not in e or not e.split("=", 1)[0]), None)
    if bad is not None:
        raise UserError(f"{option} {bad!r} is not VAR=VALUE (e.g. {option} {example})")
    return dict(e.split("=", 1) for e in values)


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
@click.option("--pirate", is_flag=True,
              help="Also measure the Eklov stack (cache, memory, sync) with thread isolation and a cache pirate, "
                   "at the thread counts the cores allow; saved in the sweep directory, shown in the report.")
@click.option("--pirate-repeat", default=3, type=int, show_default=True, help="Runs per configuration for --pirate.")
@click.option("--pirate-cache-size", help="For --pirate: the cache size C to share out (default: sysfs; 'measured': "
                                         "the largest working set the pirate keeps resident here).")
@click.option("--pirate-from", "pirate_from", help="Show a saved pirate-stack result (its --json output) instead.")
@click.option("--omp-passive", is_flag=True,
              help="Also record every run with OMP_WAIT_POLICY=passive: the extra running time of the default "
                   "runs is spinning (libgomp's spin-then-sleep waits), booked as SYNC instead of work.")
@click.option("--passive-env", "passive_envs", multiple=True, metavar="VAR=VALUE",
              help="Also record every run with VAR=VALUE set, to make another runtime's waits block at once "
                   "(OpenBLAS: OPENBLAS_THREAD_TIMEOUT=4): its spinning is booked as SYNC, as --omp-passive does.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def command(threads, repeat, envs, output, from_dir, as_json, report_dir, gc_log, pirate, pirate_repeat,
            pirate_cache_size, pirate_from, omp_passive, passive_envs, cmd):
    """Run CMD once per thread count ({threads} is replaced) and print the speedup stacks."""
    from scalestack.analysis.sweep import gc_checks, stacks
    from scalestack.collect.sweep import load_gc_logs, load_sweep, run_sweep
    from scalestack.report.sweep import stack_notes, sweep_report

    if pirate and (from_dir or pirate_from):
        raise UserError("--pirate measures a new pirate stack: it cannot be combined with --from or --pirate-from")
    if pirate and envs:
        raise UserError("--pirate runs CMD with {threads} in its arguments only: --env is not passed to its runs; "
                        "run 'scalestack pirate-stack' and give its --json output to --pirate-from")
    env = _assignments("--env", envs, "OMP_NUM_THREADS={threads}")
    passive_env = _assignments("--passive-env", passive_envs, "OPENBLAS_THREAD_TIMEOUT=4")
    twin = "--omp-passive" if omp_passive else "--passive-env" if passive_env else None
    if twin and from_dir:
        raise UserError(f"{twin} records new runs: it cannot be combined with --from (a sweep recorded "
                        "with it is read with its passive runs by --from alone)")
    if twin and pirate:
        raise UserError(f"{twin} cannot be combined with --pirate")
    if pirate_repeat < 1:
        raise UserError("--pirate-repeat must be at least 1")
    if pirate_cache_size and not pirate:
        raise UserError("--pirate-cache-size applies only with --pirate")
    if report_dir:  # made before the runs, which would otherwise end in an error
        output_dir(report_dir, "the report directory")
    pirate_res = load_pirate(pirate_from) if pirate_from else None
    if not from_dir:
        if not cmd:
            raise UserError("no command: give 'scalestack scale --threads 1,2 -- CMD {threads}' or --from DIR")
        counts = parse_counts(threads, "--threads")
        from rich.progress import Progress

        if pirate:  # checked before the sweep records anything: a bad command fails in seconds, not minutes
            pirate_counts = _pirate_counts(counts)
            from scalestack.commands.pirate_stack import cache_bytes_option, cache_checked
            from scalestack.eklov import driver

            pirate_c = cache_bytes_option(pirate_cache_size)
            p = driver.plan(list(cmd), pirate_counts, cache_bytes=pirate_c)
        with Progress() as prog:
            task = prog.add_task("recording", total=len(counts) * repeat * (2 if twin else 1))
            run_sweep(list(cmd), counts, output, repeat=repeat, env=env,
                      progress=lambda: prog.advance(task), gc_log=gc_log, omp_passive=omp_passive,
                      passive_env=passive_env)
            if pirate:
                task = prog.add_task("pirate stack", total=driver.run_count(p.counts, pirate_repeat, "all"))
                pirate_res = driver.measure(p, pirate_repeat, progress=lambda label: prog.advance(task))
                pirate_res = cache_checked(pirate_res, pirate_cache_size, pirate_c)
        if pirate:
            from scalestack.report.eklov_section import save

            save(pirate_res, os.path.join(output, PIRATE_FILE))
        from_dir = output
    elif pirate_res is None and os.path.exists(os.path.join(from_dir, PIRATE_FILE)):
        pirate_res = load_pirate(os.path.join(from_dir, PIRATE_FILE))
    traces = load_sweep(from_dir)
    passive = load_sweep(from_dir, "passive")
    res = stacks(traces, passive)
    logs = load_gc_logs(from_dir)
    if report_dir:
        sweep_report(traces, report_dir, logs, pirate=pirate_res, passive=passive, res=res)
        click.echo(f"scalestack: wrote {report_dir}/report.html", err=True)
    checks = gc_checks(traces, logs, res)
    if as_json:
        out = [r.to_dict() for r in res]
        if checks or pirate_res is not None:
            out = {"stacks": out, **({"gc_log": checks} if checks else {}),
                   **({"pirate_stack": pirate_res.to_dict()} if pirate_res is not None else {})}
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{'N':>3} {'speedup':>8} {'gc':>6} {'seq':>6} {'sync':>6} {'imb':>6} {'cont':>6} {'other':>6}")
    for r in res:
        click.echo(f"{r.n:>3} {r.speedup:8.2f} {r.gc:6.2f} {r.seq:6.2f} {r.sync:6.2f} {r.imb:6.2f} "
                   f"{r.cont:6.2f} {r.other:6.2f}")
    notes = stack_notes(res, twins=bool(passive))
    if notes:
        click.echo("")
        for line in notes:
            click.echo(line)
    if checks:
        click.echo("\n-Xlog:gc cross-check (GC term from the trace vs from the JVM's pause log)")
        click.echo(f"{'N':>3} {'pauses':>6} {'log ms':>8} {'GC box ms':>9} {'GC run ms':>9} {'gc':>6} {'gc(log)':>7}")
        for c in checks:
            click.echo(f"{c['n']:>3} {c['pauses']:>6} {c['log_pause_ms']:8.1f} {c['gc_height_ms']:9.1f} "
                       f"{c['gc_running_ms']:9.1f} {c['gc_term']:6.2f} {c['gc_term_log']:7.2f}")
    if pirate_res is not None:
        from scalestack.report.eklov_section import table_lines
        from scalestack.report.sweep import side_by_side

        click.echo("")
        for line in table_lines(pirate_res) + side_by_side(res, pirate_res):
            click.echo(line)


PIRATE_FILE = "pirate_stack.json"


def load_pirate(path: str):
    from scalestack.report.eklov_section import load

    return load(path)


def _pirate_counts(counts: list[int]) -> list[int]:
    """The sweep's thread counts that isolation can run (a core per thread); one line if none can."""
    cores = len(os.sched_getaffinity(0))
    fit = [n for n in counts if n <= cores]
    if not any(n > 1 for n in fit):
        raise UserError(f"--pirate needs a thread count between 2 and the {cores} cores available for isolation; "
                        f"the sweep has {','.join(map(str, counts))}")
    if len(fit) < len(counts):
        click.echo(f"scalestack: the pirate stack is measured at N = {','.join(map(str, fit))} only: isolation needs "
                   f"a core per thread and {cores} are available", err=True)
    return fit
