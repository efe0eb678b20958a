"""`scalestack record`: run an unmodified program while its scheduler events are recorded, and
keep its Trace. The collectors (`auto` picks ebpf where it can run, else perf) share the command
wrapper and the state builder; the eBPF one is `collect/ebpf_trace.py`, tracefs `collect/tracefs.py`,
perf this module.

Designed around what was measured on these machines (shared/DESIGN.md):

* Per-task recording never sees a switch *into* a traced thread, so we record system-wide
  (``-a``) for the command's lifetime and keep only the command's process tree, followed
  through fork, in the state builder.
* The default ring buffer loses events on switch-heavy programs, so the buffer is sized from
  the machine (``--mmap-size``), and LOST records are counted into the Trace metadata.
* The command is started through a tiny `sh` wrapper that writes its pid before it `exec`s the
  command: that pid roots the process tree, and the command's second exec marks the start of
  the trace, so perf's own start-up is not part of it.
* The command's stdout and stderr stay the user's; perf's own messages are captured and
  parsed (lost chunks) and shown only on failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

import numpy as np

from scalestack.errors import UserError
from scalestack.events import RECORD_TRACEPOINTS, Kind, RawEvents
from scalestack.trace import Trace

TRACEFS = "/sys/kernel/tracing"
DEFAULT_OUTPUT = "scalestack.trace"
COLLECTORS = ("auto", "perf", "tracefs", "ebpf")
# $0 = pid file; fd {fd} = the user's stderr (perf's own stderr is captured).
_WRAPPER = 'echo $$ > "$0"; exec 2>&{fd} {fd}>&-; exec "$@"'
_WRAPPER_PLAIN = 'echo $$ > "$0"; exec "$@"'


def perf_binary() -> str:
    path = shutil.which("perf")
    if path is None:
        raise UserError("perf is not installed; install it with `apt-get install linux-perf` (Debian/Ubuntu)")
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"perf at {path} does not run: {exc}") from None
    if out.returncode != 0 or "perf version" not in out.stdout:
        hint = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no version output"
        raise UserError(f"perf at {path} does not work ({hint}); install the linux-perf package matching your kernel")
    return path


def perf_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    return out.stdout.strip().replace("perf version ", "")


def ensure_tracefs() -> str:
    """The tracefs events directory, mounting tracefs if this is root and it is not mounted."""
    for base in (TRACEFS, "/sys/kernel/debug/tracing"):
        if os.path.isdir(os.path.join(base, "events")):
            return base
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
        if os.path.isdir(os.path.join(TRACEFS, "events")):
            return TRACEFS
        raise UserError(f"tracefs is not mounted and mounting it failed; run `mount -t tracefs nodev {TRACEFS}`")
    raise UserError(
        "recording scheduler tracepoints needs root: run `sudo scalestack record ...` "
        f"(tracefs at {TRACEFS} is not readable by this user)"
    )


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


def available_tracepoints(tracefs: str, wanted: Sequence[str]) -> tuple[list[str], list[str]]:
    have, missing = [], []
    for tp in wanted:
        group, name = tp.split(":", 1)
        (have if os.path.isdir(os.path.join(tracefs, "events", group, name)) else missing).append(tp)
    return have, missing


def default_mmap_size() -> str:
    """Per-CPU ring buffer: big enough for ~1 s of a switch-storm (≈ 0.5 M events/s/CPU)."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 4 << 30
    mb = 64 if mem >= (8 << 30) else 16
    return f"{mb}M"


def resolve_command(command: Sequence[str]) -> list[str]:
    if not command:
        raise UserError("no command given; usage: scalestack record [OPTIONS] -- CMD [ARGS...]")
    exe = command[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            raise UserError(f"{exe}: no such file")
        if not os.access(exe, os.X_OK) or os.path.isdir(exe):
            raise UserError(f"{exe}: not an executable file")
    elif shutil.which(exe) is None:
        raise UserError(f"{exe}: command not found")
    return list(command)


_LOST_RE = re.compile(r"lost (\d+) chunks", re.I)


def read_events(perf_data: str, perf: str, reader: str = "auto", samples: bool = False) -> RawEvents:
    """RawEvents from a perf.data file, by the direct reader (default) or via `perf script` text.

    Samples need perf's symbol resolution, so a recording with samples is read as text. With
    SCALESTACK_CHECK_READERS=1 in the environment (the test suite sets it) every file is read
    both ways and any difference is an error: the two readers are proven equal on every
    recording the tests make.
    """
    if samples:
        reader = "perf-script"
    if reader not in ("auto", "perf-data", "perf-script"):
        raise UserError(f"unknown reader {reader!r}; choose perf-data or perf-script")
    if reader == "perf-script":
        return _read_text(perf_data, perf, samples)
    from scalestack.ingest.perf_data import read_perf_data

    events = read_perf_data(perf_data)
    if os.environ.get("SCALESTACK_CHECK_READERS") == "1":
        text = _read_text(perf_data, perf, False)
        if not events.equals(text) or events.stats["lost_events"] != text.stats["lost_events"]:
            raise RuntimeError(f"the perf.data reader and perf script disagree on {perf_data} "
                               f"({len(events)} vs {len(text)} events)")
    return events


def _read_text(perf_data: str, perf: str, samples: bool) -> RawEvents:
    from scalestack.ingest.perf_script import parse_perf_script

    with tempfile.TemporaryDirectory(prefix="scalestack-") as tmp:
        text = os.path.join(tmp, "perf.txt")
        with open(text, "wb") as fh:
            fields = ["-F", "trace:comm,pid,tid,cpu,time,event,trace"]
            if samples:
                fields += ["-F", "sw:comm,pid,tid,cpu,time,event,ip,sym,symoff,dso"]
            proc = subprocess.run(
                [perf, "script", "-i", perf_data, "--show-lost-events", *fields, "--ns"],
                stdout=fh, stderr=subprocess.PIPE,
            )
        if proc.returncode != 0:
            raise UserError(f"`perf script` failed on {perf_data}: {_last_line(proc.stderr)}")
        events = parse_perf_script(text)
    lost = _LOST_RE.findall(proc.stderr.decode("utf-8", "replace"))
    if lost:
        events.stats["lost_chunks"] = sum(int(x) for x in lost)
    return events


def _last_line(raw: bytes) -> str:
    lines = [ln.strip() for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


@dataclasses.dataclass
class _Run:
    """What a collector hands back: raw events and how the command ended."""

    events: RawEvents
    rc: int | None
    root: int | None
    meta: dict
    warnings: list[str]


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
        BTF tracepoint programs writing to a BPF ring buffer (`scalestack.collect.ebpf_trace`),
        perf, or the kernel's ftrace ring buffer through tracefs (`scalestack.collect.tracefs`).
        "auto" (the default) takes ebpf where it can run and no perf-only option (sampling,
        mmap_size, reader, keep_perf_data) is given, else perf: measured here, ebpf loses no
        switch and puts every thread within the kernel's own figures (README, collectors).
    exit_check : bool
        Compare every thread with the kernel's own figures at its exit (bpftrace probe,
        `scalestack.collect.exit_check`); the result is in ``meta["exit_check"]``.
    on_ready : callable, optional
        With --pid and perf or ebpf: called once the events are enabled, e.g. to start the load
        the recording should see (perf takes a moment, more on a busy machine).
    """
    if (command is None) == (pid is None):
        raise UserError("give either a command (after --) or --pid PID")
    if collector not in COLLECTORS:
        raise UserError(f"unknown collector {collector!r}; choose {', '.join(COLLECTORS)}")
    chosen = collector == "auto"
    if chosen:  # auto picks ebpf only where it can run
        collector = auto_collector(sample_hz, mmap_size, keep_perf_data, reader)
    if collector != "perf" and sample_hz:
        raise UserError("--sample needs the perf collector")
    if collector == "ebpf" and not chosen:
        from scalestack.collect import ebpf, ebpf_trace

        reason = ebpf.unavailable(ebpf_trace.NAME, ebpf_trace.HINT)
        if reason:
            raise UserError(reason)
    perf = perf_binary() if collector == "perf" else None
    check_permission()
    tracefs = ensure_tracefs()
    wanted = [tp for tp in RECORD_TRACEPOINTS if futex or "futex" not in tp] + list(extra_events)
    tracepoints, missing = available_tracepoints(tracefs, wanted)
    if "sched:sched_switch" not in tracepoints:
        raise UserError("this kernel has no sched:sched_switch tracepoint; scalestack cannot record here")
    attach_names = None
    if command is not None:
        command = resolve_command(command)
    else:
        if not os.path.isdir(f"/proc/{pid}"):
            raise UserError(f"no process with pid {pid}")
        if duration is None or duration <= 0:
            raise UserError("attaching with --pid needs --duration SECONDS")
        attach_names = _thread_names(pid)
    if sample_hz is not None and not 1 <= sample_hz <= 100_000:
        raise UserError(f"--sample-hz {sample_hz} is out of range (1 to 100000)")
    started = datetime.datetime.now(datetime.UTC)
    t_wall = time.monotonic()
    from scalestack.collect import exit_check as exits

    # the kernel's figures of every thread at its exit; for a command, whose threads are all born
    # in the recording (attaching, perf must start at once and the threads were born before)
    with exits.ExitProbe(enabled=exit_check and command is not None) as probe:
        if collector == "perf":
            run = _collect_perf(perf, tracepoints, command, pid, duration, mmap_size or default_mmap_size(), reader,
                                keep_perf_data, sample_hz, on_ready)
        elif collector == "ebpf":
            run = _collect_ebpf(command, pid, duration, futex, on_ready)
        else:
            run = _collect_tracefs(tracefs, tracepoints, command, pid, duration)
    elapsed = time.monotonic() - t_wall
    events, warnings = run.events, run.warnings
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
        "cpus_online": _online_cpus(),
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
    from scalestack.state_builder import build_trace

    if command is not None:
        execs = np.flatnonzero((events.kind == Kind.EXEC) & (events.arg0 == run.root))
        own = np.flatnonzero((events.tid == run.root) | (events.pid == run.root))
        if len(execs):
            start = int(events.time[execs[1] if len(execs) > 1 else execs[0]])
        elif events.stats.get("lost_events") and len(own):  # the exec itself was among the lost events
            start = int(events.time[own[0]])
            meta["warnings"].append("the command's exec was among the lost events: the trace starts at its first "
                                    "recorded event")
        else:
            raise UserError("the recording has no exec of the command; was it killed before it started?")
        trace = build_trace(events, root_pids=[run.root], start_ns=start, meta=meta, role_rules=role_rules,
                            root_known=True)
    else:
        trace = build_trace(events, root_pids=[pid], meta=meta, role_rules=role_rules,
                            known_names=attach_names)
    readings = probe.readings()
    if run.root is not None:  # the root's figures include the wrapper shell's time before the exec
        readings.pop(run.root, None)
    result = exits.check(trace, readings, probe.reason)
    note = exits.warning(result)
    trace = trace.with_meta(exit_check=result, warnings=trace.warnings + ([note] if note else []))
    if output:
        trace.save(output)
    return trace


def _collect_perf(perf, tracepoints, command, pid, duration, size, reader, keep_perf_data, sample_hz,
                  on_ready=None) -> _Run:
    """`perf record -a` around the command (or for `duration` s), then its perf.data read."""
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="scalestack-rec-") as tmp:
        data = os.path.join(tmp, "perf.data")
        pidfile = os.path.join(tmp, "pid")
        perf_err = os.path.join(tmp, "perf.stderr")
        argv = [perf, "record", "-k", "CLOCK_MONOTONIC", "-a", "-m", size, "-o", data, "-e", ",".join(tracepoints)]
        if sample_hz:
            argv += ["-e", f"cpu-clock/period={int(1e9 // sample_hz)}/"]
        with _sigint_for_the_program(), open(perf_err, "wb") as err:
            if command is not None:
                user_err = _low_dup(2)  # sh redirects only single-digit fds
                try:
                    if user_err is None:  # no free fd 3..9: the command shares perf's stderr
                        wrapper, fds, perf_stderr = _WRAPPER_PLAIN, (), None
                    else:
                        wrapper, fds, perf_stderr = _WRAPPER.format(fd=user_err), (user_err,), err
                    proc = subprocess.Popen(
                        argv + ["--", "/bin/sh", "-c", wrapper, pidfile, *command],
                        stderr=perf_stderr, pass_fds=fds,
                    )
                finally:
                    if user_err is not None:
                        os.close(user_err)
                rc = proc.wait()
            else:
                ctl, ack = os.path.join(tmp, "ctl"), os.path.join(tmp, "ack")
                os.mkfifo(ctl)
                os.mkfifo(ack)
                proc = subprocess.Popen(argv + ["-D", "-1", "--control", f"fifo:{ctl},{ack}"],
                                        stdout=subprocess.DEVNULL, stderr=err)
                rc = _attach_wait(proc, pid, duration, ctl, ack, on_ready)
        perf_messages = open(perf_err, "rb").read()
        root = None
        if command is not None:
            try:
                root = int(open(pidfile).read().strip())
            except (OSError, ValueError):
                raise UserError(f"perf record failed: {_last_line(perf_messages)}") from None
        if not os.path.exists(data) or os.path.getsize(data) == 0:
            raise UserError(f"perf record wrote no data: {_last_line(perf_messages)}")
        if keep_perf_data:
            shutil.copyfile(data, keep_perf_data)
        events = read_events(data, perf, reader, samples=bool(sample_hz))
    meta = {"perf_version": perf_version(perf), "mmap_size": size,
            "reader": "perf-script" if sample_hz or reader == "perf-script" else "perf-data"}
    lost_chunks = _LOST_RE.findall(perf_messages.decode("utf-8", "replace"))
    if lost_chunks:
        meta["lost_chunks"] = events.stats["lost_chunks"] = sum(int(x) for x in lost_chunks)
        warnings.append(f"perf reported {meta['lost_chunks']} lost chunks; raise --mmap-size")
    return _Run(events, rc, root, meta, warnings)


@contextlib.contextmanager
def _sigint_for_the_program():
    """Ctrl-C is for the program: the recorder ignores it meanwhile, and stops when the program does."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _run_or_watch(command, pid, duration, pidfile: str, on_ready=None) -> int | None:
    """Run `command` through the wrapper that writes its pid to `pidfile`, and return its status;
    or, attached to `pid`, call `on_ready` and watch it for `duration` s (None)."""
    if command is not None:
        return subprocess.Popen(["/bin/sh", "-c", _WRAPPER_PLAIN, pidfile, *command]).wait()
    if on_ready is not None:
        on_ready()
    stop = time.monotonic() + duration
    while time.monotonic() < stop and os.path.isdir(f"/proc/{pid}"):
        time.sleep(0.02)
    return None


def _root_pid(pidfile: str) -> int:
    with open(pidfile) as fh:
        return int(fh.read().strip())


def _collect_tracefs(tracefs, tracepoints, command, pid, duration) -> _Run:
    """A private ftrace instance around the command (or for `duration` s), read afterwards."""
    from scalestack.collect.tracefs import TracefsInstance

    with tempfile.TemporaryDirectory(prefix="scalestack-rec-") as tmp, TracefsInstance(tracefs, tracepoints) as inst:
        pidfile = os.path.join(tmp, "pid")
        with _sigint_for_the_program():
            inst.start()
            rc = _run_or_watch(command, pid, duration, pidfile)
            inst.stop()
        root = _root_pid(pidfile) if command is not None else None
        events, dropped = inst.read()
    warnings = [f"the ftrace buffer dropped {dropped} events"] if dropped else []
    return _Run(events, rc, root, {"ftrace_buffer_kb": inst.buffer_kb}, warnings)


def auto_collector(sample_hz=None, mmap_size=None, keep_perf_data=None, reader: str = "auto") -> str:
    """The collector `auto` means: ebpf where it can run (it lost no switch and kept every thread
    within the kernel's own figures in 20 recordings of five programs here, where perf and tracefs
    lost 10-50 switches per 1000 events), perf when an option only perf has is asked for or eBPF
    cannot run (not root, no BTF, no clang/libbpf/bpftool)."""
    if sample_hz or mmap_size or keep_perf_data or reader != "auto":
        return "perf"
    from scalestack.collect import ebpf, ebpf_trace

    return "ebpf" if ebpf.unavailable(ebpf_trace.NAME) is None else "perf"


def _collect_ebpf(command, pid, duration, futex: bool, on_ready=None) -> _Run:
    """BTF tracepoint programs into a BPF ring buffer around the command (or for `duration` s)."""
    from scalestack.collect.ebpf_trace import DEFAULT_BUFFER, TraceSession, read_records

    with tempfile.TemporaryDirectory(prefix="scalestack-rec-") as tmp:
        data, pidfile = os.path.join(tmp, "events.bin"), os.path.join(tmp, "pid")
        with _sigint_for_the_program(), TraceSession(data, DEFAULT_BUFFER, futex=futex) as session:
            rc = _run_or_watch(command, pid, duration, pidfile, on_ready)
            written, lost = session.stop()
        root = _root_pid(pidfile) if command is not None else None
        events = read_records(data)
    events.stats["lost_events"] = lost
    warnings = [f"the eBPF ring buffer had no room for {lost} events"] if lost else []
    return _Run(events, rc, root, {"ebpf_buffer_bytes": DEFAULT_BUFFER, "ebpf_records": written}, warnings)


def _thread_names(pid: int) -> dict[int, str]:
    """Names of the threads a process has now (threads that never run while we watch have no
    event that names them)."""
    names = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                    names[int(tid)] = fh.read().strip()
            except OSError:
                continue
    except OSError:
        pass
    return names


def _low_dup(fd: int) -> int | None:
    """A duplicate of `fd` on a free descriptor number 3..9, or None if all are taken."""
    for target in range(3, 10):
        try:
            os.fstat(target)
        except OSError:
            os.dup2(fd, target, inheritable=False)
            return target
    return None


def _attach_wait(proc: subprocess.Popen, pid: int, duration: float, ctl: str, ack: str, on_ready=None) -> int:
    """Enable perf's events once it is ready, record `duration` s or until `pid` exits, stop."""
    fd = None
    deadline = time.monotonic() + 30
    while fd is None:  # a FIFO opens for writing only once perf has opened it for reading
        try:
            fd = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                return proc.wait()
            time.sleep(0.02)
    ack_fd = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"enable\n")
        deadline = time.monotonic() + 30
        while b"ack" not in _read_nonblock(ack_fd) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if on_ready is not None and proc.poll() is None:
            on_ready()
        stop = time.monotonic() + duration
        while time.monotonic() < stop and proc.poll() is None and os.path.isdir(f"/proc/{pid}"):
            time.sleep(0.02)
    finally:
        os.close(fd)
        os.close(ack_fd)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    return proc.wait()


def _read_nonblock(fd: int) -> bytes:
    try:
        return os.read(fd, 64)
    except BlockingIOError:
        return b""


def _online_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return os.cpu_count() or 1
