"""The perf collector: `perf record -a` around the command (or attached to a pid), its perf.data read
by the direct reader (`scalestack.ingest.perf_data`).

Designed around what was measured on these machines (shared/DESIGN.md):

* Per-task recording never sees a switch *into* a traced thread, so we record system-wide
  (``-a``) for the command's lifetime and keep only the command's process tree, followed
  through fork, in the state builder.
* The default ring buffer loses events on switch-heavy programs, so the buffer is sized from
  the machine (``--mmap-size``), and LOST records are counted into the Trace metadata.
* The command is started through a tiny `sh` wrapper (`collect.run`) that writes its pid before it
  `exec`s the command: that pid roots the process tree, and the command's second exec marks the
  start of the trace, so perf's own start-up is not part of it.
* The command's stdout and stderr stay the user's; perf's own messages are captured and
  parsed (lost chunks) and shown only on failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time

from scalestack.collect.run import WRAPPER, WRAPPER_PLAIN, Run, low_dup, sigint_for_the_program
from scalestack.errors import UserError
from scalestack.ingest.perf_data import (
    LOST_RE,
    SampledWindows,
    read_events,
    read_samples,
    read_stacks_of,
    windows_if_big,
)
from scalestack.tools import last_line, perf_version

FUTEX_ENTER = "syscalls:sys_enter_futex"
# how `record --stacks` walks user stacks: DWARF CFI from a 4 KiB copy of the stack top (8 KiB made
# perf script's unwinding fail here), or frame pointers only (less data per event)
CALL_GRAPH = {"dwarf": "call-graph=dwarf,stack-size=4096", "fp": "call-graph=fp"}


def default_mmap_size(stacks: bool | str = False) -> str:
    """Per-CPU ring buffer: big enough for ~1 s of a switch-storm (≈ 0.5 M events/s/CPU); four
    times that with DWARF stacks (each futex call and sample then carries 4 KiB of stack)."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 4 << 30
    mb = 64 if mem >= (8 << 30) else 16
    if stacks == "dwarf":
        mb *= 4
    return f"{mb}M"


def collect(perf, tracepoints, command, pid, duration, size, reader, keep_perf_data, sample_hz,
            on_ready=None, stacks=False, *, hold: contextlib.ExitStack | None = None,
            chunk_rows: int | None = None) -> Run:
    """`perf record -a` around the command (or for `duration` s), then its perf.data read. With
    `hold`, a recording of more than 4 `chunk_rows` events (default: `windows.STREAM_EVENTS`) read
    by the direct reader is not read: the Run's `windows` reads it a window at a time from a file
    kept until `hold` closes."""
    warnings: list[str] = []
    with contextlib.ExitStack() as own:
        tmp = (hold or own).enter_context(tempfile.TemporaryDirectory(prefix="scalestack-rec-"))
        data = os.path.join(tmp, "perf.data")
        pidfile = os.path.join(tmp, "pid")
        perf_err = os.path.join(tmp, "perf.stderr")
        argv = [perf, "record", "-k", "CLOCK_MONOTONIC", "-a", "-m", size, "-o", data]
        if not sample_hz and not stacks:  # build ids name the binaries of samples; collecting them at the end
            argv.append("-B")  # reads the whole file in perf's memory (0.69 GB for a 0.65 GB file, 14 MB with -B)
        cg = CALL_GRAPH.get(stacks or "", "")
        if stacks:
            # the futex entry first: perf script unwinds (dwarf) only when the first event with a call
            # graph asks for it; -d records the data mappings (the stack's) that unwinding needs
            tracepoints = [FUTEX_ENTER + f"/{cg}/"] + [tp for tp in tracepoints if tp != FUTEX_ENTER]
            argv.append("-d")
        argv += ["-e", ",".join(tracepoints)]
        if sample_hz:
            argv += ["-e", f"cpu-clock/period={int(1e9 // sample_hz)}{',' + cg if cg else ''}/"]
        with sigint_for_the_program(), open(perf_err, "wb") as err:
            if command is not None:
                user_err = low_dup(2)  # sh redirects only single-digit fds
                try:
                    if user_err is None:  # no free fd 3..9: the command shares perf's stderr
                        wrapper, fds, perf_stderr = WRAPPER_PLAIN, (), None
                    else:
                        wrapper, fds, perf_stderr = WRAPPER.format(fd=user_err), (user_err,), err
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
                rc = attach_wait(proc, pid, duration, ctl, ack, on_ready)
        perf_messages = open(perf_err, "rb").read()
        root = None
        if command is not None:
            try:
                root = int(open(pidfile).read().strip())
            except (OSError, ValueError):
                raise UserError(f"perf record failed: {last_line(perf_messages)}") from None
        if not os.path.exists(data) or os.path.getsize(data) == 0:
            raise UserError(f"perf record wrote no data: {last_line(perf_messages)}")
        if keep_perf_data:
            shutil.copyfile(data, keep_perf_data)
        windows = windows_if_big(data, chunk_rows) if hold is not None and reader != "perf-script" else None
        if windows is not None and sample_hz:
            windows = SampledWindows(windows, read_samples(data, perf))
        events = read_events(data, perf, reader, samples=bool(sample_hz)) if windows is None else None
        call_stacks = None
        if stacks and windows is not None:  # the file stays with the windows until `hold` closes
            call_stacks = functools.partial(read_stacks_of, data, perf)
        elif stacks:  # read once the process tree is known (record() calls it with its pids)
            keep_dir = tempfile.mkdtemp(prefix="scalestack-stacks-")
            kept = os.path.join(keep_dir, "perf.data")
            os.replace(data, kept)
            call_stacks = functools.partial(_stacks_pass, kept, perf)
    meta = {"perf_version": perf_version(perf), "mmap_size": size,
            "reader": "perf-script" if reader == "perf-script" else "perf-data"}
    lost_chunks = LOST_RE.findall(perf_messages.decode("utf-8", "replace"))
    if lost_chunks:
        read = events if windows is None else windows
        meta["lost_chunks"] = read.stats["lost_chunks"] = sum(int(x) for x in lost_chunks)
        warnings.append(f"perf reported {meta['lost_chunks']} lost chunks; raise --mmap-size")
    return Run(events, rc, root, meta, warnings, call_stacks, windows=windows)


def _stacks_pass(data: str, perf: str, pids):
    try:
        return read_stacks_of(data, perf, pids)
    finally:
        shutil.rmtree(os.path.dirname(data), ignore_errors=True)


def attach_wait(proc: subprocess.Popen, pid: int, duration: float, ctl: str, ack: str, on_ready=None) -> int:
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
        while b"ack" not in read_nonblock(ack_fd) and proc.poll() is None and time.monotonic() < deadline:
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


def read_nonblock(fd: int) -> bytes:
    try:
        return os.read(fd, 64)
    except BlockingIOError:
        return b""
