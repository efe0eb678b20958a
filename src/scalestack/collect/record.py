"""`scalestack record`: run an unmodified program while its scheduler events are recorded, and keep
its Trace. One entry point for every collector: `auto` picks ebpf where it can run, else perf;
each collector (`collect.perf`, `collect.ebpf`, `collect.tracefs`) returns a `collect.run.Run`
and every one ends in the same state builder (`scalestack.trace.builder`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import os
import platform
import signal
import time
from collections.abc import Sequence

import numpy as np

from scalestack.collect import ebpf, perf, tracefs
from scalestack.collect import exit_check as exits
from scalestack.collect.run import online_cpus, resolve_command, thread_names
from scalestack.errors import UserError
from scalestack.fileio import check_writable
from scalestack.ingest.perf_stacks import attach_stacks
from scalestack.tools import perf_binary
from scalestack.trace import Trace
from scalestack.trace.builder import build_trace
from scalestack.trace.events import RECORD_TRACEPOINTS, Kind
from scalestack.trace.store import FULL_DISK, save_or_keep
from scalestack.trace.streaming import build_trace_windows

DEFAULT_OUTPUT = "scalestack.trace"
COLLECTORS = ("auto", "perf", "tracefs", "ebpf")


def check_permission() -> None:
    if os.geteuid() == 0:
        return
    try:
        paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
    except OSError:
        paranoid = 2
    if paranoid > -1:
        raise UserError(
            f"system-wide tracepoint recording is not permitted (kernel.perf_event_paranoid={paranoid}); "
            "run as root, or `sudo sysctl kernel.perf_event_paranoid=-1` and make /sys/kernel/tracing readable"
        )


def record(
    command: Sequence[str] | None = None,
    output: str | None = DEFAULT_OUTPUT,
    *,
    pid: int | None = None,
    duration: float | None = None,
    mmap_size: str | None = None,
    role_rules=None,
    reader: str = "auto",
    keep_perf_data: str | None = None,
    extra_events: Sequence[str] = (),
    futex: bool = True,
    sample_hz: int | None = None,
    collector: str = "auto",
    exit_check: bool = True,
    on_ready=None,
    stacks: bool | str = False,
    chunk_rows: int | None = None,
    progress=None,
) -> Trace:
    """Record `command` (or attach to `pid` for `duration` seconds) and return its Trace.

    Parameters
    ----------
    command : list of str
        The program and its arguments, run unmodified.
    output : str or None
        Where to save the Trace (None: do not save).
    pid, duration : optional
        Attach to a running process for `duration` seconds instead of running a command.
    mmap_size : str, optional
        Per-CPU ring buffer for `perf record -m` (e.g. "64M"); default from the machine's memory.
    role_rules : str or RoleRules, optional
        Extra thread-role rules, ``regex=role,...``.
    reader : {"auto", "perf-data", "perf-script"}
        How to read perf.data: directly (fast) or through `perf script` text.
    keep_perf_data : str, optional
        Also keep the raw perf.data at this path.
    futex : bool
        Record the futex syscalls (SYNC_WAIT needs them; costs more on sync-heavy programs).
    sample_hz : int, optional
        Also sample what every thread executes, this many times per second of CPU time
        (perf's cpu-clock; instruction-pointer samples land in `Trace.samples`).
    collector : {"auto", "perf", "tracefs", "ebpf"}
        BTF tracepoint programs writing to a BPF ring buffer (`scalestack.collect.ebpf`),
        perf, or the kernel's ftrace ring buffer through tracefs (`scalestack.collect.tracefs`).
        "auto" (the default) takes ebpf where it can run and no perf-only option (sampling,
        mmap_size, reader, keep_perf_data) is given, else perf: measured here, ebpf loses no
        switch and puts every thread within the kernel's own figures (README, collectors).
    exit_check : bool
        Compare every thread with the kernel's own figures at its exit (bpftrace probe,
        `scalestack.collect.exit_check`); the result is in ``meta["exit_check"]``.
    stacks : bool or {"dwarf", "fp"}
        Also record user call stacks (True or "dwarf": unwound from a copy of the stack top by its
        DWARF call-frame info; "fp": frame pointers only) on the samples (1 kHz unless `sample_hz` is
        given) and at every futex call; needs the perf collector. The Trace gains `frames`,
        `stacks`, `futex_calls` and ``meta["locks"]`` (futex words named by symbol).
    on_ready : callable, optional
        With --pid and perf or ebpf: called once the events are enabled, e.g. to start the load
        the recording should see (perf takes a moment, more on a busy machine).
    chunk_rows : int, optional
        A recording of more than 4 `chunk_rows` events (default: more than
        `ingest.windows.STREAM_EVENTS`) is read in time windows of `chunk_rows` events and its trace
        built pass by pass (`trace.streaming`), written to `output` as it is built: memory follows
        a window and a batch of threads, not the recording's length. The Trace returned then has
        no states (they are in the file). 0: always read whole.
    progress : callable, optional
        ``progress(done, total, stage)`` follows the building of a recording read in windows
        (events read per pass; the recording is read three to five times).
    """
    if (command is None) == (pid is None):
        raise UserError("give either a command (after --) or --pid PID")
    if collector not in COLLECTORS:
        raise UserError(f"unknown collector {collector!r}; choose {', '.join(COLLECTORS)}")
    chosen = collector == "auto"
    if stacks is True:
        stacks = "dwarf"
    if stacks not in (False, None, "dwarf", "fp"):
        raise UserError(f"unknown stack unwinding {stacks!r}; choose dwarf or fp")
    if stacks and sample_hz is None:
        sample_hz = 1000
    if stacks and not futex:
        raise UserError("--stacks records the futex calls; it cannot be combined with --no-futex")
    if output:  # before anything runs: a recording with nowhere to go would be lost
        check_writable(output)
    if chosen:  # auto picks ebpf only where it can run
        collector = auto_collector(sample_hz, mmap_size, keep_perf_data, reader)
    if collector != "perf" and (sample_hz or stacks):
        raise UserError(f"--{'stacks' if stacks else 'sample'} needs the perf collector")
    if chunk_rows is not None and reader == "perf-script":
        raise UserError("--chunk-rows reads the recording in windows; --reader perf-script reads it whole")
    if collector == "ebpf" and not chosen:
        reason = ebpf.unavailable()
        if reason:
            raise UserError(reason)
    perf_path = perf_binary() if collector == "perf" else None
    check_permission()
    tracefs_dir = tracefs.ensure_tracefs()
    wanted = [tp for tp in RECORD_TRACEPOINTS if futex or "futex" not in tp] + list(extra_events)
    tracepoints, missing = tracefs.available_tracepoints(tracefs_dir, wanted)
    if "sched:sched_switch" not in tracepoints:
        raise UserError("this kernel has no sched:sched_switch tracepoint; scalestack cannot record here")
    attach_names = None
    jvm_map = False
    if command is not None:
        command = resolve_command(command)
        if stacks:
            jvm_map = with_jvm_perf_map(command) != command
            command = with_jvm_perf_map(command)
    else:
        if not os.path.isdir(f"/proc/{pid}"):
            raise UserError(f"no process with pid {pid}")
        if duration is None or duration <= 0:
            raise UserError("attaching with --pid needs --duration SECONDS")
        attach_names = thread_names(pid)
    allowed = _cpus_allowed(pid)
    if sample_hz is not None and not 1 <= sample_hz <= 100_000:
        raise UserError(f"--sample-hz {sample_hz} is out of range (1 to 100000)")
    with contextlib.ExitStack() as hold:  # a recording read in windows is kept until its trace is built
        started = datetime.datetime.now(datetime.UTC)
        t_wall = time.monotonic()
        # the kernel's figures of every thread at its exit; for a command, whose threads are all born
        # in the recording (attaching, perf must start at once and the threads were born before)
        with exits.ExitProbe(enabled=exit_check and command is not None) as probe:
            if collector == "perf":
                run = perf.collect(perf_path, tracepoints, command, pid, duration,
                                   mmap_size or perf.default_mmap_size(stacks), reader, keep_perf_data, sample_hz,
                                   on_ready, stacks, hold=hold, chunk_rows=chunk_rows)
            elif collector == "ebpf":
                run = ebpf.collect(command, pid, duration, futex, on_ready, hold=hold, chunk_rows=chunk_rows)
            else:
                run = tracefs.collect(tracefs_dir, tracepoints, command, pid, duration, hold=hold, chunk_rows=chunk_rows)
        elapsed = time.monotonic() - t_wall
        warnings = run.warnings
        if missing:
            warnings.insert(0, f"tracepoints not available on this kernel: {', '.join(missing)}")

        exit_status, sig = None, None
        if command is not None:
            if run.rc < 0:
                sig = -run.rc
                warnings.append(f"the command was killed by signal {sig} ({signal.Signals(sig).name}); the trace ends there")
            else:
                exit_status = run.rc
        meta = {
            "source": collector,
            "collector": collector,
            "command": list(command) if command is not None else None,
            "attached_pid": pid,
            "duration_s": duration,
            "exit_status": exit_status,
            "signal": sig,
            "cores": os.cpu_count(),
            "cpus_online": online_cpus(),
            "cpus_allowed": allowed,
            "kernel": platform.release(),
            "host": platform.node(),
            "clock": "CLOCK_MONOTONIC",
            "recorded_at": started.isoformat(timespec="seconds"),
            "record_elapsed_s": round(elapsed, 6),
            "tracepoints": tracepoints,
            "sample_hz": sample_hz,
            **run.meta,
            "warnings": warnings,
        }
        @functools.cache
        def readings() -> dict:  # (asked once the trace is built: bpftrace exits meanwhile)
            kernel = probe.readings()
            if run.root is not None:  # the root's figures include the wrapper shell's time before the exec
                kernel.pop(run.root, None)
            return kernel

        def checked(trace: Trace, times=None) -> Trace:
            """The trace with its call stacks, if recorded, and the exit check's result (`times`: its
            time in states, if it has no states)."""
            if run.stacks is not None:
                pids = np.unique(trace.threads.pid)
                trace = attach_stacks(trace, run.stacks(pids)).with_meta(stacks=stacks)
                if command is not None and jvm_map:  # the JVM wrote them because we asked: read, so remove
                    for p in pids.tolist():
                        with contextlib.suppress(OSError):
                            os.unlink(f"/tmp/perf-{p}.map")
            result = exits.check(trace, readings(), probe.reason, times=times)
            note = exits.warning(result)
            return trace.with_meta(exit_check=result, warnings=trace.warnings + ([note] if note else []))

        try:
            try:
                trace, written = _trace_of(run, command, pid, meta, role_rules, attach_names, output, checked,
                                           progress)
            except ebpf.OutOfOrder:  # the ring buffer's interleaving spanned a window (never seen): read it whole
                events = ebpf.read_records(run.windows.path)
                events.stats.update(run.windows.stats)
                run = dataclasses.replace(run, events=events, windows=None)
                trace, written = _trace_of(run, command, pid, meta, role_rules, attach_names, output, checked,
                                           progress)
            if not written:
                trace = checked(trace)
        finally:
            probe.close()  # (reaped: a build that failed never asked for the readings)
        if written:
            return trace
        if output:
            save_or_keep(trace, output)
        return trace


def _cpus_allowed(pid: int | None) -> int | None:
    """How many CPUs the program may run on: a command inherits this process's affinity (taskset
    around `scalestack record`), an attached process has its own; None if it cannot be read."""
    try:
        return len(os.sched_getaffinity(pid or 0))
    except OSError:
        return None


def _trace_of(run, command, pid, meta: dict, role_rules, attach_names, output, checked,
              progress) -> tuple[Trace, bool]:
    """The run's trace, and whether it is written (a recording read in windows: `_build_in_windows`)."""
    meta = dict(meta, warnings=list(meta["warnings"]))
    if command is not None:
        start, own = _command_start([run.events] if run.windows is None else run.windows, run.root)
        read = run.events if run.windows is None else run.windows
        if start is None and own is not None and read.stats.get("lost_events"):
            start = own  # the exec itself was among the lost events
            meta["warnings"].append("the command's exec was among the lost events: the trace starts at its first "
                                    "recorded event")
        elif start is None:
            raise UserError("the recording has no exec of the command; was it killed before it started?")
        given = dict(root_pids=[run.root], start_ns=start, meta=meta, role_rules=role_rules, root_known=True)
    else:
        given = dict(root_pids=[pid], meta=meta, role_rules=role_rules, known_names=attach_names)
    if run.windows is None:
        return build_trace(run.events, **given), False
    return _build_in_windows(run.windows, output, dict(given, progress=progress), checked)


def _command_start(parts, root: int) -> tuple[int | None, int | None]:
    """When the command began (its exec after the wrapper's, else the wrapper's), and the root's
    first event, from the recording's events in time order (`parts`: RawEvents, read only as far
    as needed)."""
    execs, own = [], None
    for ev in parts:
        execs += ev.time[(ev.kind == Kind.EXEC) & (ev.arg0 == root)][:2].tolist()
        if own is None:
            mine = np.flatnonzero((ev.tid == root) | (ev.pid == root))
            own = int(ev.time[mine[0]]) if len(mine) else None
        if len(execs) > 1:
            break
    return (execs[1] if len(execs) > 1 else execs[0] if execs else None), own


def _build_in_windows(windows, output: str | None, given: dict, checked) -> tuple[Trace, bool]:
    """The trace of a recording read in windows, and whether it is written: to `output` as it is
    built (the exit check from its per-thread sums), else (no output, or no room for it there)
    held, to be saved as any other (`save_or_keep` saying where)."""
    def build(**written):
        return build_trace_windows(lambda: iter(windows), stats=windows.stats, n_events=windows.events, **given,
                                   **written)

    if output:
        try:
            return build(output=output, finish_with=checked), True
        except OSError as exc:
            if exc.errno not in FULL_DISK:  # the recording read, or the trace and its spills written
                raise UserError(f"cannot build {output} from the recording: {exc.strerror}"
                                + (f" ({exc.filename})" if exc.filename else "")) from None
    return build(), False


JVM_PERF_MAP = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit", "-XX:+PreserveFramePointer"]


def with_jvm_perf_map(command: list[str]) -> list[str]:
    """`java`/`javac` with the HotSpot flags that write /tmp/perf-PID.map at exit (perf names JIT
    frames from it) and keep frame pointers in compiled code; other commands unchanged."""
    exe = os.path.basename(command[0])
    if exe == "java":
        return [command[0], *JVM_PERF_MAP, *command[1:]]
    if exe == "javac":
        return [command[0], *(f"-J{flag}" for flag in JVM_PERF_MAP), *command[1:]]
    return command


def auto_collector(sample_hz=None, mmap_size=None, keep_perf_data=None, reader: str = "auto") -> str:
    """The collector `auto` means: ebpf where it can run (it lost no switch and kept every thread
    within the kernel's own figures in 20 recordings of five programs here, where perf and tracefs
    lost 10-50 switches per 1000 events), perf when an option only perf has is asked for or eBPF
    cannot run (not root, no BTF, no clang/libbpf/bpftool)."""
    if sample_hz or mmap_size or keep_perf_data or reader != "auto":
        return "perf"
    return "ebpf" if ebpf.unavailable() is None else "perf"
