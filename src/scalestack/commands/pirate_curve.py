"""`scalestack pirate-curve`: a program's time as a function of the cache it is left, measured by
running it beside a cache pirate of several sizes (stand-alone Cache Pirating; docs/pirate.md)."""

from __future__ import annotations

import click

from scalestack.errors import UserError
from scalestack.units import parse_size_bytes


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--sizes", help="Pirate sizes W, comma-separated (e.g. 0,16M,24M,30M); default 0, C/2 ... C.")
@click.option("--repeat", default=3, type=int, show_default=True, help="Runs per size (medians used).")
@click.option("--cpu", type=int, default=None, help="CPU for the program (default: the first sharing the LLC).")
@click.option("--pirate-cpu", type=int, default=None, help="CPU for the pirate (default: another sharing the LLC).")
@click.option("--threshold", default=1.5, show_default=True, help="Flag a run when the pirate's ns/line exceeds this x its calibration.")
@click.option("--clock", type=click.Choice(["cpu", "wall"]), default="cpu", show_default=True,
              help="Time a run by its CPU time (descheduling excluded) or wall time.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds allowed per run.")
@click.option("--one-run", is_flag=True,
              help="One run of CMD, the pirate changing size every --hold seconds (the paper's stand-alone mode); "
                   "work is measured by --progress.")
@click.option("--hold", default=0.25, show_default=True, help="With --one-run: seconds measured per pirate size.")
@click.option("--settle", default=0.05, show_default=True,
              help="With --one-run: seconds after each size change before measuring (the program refills the cache "
                   "it gets back).")
@click.option("--progress", "progress_by", type=click.Choice(["io", "read", "instructions"]), default="io",
              show_default=True,
              help="With --one-run: CMD's work as bytes it read and wrote (io) or read (read) through system calls, "
                   "or its instructions where the machine counts them.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", "out_dir", help="Write pirate_curve.json/.png/.svg here.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def command(ctx, sizes, repeat, cpu, pirate_cpu, threshold, clock, timeout, one_run, hold, settle, progress_by,
            as_json, out_dir, cmd):
    """Run CMD (single-threaded, or with one thread) beside a pirate holding W of the last-level cache,
    for each W, and print time(cache size) with C - W left to CMD."""
    from rich.progress import Progress

    from scalestack.eklov import curve as cv

    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError("no command: give 'scalestack pirate-curve [--sizes 0,16M] -- CMD'")
    ws = [parse_size_bytes(s) for s in sizes.split(",") if s.strip()] if sizes else None
    if ws is not None and not ws:
        raise UserError("--sizes is empty")
    given = {name for name in ("repeat", "hold", "settle", "progress_by")
             if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    if one_run and "repeat" in given:
        raise UserError("--repeat does not apply to --one-run (one run, many windows per size): drop one of them")
    if not one_run and given & {"hold", "settle", "progress_by"}:
        raise UserError("--hold, --settle and --progress apply only with --one-run")
    n_sizes = len(set(ws)) if ws is not None else 6
    with Progress(transient=True) as prog:
        if one_run:  # windows until the program ends: no total to count towards
            task = prog.add_task("pirate-curve (one run)", total=None)
            res = cv.one_run_curve(cmd, ws, hold=hold, settle=settle, progress_by=progress_by, cpu=cpu, pirate_cpu=pirate_cpu,
                                   threshold=threshold, clock=clock, timeout=timeout,
                                   progress=lambda label: prog.update(task, advance=1, description=label))
        else:
            task = prog.add_task("pirate-curve", total=n_sizes * repeat)
            res = cv.pirate_curve(cmd, ws, repeat, cpu=cpu, pirate_cpu=pirate_cpu, threshold=threshold, clock=clock,
                                  timeout=timeout, progress=lambda label: prog.update(task, advance=1, description=label))
    if res.notice:
        click.echo(f"scalestack: {res.notice}", err=True)
    if out_dir:
        cv.write(res, out_dir)
        click.echo(f"scalestack: wrote {out_dir}/pirate_curve.png, .svg, .json", err=True)
    if as_json:
        click.echo(res.to_json())
        return
    click.echo(f"last-level cache C = {res.llc_bytes / 2**20:.1f} MiB ({res.llc_source}; on a VM possibly the "
               "host's, shared with other tenants)")
    if res.mode == "one-run":
        work = {"io": "bytes read and written", "read": "bytes read", "instructions": "instructions"}[res.progress]
        click.echo(f"one run, the pirate changing size every {hold:g} s; work counted as {work}; time per size = "
                   "total work x its windows' time / their work (min and max: single windows)")
    extra = "  cpi   MB/s" if any("cpi" in r for r in res.rows()) else ""
    click.echo(f"{'pirate W':>10} {'cache left':>10} {'time ms':>9} {'min':>8} {'max':>8} {'slowdown':>8} flagged{extra}")
    for r in res.rows():
        line = (f"{r['pirate_bytes'] / 2**20:8.1f}Mi {r['cache_bytes'] / 2**20:8.1f}Mi {r['time_ns'] / 1e6:9.1f} "
                f"{r['time_min_ns'] / 1e6:8.1f} {r['time_max_ns'] / 1e6:8.1f} {r['slowdown']:8.3f} "
                f"{r['discarded']}/{r['runs'] + r['discarded']}")
        if "cpi" in r:
            line += f" {r['cpi']:5.2f} {r['bandwidth_mb_s']:6.0f}"
        click.echo(line)
