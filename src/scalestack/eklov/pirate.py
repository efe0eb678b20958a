"""The cache pirate from Python: find the last-level cache, start the pirate, talk to it.

The pirate (`c/pirate.c`) holds W bytes of the LLC so the profiled program keeps about C - W
(spec §2.3). It is a separate process pinned to a CPU sharing the LLC; the shim and this module
drive it through the control page of `c/pirate_ctl.h`. With no counters on a VM, the pirate's
validity is checked by its own time per cache line against a calibration taken alone (spec §3).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from scalestack.errors import UserError
from scalestack.units import parse_size_bytes

# the control page (pirate_ctl.h): offsets of its fields
_MAGIC, _VERSION, _COMMAND, _STATE, _SEGMENT, _PID = 0, 4, 8, 12, 16, 20
_WSET, _LINES, _NS, _CALIB, _ACTIVE = 24, 32, 40, 48, 56
MAX_SIZES = 8  # c/pirate.c keeps one next-line word per size in each 64-byte line
MAGIC, VERSION = 0x50495254, 1
SS_PARK, SS_WARM, SS_RUN, SS_QUIT = 1, 2, 3, 4
SS_PARKED, SS_WARMED, SS_RUNNING, SS_QUITTING = 11, 12, 13, 14

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_FUTEX = 202 if os.uname().machine == "x86_64" else 98  # aarch64: 98
_FUTEX_WAKE = 1


@dataclass(frozen=True)
class LLCInfo:
    """The last-level cache as sysfs describes it (on a VM: possibly the host's, shared with other tenants)."""

    size_bytes: int
    line_bytes: int
    cpus: tuple[int, ...]
    source: str


def _cpu_list(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def llc_info(cpu: int = 0, sysfs: str = "/sys/devices/system/cpu") -> LLCInfo:
    """The highest-level data/unified cache of `cpu`; UserError if sysfs does not describe one."""
    base = os.path.join(sysfs, f"cpu{cpu}", "cache")
    best: tuple[int, LLCInfo] | None = None
    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        entries = []
    for entry in entries:
        path = os.path.join(base, entry)
        try:
            def read(name: str, path: str = path) -> str:
                with open(os.path.join(path, name)) as fh:
                    return fh.read().strip()
            level, kind = int(read("level")), read("type")
            if kind == "Instruction":
                continue
            info = LLCInfo(parse_size_bytes(read("size")), int(read("coherency_line_size") or 64),
                           _cpu_list(read("shared_cpu_list")), path)
        except (OSError, ValueError, UserError):  # an unreadable entry is skipped
            continue
        if best is None or level > best[0]:
            best = (level, info)
    if best is None:
        raise UserError(f"cannot find the last-level cache of CPU {cpu} in {base} (no cache description in sysfs)")
    return best[1]


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


class Pirate:
    """A running cache pirate of `size_bytes`, pinned to `cpu` (a context manager).

    lockstep=True: starts parked and obeys the control page (the shim drives it); lockstep=False:
    warms, then loops continuously until exit, keeping running totals readable by free_run_stats().
    A sequence of sizes (lockstep, at most MAX_SIZES) gives one pirate that holds any of them, chosen
    by hold() before a segment: the stand-alone mode's W varying within one run of the target.
    """

    def __init__(self, size_bytes: int | Sequence[int], cpu: int, *, lockstep: bool = True, threshold: float = 1.5,
                 pattern: str = "random"):
        llc = llc_info(cpu)
        sizes = tuple(int(w) for w in size_bytes) if isinstance(size_bytes, Sequence) else (int(size_bytes),)
        if not sizes or len(sizes) > MAX_SIZES:
            raise UserError(f"one pirate holds 1 to {MAX_SIZES} sizes, not {len(sizes)}")
        if len(sizes) > 1 and not lockstep:
            raise ValueError("a pirate of several sizes must be lockstep")
        for w in sizes:
            if w > llc.size_bytes:
                raise UserError(f"pirate size {_mib(w)} is larger than the last-level cache "
                                f"({_mib(llc.size_bytes)}, {llc.source}); give a size up to the cache size")
            if w < llc.line_bytes:
                raise UserError(f"pirate size {w} bytes is smaller than one cache line ({llc.line_bytes} bytes)")
        if pattern not in ("random", "stride"):
            raise ValueError(f"pattern must be random or stride, not {pattern!r}")
        self.sizes = sizes
        self.size_bytes, self.cpu, self.lockstep, self.threshold = sizes[0], int(cpu), lockstep, threshold
        self.pattern = pattern
        self.llc = llc
        self.ctl_path = ""
        self._calib = float("nan")
        self._proc: subprocess.Popen | None = None
        self._map: mmap.mmap | None = None

    # --- the control page -------------------------------------------------------------------
    def _u32(self, off: int) -> int:
        return struct.unpack_from("<I", self._map, off)[0]

    def _u64(self, off: int) -> int:
        return struct.unpack_from("<Q", self._map, off)[0]

    def reference_ns_per_line(self) -> float:
        """The self-check's reference as the pirate publishes it now (see c/pirate.c)."""
        return struct.unpack_from("<d", self._map, _CALIB)[0] if self._map is not None else self._calib

    @property
    def calib_ns_per_line(self) -> float:
        """The pirate's calibrated ns per line with the set resident, alone: taken at start, then kept
        current by the pirate (median with the warm-up passes of recent segments, target parked)."""
        if self._map is not None:
            self._calib = self.reference_ns_per_line()
        return self._calib

    @calib_ns_per_line.setter
    def calib_ns_per_line(self, value: float) -> None:
        self._calib = float(value)

    @property
    def state(self) -> int:
        return self._u32(_STATE)

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def command(self, word: int) -> None:
        """Write the command word and wake the pirate (what the shim does; used by tests and __exit__)."""
        struct.pack_into("<I", self._map, _COMMAND, word)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(self._map, _COMMAND))
        _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, 0x7FFFFFFF, None, None, 0)

    def wait_state(self, want: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.state != want:
            if self._proc is not None and self._proc.poll() is not None:
                raise UserError(f"the cache pirate exited ({self._proc.returncode}) before reaching state {want}")
            if time.monotonic() > deadline:
                raise UserError(f"the cache pirate did not reach state {want} within {timeout:g} s")
            time.sleep(0.0002)

    @contextlib.contextmanager
    def segment(self):
        """Drive one segment from Python (what the shim does per segment): re-warm, run during the
        block, park after it. Yields a dict that gets `lines`, `ns` and `ok` (the self-check) at the end."""
        if not self.lockstep:
            raise ValueError("segment() needs a lockstep pirate")
        out: dict = {}
        self._ctl_segment_bump()
        self.command(SS_WARM)
        self.wait_state(SS_WARMED)
        self.command(SS_RUN)
        self.wait_state(SS_RUNNING)
        try:
            yield out
        finally:
            self.command(SS_PARK)
            self.wait_state(SS_PARKED)
            lines, ns = self.segment_stats()
            out.update(lines=lines, ns=ns, ok=self.segment_ok(lines, ns))

    def hold(self, size_bytes: int) -> None:
        """Hold `size_bytes` (one of the sizes given) from the next segment on; its own self-check
        reference comes with it. Call between segments, with the pirate parked."""
        if int(size_bytes) not in self.sizes:
            raise ValueError(f"{size_bytes} is not one of this pirate's sizes {self.sizes}")
        struct.pack_into("<Q", self._map, _ACTIVE, int(size_bytes))

    def _ctl_segment_bump(self) -> None:
        struct.pack_into("<I", self._map, _SEGMENT, self._u32(_SEGMENT) + 1)

    def segment_stats(self) -> tuple[int, int]:
        """(lines, ns) the pirate stored for the last parked segment."""
        return self._u64(_LINES), self._u64(_NS)

    # --- life cycle ---------------------------------------------------------------------------
    def __enter__(self) -> Pirate:
        from scalestack.eklov.build import build

        exe = build("pirate")
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        fd, self.ctl_path = tempfile.mkstemp(prefix="scalestack-pirate-", suffix=".ctl", dir=shm)
        try:
            os.ftruncate(fd, 4096)
            self._map = mmap.mmap(fd, 4096)
        finally:
            os.close(fd)
        size_arg = ["--sizes", ",".join(map(str, self.sizes))] if len(self.sizes) > 1 else ["--size", str(self.size_bytes)]
        argv = [exe, *size_arg, "--cpu", str(self.cpu), "--ctl", self.ctl_path,
                "--mode", "lockstep" if self.lockstep else "free", "--pattern", self.pattern]
        self._proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while self._u32(_MAGIC) != MAGIC:
                if self._proc.poll() is not None:
                    err = self._proc.stderr.read().decode(errors="replace").strip() if self._proc.stderr else ""
                    raise UserError(f"the cache pirate failed to start: {err or self._proc.returncode}")
                if time.monotonic() > deadline:
                    raise UserError("the cache pirate did not become ready within 60 s")
                time.sleep(0.001)
            if self._u32(_VERSION) != VERSION:
                raise UserError(f"the cache pirate speaks protocol {self._u32(_VERSION)}, expected {VERSION}")
            self._calib = self.reference_ns_per_line()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                self.command(SS_QUIT)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
        if self._map is not None:
            self._map.close()
            self._map = None
        if self.ctl_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.ctl_path)

    # --- the self-check ------------------------------------------------------------------------
    def ns_per_line(self, lines: int, ns: int) -> float:
        return ns / lines if lines > 0 else float("nan")

    def segment_ok(self, lines: int, ns: int) -> bool:
        """True unless the pirate's time per line exceeded threshold x its calibration (it lost lines)."""
        if lines <= 0:
            return True  # it had no time to touch anything: nothing to judge
        return ns / lines <= self.threshold * self.calib_ns_per_line

    def free_run_stats(self) -> tuple[int, int]:
        """Free-running mode: (lines, ns) since the pirate started running; read twice for a window."""
        ns = self._u64(_NS)  # the pirate stores ns, then lines: this order never pairs new ns with old lines
        lines = self._u64(_LINES)
        return lines, ns


def calibrate(size_bytes: int, cpu: int | None = None, pattern: str = "random") -> float:
    """The pirate's ns per line for a working set of `size_bytes`, alone (any size, even > LLC)."""
    from scalestack.eklov.build import build

    argv = [build("pirate"), "--size", str(int(size_bytes)), "--cpu", str(-1 if cpu is None else cpu),
            "--calibrate", "--pattern", pattern]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise UserError(f"pirate calibration failed: {res.stderr.strip() or res.returncode}")
    return float(res.stdout.strip())


def measured_option(text: str | None) -> bool:
    """True for `--cache-size measured` (any case, spaces around)."""
    return bool(text) and text.strip().lower() == "measured"


def cache_size_option(text: str | None) -> tuple[int | None, str | None]:
    """The C of `--cache-size TEXT`: None (sysfs), a size, or "measured" (the pirate's knee here,
    with a line saying what was found, since a VM's sysfs may describe its host's cache)."""
    if not text:
        return None, None
    if not measured_option(text):
        return parse_size_bytes(text), None
    llc = llc_info(0)
    c, _ = effective_llc_bytes(llc.cpus[-1])
    return c, (f"measured cache C = {c / 2**20:.0f} MiB, the largest working set the pirate keeps resident here "
               f"(sysfs says {llc.size_bytes / 2**20:.0f} MiB; it changes as other tenants come and go)")


def cache_moved(c0: int, cpu: int | None = None) -> str | None:
    """A sentence if the measured cache now differs from `c0` (measured before the runs) by more than
    the measurement's own jitter (2 MiB or a fifth, whichever is larger; 1-2 MiB here): the pirates
    were sized from a C that did not hold throughout."""
    c1, _ = effective_llc_bytes(llc_info(0).cpus[-1] if cpu is None else cpu)
    if abs(c1 - c0) <= max(2 << 20, c0 // 5):
        return None
    return (f"the measured cache moved from {c0 / 2**20:.0f} to {c1 / 2**20:.0f} MiB during the runs: the pirates held "
            "C(N-1)/N of the C measured at the start, so the cache and memory components mix two machine states; "
            "repeat when it is steadier")


def effective_llc_bytes(cpu: int = 0, factor: float = 3.0) -> tuple[int, dict[int, float]]:
    """The largest working set the pirate still finds resident, measured: (bytes, {W: ns per line}).

    sysfs may describe a host's cache that this VM's CPUs share with other tenants, or the sum of
    several slices; the knee of the pirate's own latency curve is what a program here actually gets.
    A size is resident while its ns per line stays within `factor` x that of a set twice the L2 (an
    LLC hit); the sizes go up by 1.5x from there to the sysfs size, then bisect to 1 MiB between the
    last resident size and the first that was not. Noisy: one measurement per size.
    """
    info = llc_info(cpu)
    l2 = 0
    base = os.path.dirname(info.source)
    for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            with open(os.path.join(base, entry, "level")) as fh:
                if int(fh.read()) == 2:
                    with open(os.path.join(base, entry, "size")) as fs:
                        l2 = parse_size_bytes(fs.read())
        except (OSError, ValueError, UserError):  # an unreadable entry is skipped
            continue
    w = max(2 * l2, 1 << 20)
    ref = calibrate(w, cpu)
    seen = {w: ref}
    best = w
    miss = 0
    while w < info.size_bytes:
        # 1.5x to the MiB, and a MiB at least: from 1 MiB (an L2 of 512 KiB) 1.5x rounds back to 1 MiB
        w = min(info.size_bytes, max(int(w * 1.5) // (1 << 20) * (1 << 20), w + (1 << 20)))
        seen[w] = calibrate(w, cpu)
        if seen[w] > factor * ref:
            miss = w
            break
        best = w
    # then to the MiB between the last resident size and the first that was not: the 1.5x ladder
    # alone reads 9 or 13 MiB for a cache of 12, flipping from one call to the next
    while miss and miss - best > 1 << 20:
        mid = best + max((miss - best) // 2 // (1 << 20) * (1 << 20), 1 << 20)  # strictly between them
        seen[mid] = calibrate(mid, cpu)
        if seen[mid] > factor * ref:
            miss = mid
        else:
            best = mid
    return best, dict(sorted(seen.items()))
