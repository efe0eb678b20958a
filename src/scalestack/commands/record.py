"""`scalestack record`: run a program while its scheduler events are recorded (eBPF or perf) and save its Trace."""

from __future__ import annotations

import sys

import click

from scalestack.errors import UserError
from scalestack.trace.quality import summary_line


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("-o", "--output", help="File to write (default scalestack.trace; with --aggregate scalestack.agg.parquet).")
@click.option("-p", "--pid", type=int, help="Attach to a running process instead of running a command.")
@click.option("--duration", type=float, help="With --pid: seconds to record.")
@click.option("--threads-as-roles", "roles", metavar="RULES",
              help="Thread-role rules REGEX=ROLE,... (roles: main, app, gc, jit, runtime, or any pool name).")
@click.option("--mmap-size", metavar="SIZE", help="Per-CPU ring buffer for perf (e.g. 64M); default from memory.")
@click.option("--collector", type=click.Choice(["auto", "ebpf", "perf", "tracefs"]), default="auto", show_default=True,
              help="ebpf (BPF programs on the scheduler's BTF tracepoints), perf, or the kernel's ftrace buffer "
                   "through tracefs; auto = ebpf where it can run and no perf-only option is given, else perf "
                   "(see README: collectors).")
@click.option("--reader", type=click.Choice(["auto", "perf-data", "perf-script"]), default="auto",
              show_default=True, help="Read perf.data directly (fast) or through `perf script`.")
@click.option("--keep-perf-data", metavar="FILE", help="Also keep perf's raw perf.data here.")
@click.option("--no-futex", is_flag=True, help="Do not trace futex syscalls (cheaper; no SYNC_WAIT state).")
@click.option("--sample", "sample", is_flag=True, help="Also sample what each thread executes (for phases).")
@click.option("--stacks", is_flag=True,
              help="Also record call stacks: on the samples (implies --sample) and at every futex wait and wake "
                   "(perf collector; see docs/where.md).")
@click.option("--unwind", type=click.Choice(["dwarf", "fp"]), default="dwarf", show_default=True,
              help="With --stacks: walk stacks by DWARF call-frame info from a copy of the stack top, or by "
                   "frame pointers only (less data per event).")
@click.option("--sample-hz", type=int, default=1000, show_default=True, help="Samples per second of CPU time.")
@click.option("--aggregate", is_flag=True,
              help="Keep only per-thread counters per window, in the kernel (eBPF): always-on, kilobytes.")
@click.option("--window", default="1s", show_default=True, metavar="DURATION", help="With --aggregate: window length.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("--no-exit-check", is_flag=True, help="Skip comparing each thread with the kernel's figures at its exit.")
@click.option("--chunk-rows", type=click.IntRange(min=0), metavar="N",
              help="A recording of more than 4N events is read in time windows of N events and its trace "
                   "written as it is built, in the memory of one window and a few threads' rows (default: windows of "
                   "1,048,576 events above 16,777,216 events); 0: read whole.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(output, pid, duration, roles, mmap_size, collector, reader, keep_perf_data, no_futex, sample, stacks, unwind, sample_hz,
            aggregate, window, quiet, no_exit_check, chunk_rows, command):
    """Record CMD (after --) with the kernel's scheduler and futex tracepoints.

    Exits with the command's own exit status. Example:

        scalestack record -o run.trace -- ./myprog 4
    """
    from scalestack.collect.record import record

    if pid is None and not command:
        raise UserError("no command given; usage: scalestack record [OPTIONS] -- CMD [ARGS...]")
    if pid is not None and command:
        raise UserError("give either --pid or a command, not both")
    if roles:  # a bad rule is said before the program runs, not after (and the recording lost)
        from scalestack.trace.roles import RoleRules

        RoleRules.parse(roles)
    if aggregate:
        from scalestack.commands._aggregate import record_aggregate_command

        if sample or stacks or mmap_size or keep_perf_data or no_futex or collector != "auto" or chunk_rows is not None:
            raise UserError("--aggregate counts in the kernel; --sample, --mmap-size, --keep-perf-data, --no-futex, "
                            "--collector and --chunk-rows are for trace recordings")

        record_aggregate_command(list(command) or None, output or "scalestack.agg.parquet", pid, duration, window,
                                 roles, quiet)
    output = output or "scalestack.trace"
    with _BuildBar(not quiet) as bar:
        trace = record(list(command) if command else None, output, pid=pid, duration=duration, mmap_size=mmap_size,
                       role_rules=roles, reader=reader, keep_perf_data=keep_perf_data, futex=not no_futex,
                       sample_hz=sample_hz if sample or stacks else None, collector=collector,
                       exit_check=not no_exit_check, stacks=unwind if stacks else False, chunk_rows=chunk_rows,
                       progress=bar.update)
    if not quiet:
        m = trace.meta
        click.echo(f"scalestack: recorded {len(trace.threads)} threads, {trace.wall_ns / 1e9:.3f} s "
                   f"({m.get('collector')}; {summary_line(m)}) -> {output}", err=True)
        for w in trace.warnings:
            click.echo(f"scalestack: warning: {w}", err=True)
    status = trace.meta.get("exit_status")
    if trace.meta.get("signal"):
        sys.exit(128 + int(trace.meta["signal"]))
    sys.exit(int(status or 0))


class _BuildBar:
    """A progress bar for the building of a recording read in windows, started at its first update:
    while the command runs, its own output has the terminal."""

    def __init__(self, shown: bool):
        self.shown, self.bar, self.task = shown, None, None

    def update(self, done: int, total: int, stage: str) -> None:
        if not self.shown:
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(stage, total=total)
        self.bar.update(self.task, completed=done, total=total, description=f"building the trace: {stage}")

    def __enter__(self) -> _BuildBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
