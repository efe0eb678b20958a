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
import hashlib
import os
import platform
import select
import shutil
import subprocess
import time
from collections.abc import Sequence
from importlib import resources

import numpy as np

from scalestack.errors import UserError

FX_SHIFT = 16
STATES = ("unknown", "running", "runnable", "sync_wait", "io_wait", "sleep", "new", "dead")
COUNTED = ("running", "runnable", "sync_wait", "io_wait", "sleep")
_ARCH = {"x86_64": "x86", "aarch64": "arm64"}
_HINT = "; use `scalestack record` (perf) instead"
MIN_KERNEL = (5, 18)  # sched_switch passes prev_state to BTF programs from 5.18 on


def unavailable(what: str = "the eBPF aggregator", hint: str = _HINT) -> str | None:
    """None when `what` (the aggregator, or the trace collector) can run here, else one line
    saying why not, ending with `hint` (what to use instead)."""
    reason = _reason(what)
    return None if reason is None else reason + hint


def _reason(what: str) -> str | None:
    if platform.system() != "Linux":
        return "eBPF needs Linux"
    if platform.machine() not in _ARCH:
        return f"{what} supports x86_64 and aarch64, not {platform.machine()}"
    if os.geteuid() != 0:
        return "eBPF needs root (CAP_BPF and CAP_PERFMON): run with sudo"
    try:
        release = tuple(int(x) for x in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        release = MIN_KERNEL
    if release < MIN_KERNEL:
        return f"kernel {platform.release()} is too old for {what} (needs {MIN_KERNEL[0]}.{MIN_KERNEL[1]} or newer)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "this kernel has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)"
    try:
        with open("/sys/kernel/security/lockdown") as fh:
            if "[confidentiality]" in fh.read():
                return "the kernel is locked down (lockdown=confidentiality forbids reading kernel memory)"
    except OSError:
        pass
    missing = [tool for tool in ("clang", "bpftool") if not _which(tool)]
    if not os.path.exists("/usr/include/bpf/libbpf.h"):
        missing.append("libbpf-dev")
    if not _which("gcc") and not _which("cc"):
        missing.append("gcc")
    if missing:
        return f"building {what} needs {', '.join(missing)} (apt-get install clang libbpf-dev bpftool)"
    return None


def _which(tool: str) -> str | None:
    return shutil.which(tool) or next((p for d in ("/usr/sbin", "/sbin") if os.path.exists(p := f"{d}/{tool}")), None)


def check() -> None:
    """Raise one clear UserError when eBPF cannot be used here."""
    reason = unavailable()
    if reason:
        raise UserError(reason)


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "scalestack", "bpf")


# program -> (BPF source, loader source, loader binary)
PROGRAMS = {
    "aggregate": ("aggregate.bpf.c", "loader.c", "scalestack-agg"),
    "trace": ("trace.bpf.c", "trace_loader.c", "scalestack-trace"),
}


def build(force: bool = False, program: str = "aggregate") -> tuple[str, str]:
    """The BPF object and its loader (`program`: a key of PROGRAMS), compiled for this kernel on
    first use and cached."""
    check()
    bpf_name, loader_name, binary = PROGRAMS[program]
    src = resources.files("scalestack.collect") / "bpf"
    bpf_c = (src / bpf_name).read_bytes()
    loader_c = (src / loader_name).read_bytes()
    key = hashlib.sha256(bpf_c + loader_c + platform.release().encode() + platform.version().encode()).hexdigest()[:16]
    out = os.path.join(_cache_dir(), key)
    obj, loader = os.path.join(out, bpf_name.replace(".c", ".o")), os.path.join(out, binary)
    if not force and os.path.exists(obj) and os.path.exists(loader):
        return obj, loader
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, bpf_name), "wb") as fh:
        fh.write(bpf_c)
    with open(os.path.join(out, loader_name), "wb") as fh:
        fh.write(loader_c)
    arch = _ARCH[platform.machine()]
    steps = [
        ([_which("bpftool"), "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"], "vmlinux.h"),
        (["clang", "-O2", "-g", "-target", "bpf", "-mcpu=v3", f"-D__TARGET_ARCH_{arch}", "-I", out, "-c",
          os.path.join(out, bpf_name), "-o", f"{obj}.{os.getpid()}"], None),
        ([_which("gcc") or "cc", "-O2", os.path.join(out, loader_name), "-o", f"{loader}.{os.getpid()}", "-lbpf"], None),
    ]
    for argv, stdout_name in steps:
        dest = open(os.path.join(out, stdout_name + f".{os.getpid()}"), "wb") if stdout_name else subprocess.DEVNULL
        res = None
        try:
            res = subprocess.run(argv, stdout=dest, stderr=subprocess.PIPE, timeout=300)
        finally:
            if stdout_name:
                dest.close()
                if res is not None and res.returncode == 0:  # whole or not at all: another build may be reading it
                    os.replace(dest.name, os.path.join(out, stdout_name))
        if res.returncode != 0:
            last = (res.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
            raise UserError(f"building the eBPF {program} program failed at `{os.path.basename(argv[0])}`: {last}"
                            + _HINT)
    os.replace(f"{obj}.{os.getpid()}", obj)
    os.replace(f"{loader}.{os.getpid()}", loader)
    return obj, loader


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


def start_loader(argv: list[str], timeout: float, what: str, hint: str) -> subprocess.Popen:
    """Start a loader (line protocol on stdin/stdout) and wait for its "ready"; one clear error
    with the loader's last message if it does not come."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1)
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        err = proc.stderr.read().strip().splitlines()
        raise UserError(f"{what} did not start: " + (err[-1] if err else "no message") + hint)
    return proc


class Aggregator:
    """The loaded aggregator following the process tree of `tgid`; `snapshot()` reads it."""

    def __init__(self, tgid: int, timeout: float = 60.0):
        obj, loader = build()
        self.tgid = tgid
        self.proc = start_loader([loader, obj, *map(str, [tgid, *descendants(tgid)])], timeout,
                                 "the eBPF aggregator", _HINT)

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

        from scalestack.collect.perf import resolve_command

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
