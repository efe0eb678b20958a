"""Run a command under the LD_PRELOAD shim (`c/shim.c`) and read back what it measured.

The shim does the timing inside the program (Python cannot); this module only checks that it can
be loaded, sets its environment, runs the command and parses the JSON log it writes at exit.
Modes: "phase" (the parallel phase of a plain run), "timing" (+ per-thread lock, barrier and join
waits) and "isolate" (one profiled thread runs alone between barriers, spec §2.2).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from scalestack.eklov.build import build
from scalestack.errors import UserError

MODES = ("phase", "timing", "isolate")


@dataclass(frozen=True)
class Isolation:
    """What the shim measured of the profiled thread: one row per segment between barriers.

    segments : int64 array (k, 4): thread CPU ns, monotonic ns, pirate lines, pirate ns.
    broken : the isolation had to end early (the profiled thread used a primitive that may wait
        for a held thread); `broken_why` says which.
    """

    profiled: int
    broken: bool
    broken_why: str
    pirate: bool
    pirate_lost: bool
    segments: np.ndarray

    @property
    def cpu_ns(self) -> int:
        return int(self.segments[:, 0].sum())

    @property
    def mono_ns(self) -> int:
        return int(self.segments[:, 1].sum())


@dataclass(frozen=True)
class ShimLog:
    """The shim's log of one process: phase bounds and per-thread times (ns, CLOCK_MONOTONIC).

    threads : one dict per thread ("idx" is the creation index, -1 for the main thread), with
        start_ns, end_ns, cpu_ns and lock/spin/barrier/join wait ns and call counts.
    unsupported : calls of primitives the method cannot time, by name.
    """

    pid: int
    mode: str
    proc_start_ns: int
    proc_end_ns: int
    first_create_ns: int
    last_join_ns: int
    last_exit_ns: int
    created: int
    threads: tuple[dict, ...]
    unsupported: dict[str, int] = field(default_factory=dict)
    isolation: Isolation | None = None
    cpu_read_ns: int = 0  # CPU cost of one thread-CPU-clock read, added to each timed wait's CPU

    @property
    def phase_bounds(self) -> tuple[int, int]:
        """The parallel phase: first pthread_create to the last join or thread exit (the whole
        process when it created no thread, or when a created thread was still alive at exit)."""
        if self.created == 0:
            return self.proc_start_ns, self.proc_end_ns
        alive = any(t["idx"] >= 0 and not t["ended"] for t in self.threads)
        end = self.proc_end_ns if alive else max(self.last_join_ns, self.last_exit_ns)
        return self.first_create_ns, end

    @property
    def phase_ns(self) -> int:
        a, b = self.phase_bounds
        return b - a

    @property
    def process_ns(self) -> int:
        return self.proc_end_ns - self.proc_start_ns

    @property
    def serial_ns(self) -> int:
        """Time of the process outside the parallel phase (its Amdahl part)."""
        return self.process_ns - self.phase_ns

    def max_thread_cpu_ns(self, created_only: bool = False) -> int:
        """The busiest thread's CPU time (a thread still running at exit: its time up to then)."""
        return max((t["cpu_ns"] for t in self.threads if t["idx"] >= 0 or not created_only), default=0)

    def busy_ns(self) -> np.ndarray:
        """Per thread, its time in the phase less its lock, barrier and join waits (t_i - t_{l+b,i};
        the join is a barrier, so a thread that ends early simply stops counting) and less the
        unlocks that had to wake a waiter (their futex call exists only because of contention)."""
        a, b = self.phase_bounds
        cols = ("idx", "start_ns", "end_ns", "lock_wait_ns", "spin_wait_ns", "barrier_wait_ns", "join_wait_ns",
                "wake_ns")
        m = np.array([[t[c] for c in cols] for t in self.threads], dtype=np.int64).reshape(-1, len(cols))
        created = m[:, 0] >= 0
        start = np.maximum(m[:, 1], a)
        end = np.where(created, np.minimum(m[:, 2], b), b)
        busy = (end - start) - m[:, 3:].sum(axis=1)
        return np.clip(busy, 0, None)

    def nosync_cpu_ns(self) -> int:
        """The no-sync estimate in CPU time, robust to other jobs on the machine: per created thread,
        its CPU time less the CPU time it spent inside waits and waking unlocks (for the thread that
        created them, only from its first pthread_create to its last join); the slowest thread.
        On a quiet machine with a core per thread it matches `nosync_ns`; compare it with
        `max_thread_cpu_ns(created_only=True)` of the program with its synchronization removed."""
        busy = [t["cpu_ns"] - t.get("wait_cpu_ns", 0) for t in self.threads if t["idx"] >= 0]
        for t in self.threads:  # a thread that created threads (main): its CPU time from then to its last join
            if t["idx"] < 0 and t.get("cpu_create_ns", 0) > 0:
                end = t["cpu_join_ns"] if t.get("cpu_join_ns", 0) > 0 else t["cpu_ns"]
                busy.append(end - t["cpu_create_ns"] - t.get("wait_cpu_ns", 0))
        return int(max(busy)) if busy else self.max_thread_cpu_ns()

    def nosync_ns(self) -> int:
        """T_nosync of this run: the slowest thread's busy time (spec §2.5)."""
        return int(self.busy_ns().max())

    def waits_ns(self) -> dict[str, int]:
        keys = ("lock_wait_ns", "spin_wait_ns", "barrier_wait_ns", "join_wait_ns", "wake_ns")
        return {k: int(sum(t[k] for t in self.threads)) for k in keys}

    def unsupported_warning(self) -> str | None:
        """One sentence naming the primitives the method does not time, or None."""
        used = {k: v for k, v in self.unsupported.items() if v}
        if not used:
            return None
        names = ", ".join(f"{k}s ({v} calls)" for k, v in used.items())
        return (f"the program uses {names}: waits on them are not measured, so the sync component is "
                "underestimated (counted as work) and isolation is only approximate")


@dataclass(frozen=True)
class ShimRun:
    returncode: int
    wall_ns: int
    log: ShimLog
    others: tuple[ShimLog, ...] = ()   # logs of child processes that also loaded the shim
    foreign_load: float = float("nan")  # share of the machine's CPUs used by other processes meanwhile


def _busy_ns() -> int | None:
    """CPU time all processes of the machine have used since boot (/proc/stat, all but idle/iowait)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(f) - f[3] - f[4]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _children_cpu_ns() -> int:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((r.ru_utime + r.ru_stime) * 1e9)


def foreign_load(busy0: int | None, busy1: int | None, ours_ns: int, wall_ns: int) -> float:
    """Share of all CPUs' time that processes other than ours used during a run (clock-tick
    resolution, so short runs are coarse): the noise the wall-clock figures carry on a shared machine."""
    if busy0 is None or busy1 is None or wall_ns <= 0:
        return float("nan")
    cpus = os.sysconf("SC_NPROCESSORS_ONLN")
    return max(0.0, min(1.0, (busy1 - busy0 - ours_ns) / (wall_ns * cpus)))


def parse_log(path: str) -> ShimLog:
    with open(path, encoding="utf-8") as fh:
        d = json.load(fh)
    iso = None
    if "isolation" in d:
        i = d["isolation"]
        segs = np.array(i["segments"], dtype=np.int64).reshape(-1, 4)
        iso = Isolation(profiled=i["profiled"], broken=bool(i["broken"]), broken_why=i["broken_why"],
                        pirate=bool(i["pirate"]), pirate_lost=bool(i["pirate_lost"]), segments=segs)
    return ShimLog(pid=d["pid"], mode=d["mode"], proc_start_ns=d["proc_start_ns"], proc_end_ns=d["proc_end_ns"],
                   first_create_ns=d["first_create_ns"], last_join_ns=d["last_join_ns"],
                   last_exit_ns=d["last_exit_ns"], created=d["created"], threads=tuple(d["threads"]),
                   unsupported=dict(d["unsupported"]), isolation=iso, cpu_read_ns=d.get("cpu_read_ns", 0))


def _elf_interp(path: str) -> bool | None:
    """True if the ELF file asks for a dynamic loader (PT_INTERP), False if not, None if not ELF."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF":
            return None
        is64, little = head[4] == 2, head[5] == 1
        e = "<" if little else ">"
        if is64:
            phoff, = struct.unpack_from(e + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
        else:
            phoff, = struct.unpack_from(e + "I", head, 28)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    return any(struct.unpack_from(e + "I", table, k * phentsize)[0] == 3 for k in range(phnum))


def check_preloadable(argv: list[str]) -> str:
    """The executable's path; UserError if it is missing or LD_PRELOAD cannot work on it."""
    if not argv:
        raise UserError("no command given")
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    if exe is None or not os.path.isfile(exe):
        raise UserError(f"command not found: {argv[0]}")
    if not os.access(exe, os.X_OK):
        raise UserError(f"{exe} is not executable")
    dyn = _elf_interp(exe)
    if dyn is False:
        raise UserError(f"{exe} is not dynamically linked: LD_PRELOAD cannot load the timing shim into it "
                        "(rebuild it without -static)")
    if dyn is None:  # a script: check its interpreter
        with open(exe, "rb") as fh:
            first = fh.readline(512)
        if first.startswith(b"#!"):
            words = first[2:].decode(errors="replace").split()
            if words:
                interp = words[1] if os.path.basename(words[0]) == "env" and len(words) > 1 else words[0]
                check_preloadable([interp])
    return exe


def run(argv: list[str], mode: str = "timing", *, profile_thread: int = 0, profile_cpu: int | None = None,
        pirate_ctl: str | None = None, timeout: float | None = None, env: dict[str, str] | None = None,
        quiet: bool = True) -> ShimRun:
    """Run argv under the shim in `mode` and return its log (UserError if it gives none)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    check_preloadable(argv)
    lib = build("shim")
    with tempfile.TemporaryDirectory(prefix="scalestack-shim-") as tmp:
        log = os.path.join(tmp, "shim.json")
        e = dict(os.environ if env is None else env)
        for k in ("SCALESTACK_SHIM_OWNER", "SCALESTACK_PIRATE_CTL"):
            e.pop(k, None)
        pre = e.get("LD_PRELOAD", "")
        e.update(LD_PRELOAD=f"{lib} {pre}".strip(), SCALESTACK_SHIM_MODE=mode, SCALESTACK_SHIM_LOG=log,
                 SCALESTACK_PROFILE_THREAD=str(profile_thread))
        if profile_cpu is not None:
            e["SCALESTACK_PROFILE_CPU"] = str(profile_cpu)
        if pirate_ctl:
            e["SCALESTACK_PIRATE_CTL"] = pirate_ctl
        out = subprocess.DEVNULL if quiet else None
        busy0, ours0 = _busy_ns(), _children_cpu_ns()
        t0 = time.monotonic_ns()
        try:
            proc = subprocess.run(argv, env=e, stdout=out, stderr=subprocess.PIPE if quiet else None,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise UserError(f"{shlex.join(argv)} did not finish within {timeout:.0f} s under the shim "
                            f"(mode {mode}); a thread may wait on one the isolation holds") from None
        wall = time.monotonic_ns() - t0
        load = foreign_load(busy0, _busy_ns(), _children_cpu_ns() - ours0, wall)
        if proc.returncode != 0:
            err = (proc.stderr or b"").decode(errors="replace").strip().splitlines()
            raise UserError(f"{shlex.join(argv)} exited with status {proc.returncode} under the shim"
                            + (f": {err[-1]}" if err else ""))
        if not os.path.exists(log):
            raise UserError(f"the timing shim wrote no log for {shlex.join(argv)}: the program did not load it "
                            "(setuid, or it clears LD_PRELOAD) or ended without exit()")
        main = parse_log(log)
        others = tuple(parse_log(os.path.join(tmp, f)) for f in sorted(os.listdir(tmp))
                       if f.startswith("shim.json.") and ".tmp" not in f)
    return ShimRun(proc.returncode, wall, main, others, load)


def threaded_log(res: ShimRun) -> ShimLog:
    """The log of the process that created the most threads (the command itself, unless it is a
    wrapper that starts the real program as a child)."""
    return max((res.log, *res.others), key=lambda lg: (lg.created, lg is res.log))
