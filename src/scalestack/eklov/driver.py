"""The measurement matrix behind `scalestack pirate-stack`: N x {real, real + timing, isolated + pirate}
x repeats, turned into an EklovStack (spec §2.5).

Per thread count N and repeat:
  real      the shim in "phase" mode (create/join timestamps only): T(N) is the parallel phase;
  timing    the shim times every lock, barrier and join wait: T_nosync(N) = max_i (t_i - t_{l+b,i});
  isolated  the shim runs one profiled thread alone between barriers, next to a pirate holding
            W = C (N-1)/N of the last-level cache: T_prof(N) is that thread's CPU time in its
            segments.  `profile="all"` profiles each thread in its own run and keeps max_i (the
            slowest-thread rule, spec [our choice]); thread 0's time is kept too.
Bad input is refused before anything runs: a program LD_PRELOAD cannot enter, a thread count above
the cores isolation can use, a pirate larger than the last-level cache.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scalestack.eklov import shim
from scalestack.eklov.stack import EklovStack, pirate_size
from scalestack.errors import UserError
from scalestack.results import Result

PLACEHOLDER = "{threads}"


@dataclass(frozen=True)
class Cache:
    size_bytes: int
    cpus: tuple[int, ...]
    source: str


def _pirate_module():
    try:
        from scalestack.eklov import pirate
    except ImportError:
        return None
    return pirate


def last_level_cache() -> Cache:
    """The LLC as the pirate module reports it (falls back to reading sysfs when it is absent)."""
    mod = _pirate_module()
    if mod is not None:
        info = mod.llc_info(0)
        return Cache(info.size_bytes, tuple(info.cpus), info.source)
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = None
    for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        p = os.path.join(base, d)
        try:
            level = int(open(os.path.join(p, "level")).read())
            kind = open(os.path.join(p, "type")).read().strip()
            size = open(os.path.join(p, "size")).read().strip()
            shared = open(os.path.join(p, "shared_cpu_list")).read().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        nbytes = int(size.rstrip("KMG")) * mult
        if best is None or level > best[0]:
            best = (level, nbytes, _cpu_list(shared), p)
    if best is None:
        raise UserError("cannot find the last-level cache in /sys/devices/system/cpu/cpu0/cache")
    return Cache(best[1], best[2], best[3])


def _cpu_list(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return tuple(out)


def in_vm() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return " hypervisor" in fh.read()
    except OSError:
        return False


def substitute(argv: Sequence[str], n: int) -> list[str]:
    return [a.replace(PLACEHOLDER, str(n)) for a in argv]


def parse_size(text: str) -> int:
    """'32M', '512K', '1G' or bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("KMG")) * mult)
    except ValueError:
        raise UserError(f"cannot read the size {text!r} (use e.g. 32M, 512K)") from None


@dataclass(frozen=True)
class Plan:
    """Everything checked before the first run."""

    argv: tuple[str, ...]
    counts: tuple[int, ...]
    cache: Cache
    cache_bytes: int
    profile_cpu: int
    pirate_cpu: int | None
    pirate: bool


def plan(argv: Sequence[str], counts: Sequence[int], *, cache_bytes: int | None = None,
         use_pirate: bool = True) -> Plan:
    """Check the inputs (UserError, one line, for each mistake) and choose the CPUs."""
    if not argv:
        raise UserError("no command: give 'scalestack pirate-stack --threads 1,2 -- CMD {threads}'")
    if not any(PLACEHOLDER in a for a in argv):
        raise UserError("the command has no {threads} placeholder for the thread count")
    if not counts or min(counts) < 1:
        raise UserError("thread counts must be positive integers")
    shim.check_preloadable(substitute(argv, counts[0]))
    cpus = sorted(os.sched_getaffinity(0))
    if max(counts) > len(cpus):
        raise UserError(f"thread count {max(counts)} is above the {len(cpus)} cores available for isolation "
                        f"(CPUs {','.join(map(str, cpus))}): each thread needs a core of its own in the real runs")
    cache = last_level_cache()
    c = cache_bytes or cache.size_bytes
    for n in counts:
        w = pirate_size(c, n)
        if w > cache.size_bytes:
            raise UserError(f"pirate size {w / 2**20:.1f} MiB (for N = {n}) is larger than the last-level cache "
                            f"({cache.size_bytes / 2**20:.1f} MiB, {cache.source})")
    sharing = [x for x in cpus if x in cache.cpus] or cpus
    mod = _pirate_module() if use_pirate else None
    pirate_cpu = None
    if mod is not None and max(counts) > 1:
        if len(sharing) < 2:
            raise UserError(f"the pirate needs a second core sharing the last-level cache with the profiled thread; "
                            f"only CPU {sharing[0]} is available")
        pirate_cpu = sharing[1]
    return Plan(tuple(argv), tuple(sorted(set(counts) | {1})), cache, c, sharing[0], pirate_cpu, mod is not None)


@dataclass(frozen=True)
class PirateStackResult(Result):
    """The stack with how it was measured.

    thread0_ns : per N, T_prof of thread 0 alone (the representative-thread variant).
    runs : one dict per program run (n, rep, kind, profiled thread, times in ns, segments).
    warnings : unsupported primitives, broken isolation, the VM caveats that apply.
    """

    stack: EklovStack
    command: tuple[str, ...]
    cache_bytes: int
    llc_source: str
    pirate: bool
    profile: str
    thread0_ns: Mapping[int, tuple[float, ...]]
    runs: tuple[dict, ...]
    warnings: tuple[str, ...] = ()

    kind = "eklov_pirate_stack"

    def rows(self) -> list[dict]:
        t1 = float(np.median(self.stack.t1_ns))
        out = []
        for row in self.stack.rows():
            t0 = self.thread0_ns.get(row["n"], ())
            row["s_pirate_thread0"] = t1 / float(np.median(t0)) if t0 else float("nan")
            out.append(row)
        return out

    def to_dict(self) -> dict:
        return {"command": list(self.command), "cache_bytes": self.cache_bytes, "llc_source": self.llc_source,
                "pirate": self.pirate, "profile": self.profile, "warnings": list(self.warnings),
                "rows": self.rows(), "stack": self.stack.to_dict(),
                "thread0_ns": {str(n): list(v) for n, v in self.thread0_ns.items()}, "runs": list(self.runs)}


def run_count(counts: Sequence[int], repeat: int, profile: str) -> int:
    cs = sorted(set(counts) | {1})
    return repeat * sum(2 + (n if profile == "all" else 1) for n in cs)


def measure(p: Plan, repeat: int = 3, *, profile: str = "all", timeout: float | None = 600,
            progress: Callable[[str], None] | None = None) -> PirateStackResult:
    """Run the matrix and build the stack. `progress(label)` is called after every run."""
    if profile not in ("all", "first"):
        raise ValueError("profile must be 'all' or 'first'")
    if repeat < 1:
        raise UserError("--repeat must be at least 1")
    mod = _pirate_module() if p.pirate else None
    meas: dict[int, list[float]] = {}
    nosync: dict[int, list[float]] = {}
    prof_all: dict[int, list[tuple[float, bool]]] = {}
    thread0: dict[int, list[float]] = {}
    discarded: dict[int, int] = {}
    runs: list[dict] = []
    unsupported: dict[str, int] = {}
    broken: dict[str, int] = {}
    isolated_runs = 0
    tick = progress or (lambda label: None)

    for n in p.counts:
        argv = substitute(p.argv, n)
        w = pirate_size(p.cache_bytes, n)
        pirate_ctx = mod.Pirate(w, p.pirate_cpu) if (mod is not None and w > 0 and p.pirate_cpu is not None) else None
        meas[n], nosync[n], prof_all[n], thread0[n], discarded[n] = [], [], [], [], 0
        with pirate_ctx if pirate_ctx is not None else _null() as pir:
            for rep in range(repeat):
                real = shim.threaded_log(shim.run(argv, "phase", timeout=timeout))
                meas[n].append(real.phase_ns)
                runs.append({"n": n, "rep": rep, "kind": "real", "phase_ns": real.phase_ns, "created": real.created})
                tick(f"N={n} real")
                tim = shim.threaded_log(shim.run(argv, "timing", timeout=timeout))
                nosync[n].append(tim.nosync_ns())
                for k, v in tim.unsupported.items():
                    unsupported[k] = max(unsupported.get(k, 0), v)
                runs.append({"n": n, "rep": rep, "kind": "timing", "phase_ns": tim.phase_ns,
                             "nosync_ns": tim.nosync_ns(), **tim.waits_ns()})
                tick(f"N={n} timing")
                per_thread = []
                for i in (range(n) if profile == "all" else [0]):
                    res = shim.run(argv, "isolate", profile_thread=i, profile_cpu=p.profile_cpu,
                                   pirate_ctl=pir.ctl_path if pir is not None else None, timeout=timeout)
                    iso = res.log.isolation
                    if iso is None or len(iso.segments) == 0:
                        raise UserError(f"{shlex.join(argv)}: the profiled thread {i} never ran under the shim "
                                        f"(the program created {res.log.created} threads)")
                    isolated_runs += 1
                    if iso.broken:
                        broken[iso.broken_why] = broken.get(iso.broken_why, 0) + 1
                    bad = 0
                    if pir is not None:
                        bad = sum(1 for _, _, lines, ns in iso.segments.tolist()
                                  if lines > 0 and not pir.segment_ok(int(lines), int(ns)))
                    discarded[n] += bad
                    per_thread.append((float(iso.cpu_ns), bad == 0))
                    if i == 0:
                        thread0[n].append(float(iso.cpu_ns))
                    runs.append({"n": n, "rep": rep, "kind": "isolated", "profiled": i, "prof_cpu_ns": iso.cpu_ns,
                                 "prof_mono_ns": iso.mono_ns, "segments": int(len(iso.segments)),
                                 "discarded_segments": bad, "broken": iso.broken_why or None,
                                 "pirate_bytes": w if pir is not None else 0})
                    tick(f"N={n} isolated thread {i}")
                prof_all[n].append((max(t for t, _ in per_thread), all(ok for _, ok in per_thread)))

    pirate_ns = {}
    for n, vals in prof_all.items():
        clean = [t for t, ok in vals if ok]
        pirate_ns[n] = clean or [t for t, _ in vals]
    stack = EklovStack.from_runs(meas[1], pirate_ns, nosync, meas, discarded=discarded)
    warns = warnings(p, unsupported, broken, isolated_runs)
    return PirateStackResult(stack, p.argv, p.cache_bytes, p.cache.source, mod is not None and p.pirate_cpu is not None,
                             profile, {n: tuple(v) for n, v in thread0.items()}, tuple(runs), tuple(warns))


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def warnings(p: Plan, unsupported: Mapping[str, int], broken: Mapping[str, int], isolated_runs: int) -> list[str]:
    """The method's limits that apply to this run (spec §3 and §5), one sentence each."""
    out = []
    used = {k: v for k, v in unsupported.items() if v}
    if used:
        names = ", ".join(f"{k}s ({v} calls)" for k, v in used.items())
        out.append(f"unsupported synchronization: the program uses {names}; waits on them are not measured, "
                   "so the sync component is underestimated (that waiting is counted as work)")
    for why, k in broken.items():
        out.append(f"isolation ended early in {k} of {isolated_runs} isolated runs ({why}); the rest of those "
                   "runs' profiled time was measured with the other threads running")
    if max(p.counts) > 1 and not (p.pirate and p.pirate_cpu is not None):
        out.append("no cache pirate in this build: the isolated runs had the whole cache, so the cache component "
                   "is not measured (it shows up in memory)")
    if in_vm():
        out.append(f"virtual machine: the cache size ({p.cache.size_bytes / 2**20:.0f} MiB, read from "
                   f"{p.cache.source}) may be the host's, and other tenants share it, so the share the target "
                   "really gets is uncertain")
    out.append("no hardware counters: curves are time based and the pirate is checked by its time per cache line "
               "instead of its miss ratio")
    cpus = sorted(os.sched_getaffinity(0))
    if all(c in p.cache.cpus for c in cpus):
        out.append("one cache domain: the held threads run on cores sharing the last-level cache, so they evict "
                   "the profiled thread's data between segments (worst with short barrier intervals)")
    return out
