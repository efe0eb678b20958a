"""What every collector shares: the command wrapper that roots the process tree, and what a
collector hands back (`Run`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence

from scalestack.errors import UserError
from scalestack.trace.events import RawEvents

# $0 = pid file; fd {fd} = the user's stderr (perf's own stderr is captured).
WRAPPER = 'echo $$ > "$0"; exec 2>&{fd} {fd}>&-; exec "$@"'
WRAPPER_PLAIN = 'echo $$ > "$0"; exec "$@"'


@dataclasses.dataclass
class Run:
    """What a collector hands back: raw events and how the command ended (`rc`: exit status,
    negative for a signal; `root`: the wrapper's pid, None when attached). A recording too big to
    hold comes as `windows` instead of `events`: time-sorted RawEvents windows, read again at
    each iteration (`events` and `stats` say how many and what was lost)."""

    events: RawEvents | None
    rc: int | None
    root: int | None
    meta: dict
    warnings: list[str]
    stacks: object = None  # ingest.perf_stacks.Stacks when recorded with call stacks
    windows: object = None  # e.g. collect.ebpf.RecordWindows


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


@contextlib.contextmanager
def sigint_for_the_program():
    """Ctrl-C is for the program: the recorder ignores it meanwhile, and stops when the program does."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def run_or_watch(command, pid, duration, pidfile: str, on_ready=None) -> int | None:
    """Run `command` through the wrapper that writes its pid to `pidfile`, and return its status;
    or, attached to `pid`, call `on_ready` and watch it for `duration` s (None)."""
    if command is not None:
        return subprocess.Popen(["/bin/sh", "-c", WRAPPER_PLAIN, pidfile, *command]).wait()
    if on_ready is not None:
        on_ready()
    stop = time.monotonic() + duration
    while time.monotonic() < stop and os.path.isdir(f"/proc/{pid}"):
        time.sleep(0.02)
    return None


def root_pid(pidfile: str) -> int:
    """The command's pid, which the wrapper wrote before its exec."""
    try:
        with open(pidfile) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        room = shutil.disk_usage(os.path.dirname(pidfile)).free >> 10
        raise UserError(f"the command's pid was not written to {pidfile} ({room} KiB free there): "
                        "free space in $TMPDIR or set TMPDIR to a directory with room") from None


def thread_names(pid: int) -> dict[int, str]:
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


def low_dup(fd: int) -> int | None:
    """A duplicate of `fd` on a free descriptor number 3..9, or None if all are taken."""
    for target in range(3, 10):
        try:
            os.fstat(target)
        except OSError:
            os.dup2(fd, target, inheritable=False)
            return target
    return None


def online_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return os.cpu_count() or 1
