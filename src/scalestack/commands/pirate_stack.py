"""`scalestack pirate-stack`: cache, memory and sync components of the lost speedup, measured on this
machine with thread isolation and a cache pirate (Eklov et al.; docs/eklov.md)."""

from __future__ import annotations

import shlex

import click

from scalestack.errors import UserError
from scalestack.units import parse_counts


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--threads", default="1,2", show_default=True, help="Thread counts, comma-separated.")
@click.option("--repeat", default=3, type=int, show_default=True, help="Runs per configuration (medians used).")
@click.option("--instances", help="Multi-instance mode: copies of a single-threaded CMD, e.g. 1,2.")
@click.option("--profile", type=click.Choice(["all", "first"]), default="all", show_default=True,
              help="Isolate every thread in turn (max_i) or only thread 0.")
@click.option("--scope", type=click.Choice(["auto", "phase", "process"]), default="auto", show_default=True,
              help="Time the parallel phase (first thread created to last joined) or the whole run.")
@click.option("--cache-size", help="Cache size C to share out (default: the last-level cache from sysfs; 'measured': "
                                   "the largest working set the pirate keeps resident here, for VMs whose sysfs "
                                   "describes the host's cache).")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds allowed per run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", "out_dir", help="Write the figures, report.html and report.json here.")
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def command(threads, repeat, instances, profile, scope, cache_size, timeout, as_json, out_dir, cmd):
    """Run CMD ({threads} is replaced by N) real, timed and isolated next to a cache pirate, and print
    the speedup stack N = cache + memory + sync + measured."""
    from rich.progress import Progress

    from scalestack.eklov import driver

    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if repeat < 1:
        raise UserError("--repeat must be at least 1")
    cache_bytes = cache_bytes_option(cache_size)
    title = shlex.join(cmd)
    if instances:
        res = _instances(cmd, parse_counts(instances, "--instances"), repeat, cache_bytes, timeout)
        res = cache_checked(res, cache_size, cache_bytes)
    else:
        p = driver.plan(cmd, parse_counts(threads, "--threads"), cache_bytes=cache_bytes)
        with Progress(transient=True) as prog:
            task = prog.add_task("pirate-stack", total=driver.run_count(p.counts, repeat, profile))

            def tick(label: str) -> None:
                prog.update(task, advance=1, description=label)

            res = driver.measure(p, repeat, profile=profile, scope=scope, timeout=timeout, progress=tick)
        res = cache_checked(res, cache_size, cache_bytes)
    if out_dir:
        from scalestack.report.eklov_section import write

        write(res, out_dir, title)
        click.echo(f"scalestack: wrote {out_dir}/report.html", err=True)
    if as_json:
        click.echo(res.to_json())
        return
    from scalestack.report.eklov_section import table_lines

    for line in table_lines(res, title):
        click.echo(line)


def cache_bytes_option(cache_size: str | None) -> int | None:
    """C from a --cache-size option (None: sysfs), saying on stderr what 'measured' found."""
    from scalestack.eklov.pirate import cache_size_option

    c, said = cache_size_option(cache_size)
    if said:
        click.echo(f"scalestack: {said}", err=True)
    return c


def cache_checked(res, cache_size: str | None, cache_bytes: int | None):
    """`res` with a warning if C was measured (`--cache-size measured`) and reads differently now."""
    import dataclasses

    from scalestack.eklov.pirate import cache_moved, measured_option

    if not measured_option(cache_size) or not cache_bytes:
        return res
    moved = cache_moved(cache_bytes)
    return dataclasses.replace(res, warnings=(moved, *res.warnings)) if moved else res


def _instances(cmd, counts, repeat, cache_bytes, timeout):
    try:
        from scalestack.eklov.instances import instance_stack
    except ImportError:
        raise UserError("--instances needs the multi-instance mode (scalestack.eklov.instances), "
                        "which this build does not have") from None
    from scalestack.eklov.shim import check_preloadable

    if not cmd:
        raise UserError("no command: give 'scalestack pirate-stack --instances 1,2 -- CMD'")
    check_preloadable(cmd)
    from rich.progress import Progress

    with Progress(transient=True) as prog:
        task = prog.add_task("pirate-stack --instances", total=None)

        def tick(label: str) -> None:
            prog.update(task, advance=1, description=label)

        return instance_stack(cmd, counts, repeat, cache_bytes=cache_bytes, timeout=timeout, progress=tick)
