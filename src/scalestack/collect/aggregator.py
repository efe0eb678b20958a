"""In-kernel aggregation with eBPF: per-thread criticality and state times, no trace at all.

The thesis's kernel modules kept two counters per thread and cost 0.68%; this is the same idea,
safely, as an eBPF program (`bpf/aggregate.bpf.c`) on the scheduler's BTF tracepoints
(sched_switch, sched_wakeup(_new), sched_process_fork/exit, task_rename), filtered in the kernel to one
process tree. Per event it does O(1) work: the tree keeps the running count r and
F(t) = ∫ dt / r(t) in fixed point; a thread adds F(out) - F(in) at switch-out (shared/DESIGN.md,
"Online aggregation"). SYNC_WAIT needs no syscall probe: a thread that blocks inside the futex
system call (its saved user registers say so) is in a synchronization wait.

Loader: libbpf, with the BPF object compiled by clang at first use against this kernel's own
BTF (`bpftool btf dump`), and a 100-line C loader that prints the maps on request. Why not the
others: bpftrace's map updates are a read then a write, not atomic, so two CPUs switching at
once can lose an update of r, and every later share would be wrong (not measured: avoided);
BCC (python3-bpfcc) needs the kernel's headers, which these machines' kernels do not ship.
Debian packages: clang, libbpf-dev, bpftool (scripts/system-deps.sh installs them).

Counters are cumulative; a `Snapshot` brings every thread's open state up to the snapshot's
time, so the difference of two snapshots is exact for that window.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Sequence

import numpy as np

from scalestack.collect import bpf_build
from scalestack.collect.run import resolve_command
from scalestack.errors import UserError

FX_SHIFT = 16
STATES = ("unknown", "running", "runnable", "sync_wait", "io_wait", "sleep", "new", "dead")
COUNTED = ("running", "runnable", "sync_wait", "io_wait", "sleep")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Cumulative per-thread counters at `t_ns` (CLOCK_MONOTONIC), open states included."""

    t_ns: int
    tid: np.ndarray
    tgid: np.ndarray
    name: np.ndarray  # object
    state: np.ndarray  # index into STATES
    exited: np.ndarray  # bool
    crit_ns: np.ndarray  # float64
    times_ns: dict[str, np.ndarray]  # COUNTED state -> float64
    busy_ns: float  # time with at least one thread of the tree running
    running_now: int  # r at t_ns
    spins_failed: int
    table_full: int
    events: int = 0
    missed_switch_in: int = 0  # switch-outs of a thread not known to be running
    missed_switch_out: int = 0

    def index(self) -> dict[int, int]:
        return {int(t): i for i, t in enumerate(self.tid.tolist())}


def parse_snapshot(lines: Sequence[str]) -> Snapshot:
    """Parse one dump of the loader (G, T..., E lines), closing open states at its time."""
    g = lines[0].split()
    now, F, r, last, busy, spins, full, events = (int(x) for x in g[1:9])
    miss_in, miss_out = (int(x) for x in g[9:11]) if len(g) >= 11 else (0, 0)
    # corrections left pending by switches taken without the lock (signed; the next holder applies them)
    f_corr, busy_corr = (int(x) for x in g[12:14]) if len(g) >= 14 else (0, 0)
    F, busy = F + f_corr, busy + busy_corr
    rows = [ln.split(" ", 17) for ln in lines[1:] if ln.startswith("T ")]
    n = len(rows)
    tid = np.array([int(x[1]) for x in rows], dtype=np.int64)
    tgid = np.array([int(x[2]) for x in rows], dtype=np.int64)
    state = np.array([int(x[3]) for x in rows], dtype=np.int64)
    since = np.array([int(x[4]) for x in rows], dtype=np.int64)
    f_in = np.array([int(x[5]) for x in rows], dtype=np.float64)
    crit = np.array([int(x[6]) for x in rows], dtype=np.float64)
    ns = np.array([[int(v) for v in x[7:15]] for x in rows], dtype=np.float64).reshape(n, 8)
    exited = np.array([x[15] != "0" for x in rows], dtype=bool)
    name = np.array([x[17] if len(x) > 17 else "" for x in rows], dtype=object)
    # bring F and every open state up to `now` (the kernel closes them only at the next event)
    f_now = float(F) + ((now - last) * float(1 << FX_SHIFT) / r if r > 0 and now > last else 0.0)
    busy_now = busy + (now - last if r > 0 and now > last else 0)
    open_ns = np.maximum(now - since, 0).astype(np.float64)
    running = state == 1
    crit = crit + np.where(running, np.maximum(f_now - f_in, 0.0), 0.0)
    times = {}
    for s in COUNTED:
        k = STATES.index(s)
        times[s] = ns[:, k] + np.where(state == k, open_ns, 0.0)
    return Snapshot(now, tid, tgid, name, state, exited, crit / (1 << FX_SHIFT), times, float(busy_now), int(r),
                    spins, full, events, miss_in, miss_out)


class Aggregator:
    """The loaded aggregator following the process tree of `tgid`; `snapshot()` reads it."""

    def __init__(self, tgid: int, timeout: float = 60.0):
        obj, loader = bpf_build.build()
        self.tgid = tgid
        self.proc = bpf_build.start_loader([loader, obj, *map(str, [tgid, *descendants(tgid)])], timeout,
                                 "the eBPF aggregator", bpf_build.HINT)

    def snapshot(self) -> Snapshot:
        self.proc.stdin.write("d\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise UserError("the eBPF aggregator stopped unexpectedly")
            line = line.rstrip("\n")
            if line == "E":
                break
            lines.append(line)
        return parse_snapshot(lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("q\n")
                self.proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Aggregator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class GatedCommand:
    """A command started held before its exec, so the aggregator can attach to its pid first.

    The gate is a FIFO opened by path (sh redirects only single-digit descriptors)."""

    def __init__(self, command: Sequence[str], quiet: bool = False):
        import tempfile

        argv = resolve_command(command)
        self._dir = tempfile.mkdtemp(prefix="scalestack-gate-")
        self._fifo = os.path.join(self._dir, "gate")
        os.mkfifo(self._fifo, 0o600)
        out = subprocess.DEVNULL if quiet else None
        self.proc = subprocess.Popen(["/bin/sh", "-c", 'read _ < "$0"; exec "$@"', self._fifo, *argv],
                                     stdin=subprocess.DEVNULL if quiet else None, stdout=out, stderr=out)
        self.pid = self.proc.pid
        self.started_ns: int | None = None

    def release(self, timeout: float = 30.0) -> None:
        """Let the command exec (waits for the shell to be at the gate)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = os.open(self._fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:  # ENXIO: the shell has not opened it yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self._cleanup()
                    raise UserError("the command's wrapper shell ended before it started") from None
                time.sleep(0.005)
        self.started_ns = time.monotonic_ns()
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
            self._cleanup()

    def _cleanup(self) -> None:
        import shutil as _shutil

        _shutil.rmtree(self._dir, ignore_errors=True)

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._cleanup()


def descendants(pid: int) -> list[int]:
    """Processes below `pid` now (children forked before the aggregator was attached)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def check_pid(pid: int) -> None:
    if pid <= 0 or not os.path.isdir(f"/proc/{pid}"):
        raise UserError(f"no process with pid {pid}")
    try:
        with open(f"/proc/{pid}/status") as fh:
            tgid = next((int(ln.split()[1]) for ln in fh if ln.startswith("Tgid:")), pid)
    except OSError:
        raise UserError(f"no process with pid {pid}") from None
    if tgid != pid:
        raise UserError(f"{pid} is a thread of process {tgid}; give the process id ({tgid})")


def unavailable() -> str | None:
    """None when the aggregator can run here, else one line saying why not."""
    return bpf_build.unavailable("the eBPF aggregator")


def check() -> None:
    """Raise one clear UserError when the aggregator cannot run here."""
    bpf_build.check()


def build(force: bool = False) -> tuple[str, str]:
    """The aggregator's BPF object and loader, compiled for this kernel on first use."""
    return bpf_build.build(force, "aggregate")
