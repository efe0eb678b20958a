"""`scalestack import`: turn a trace recorded elsewhere into a scalestack Trace file."""

from __future__ import annotations

import os

import click

from scalestack.errors import UserError
from scalestack.fileio import check_writable
from scalestack.ingest import IMPORTERS, sniff_format
from scalestack.trace.store import save_or_keep


@click.command()
@click.argument("fmt", metavar="[FORMAT]", required=False)
@click.argument("path", metavar="FILE", required=False)
@click.option("-o", "--output", help="Trace file to write (default: FILE with .trace).")
@click.option("--pid", type=int, help="perf inputs: the process whose tree to keep.")
@click.option("--comm", help="perf inputs: keep every process with this name instead.")
@click.option("--threads-as-roles", "roles", metavar="RULES", help="Thread-role rules REGEX=ROLE,...")
@click.option("--between", nargs=2, metavar="T0 T1",
              help="perf inputs: only this part of the recording (times from its first event: 10s 12s, or absolute "
                   "ns); a perf.data is then read in the memory the part needs.")
@click.option("--chunk-rows", type=click.IntRange(min=0), metavar="N",
              help="perf.data: a recording of more than 4N events is read in time windows of N events and its trace "
                   "written as it is built, a few threads at a time, in the memory of one window and a few threads' "
                   "rows (default: windows of 1,048,576 events above 16,777,216 events); 0: read whole.")
@click.option("--list", "list_only", is_flag=True, help="perf inputs: list the processes in FILE and exit.")
def command(fmt, path, output, pid, comm, roles, between, chunk_rows, list_only):
    """Import FILE. FORMAT is one of perf-data, perf-script, chrome (guessed when omitted).

    perf inputs hold every process on the machine: choose one with --pid or --comm.
    """
    if path is None:
        if fmt is None:
            raise UserError("usage: scalestack import [FORMAT] FILE [-o OUT]")
        fmt, path = None, fmt
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if fmt is None:
        fmt = sniff_format(path)
    if fmt not in IMPORTERS:
        raise UserError(f"unknown format {fmt!r}; choose one of: {', '.join(IMPORTERS)}")
    if list_only:
        _list(fmt, path, between)
        return
    options = {}
    if fmt in ("perf-data", "perf-script"):
        if pid is None and comm is None:
            raise UserError(f"{path} records the whole machine: choose the program with --pid PID or --comm NAME")
        if pid is not None and comm is not None:
            raise UserError("give either --pid or --comm, not both")
        options = {"pid": pid, "comm": comm, "between": between}
        if chunk_rows is not None:
            if fmt != "perf-data":
                raise UserError(f"--chunk-rows is for perf.data inputs; {path} is {fmt}")
            options["chunk_rows"] = chunk_rows
    elif chunk_rows is not None:
        raise UserError(f"--chunk-rows is for perf.data inputs; {path} is {fmt}")
    elif pid is not None or comm is not None:
        raise UserError(f"--pid and --comm are for perf inputs; {path} is {fmt}, imported whole")
    elif between:
        raise UserError(f"--between is for perf inputs; import the whole {fmt} file and give "
                        "`report --between` instead")
    out = output or os.path.splitext(path)[0] + ".trace"
    if os.path.abspath(out) == os.path.abspath(path):
        raise UserError(f"refusing to overwrite the input {path}; give -o")
    check_writable(out)  # before the input is read
    big = os.path.getsize(path) > (32 << 20)
    if big and fmt in ("perf-data", "perf-script"):
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task(f"reading {os.path.basename(path)}", total=os.path.getsize(path))
            def progress(done, total, stage=None):
                bar.update(task, completed=done, **({"description": f"{stage} ({os.path.basename(path)})"} if stage else {}))

            trace = _import(fmt, path, out, roles, options, progress)
    else:
        trace = _import(fmt, path, out, roles, options, None)
    click.echo(f"scalestack: imported {len(trace.threads)} threads, {trace.wall_ns / 1e9:.3f} s from {fmt} -> {out}",
               err=True)


def _import(fmt: str, path: str, out: str, roles, options: dict, progress):
    """Read FILE and write its Trace at `out`; the Trace (a perf.data too big to hold is written as
    it is built, and the Trace returned has no states: `perf_data.import_file`)."""
    def finish(trace):
        _check_found(trace, options.get("pid"), options.get("between"))
        return trace.with_roles(roles).with_meta(role_rules=None) if roles else trace

    if fmt == "perf-data":
        from scalestack.ingest.perf_data import import_file

        return import_file(path, out, progress=progress, finish_with=finish, **options)
    trace = finish(IMPORTERS[fmt].load(path, progress=progress, **options))
    save_or_keep(trace, out)
    return trace


def _check_found(trace, pid: int | None, between) -> None:
    """A --pid that no event names gives a trace of that one thread, `unknown` throughout: said
    as an error before anything is written (a trace held whole; one written as it is built keeps
    no states to tell)."""
    from scalestack.trace import State

    th, st = trace.threads, trace.states
    if pid is None or len(th) != 1 or int(th.tid[0]) != pid or not len(st) or not (st.state == State.UNKNOWN).all():
        return
    where = "between those times" if between else "in the recording"
    raise UserError(f"process {pid} has no event {where}; see `scalestack import FILE --list`")


def _list(fmt: str, path: str, between) -> None:
    """Print the processes a system-wide perf recording (or the part `between` of it) holds,
    busiest first."""
    from scalestack.ingest.parts import events_between, part_only
    from scalestack.ingest.perf_data import read_perf_data
    from scalestack.trace.builder import list_processes

    if fmt == "perf-script":
        from scalestack.ingest.perf_script import parse_perf_script

        events = events_between(parse_perf_script(path), between, path)
    elif fmt == "perf-data":
        events = read_perf_data(path, between=between)
    else:
        raise UserError(f"--list is for perf inputs; {path} is {fmt}")
    rows = list_processes(part_only(events))
    if not rows:
        raise UserError(f"{path} does not say which process each thread belongs to (no pid column); "
                        "produce it with `perf script -F comm,pid,tid,cpu,time,event,trace --ns`")
    click.echo(f"{'pid':>8}  {'threads':>7}  {'events':>9}  name")
    for r in rows:
        click.echo(f"{r['pid']:>8}  {r['threads']:>7}  {r['events']:>9}  {r['name']}")
