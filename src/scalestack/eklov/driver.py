"""The measurement matrix behind `scalestack pirate-stack`: N x {real, real + timing, isolated + pirate}
x repeats, turned into an EklovStack (spec §2.5).

Per thread count N and repeat:
  real      the shim in "phase" mode (create/join timestamps only): T(N) is the parallel phase;
  timing    the shim times every lock, barrier and join wait: T_nosync(N) = max_i (t_i - t_{l+b,i});
  isolated  the shim runs one profiled thread alone between barriers, next to a pirate holding
            W = C (N-1)/N of the last-level cache: T_prof(N) is that thread's CPU time in its
            segments, and S_pirate(N) = T_prof(1) / T_prof(N).  `profile="all"` profiles each thread in its own run and keeps max_i (the
            slowest-thread rule, spec [our choice]); thread 0's time is kept too.
Bad input is refused before anything runs: a program LD_PRELOAD cannot enter, a thread count above
the cores isolation can use, a pirate larger than the last-level cache.
"""

from __future__ import annotations

import contextlib
import os
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
    from scalestack.eklov import pirate

    return pirate


def last_level_cache() -> Cache:
    """The LLC as the pirate module reads it from sysfs."""
    info = _pirate_module().llc_info(0)
    return Cache(info.size_bytes, tuple(info.cpus), info.source)


def in_vm() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return " hypervisor" in fh.read()
    except OSError:
        return False


def substitute(argv: Sequence[str], n: int) -> list[str]:
    return [a.replace(PLACEHOLDER, str(n)) for a in argv]


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
    scope: str = "phase"

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
        return {"command": list(self.command), "scope": self.scope, "cache_bytes": self.cache_bytes,
                "llc_source": self.llc_source,
                "pirate": self.pirate, "profile": self.profile, "warnings": list(self.warnings),
                "rows": self.rows(), "stack": self.stack.to_dict(),
                "thread0_ns": {str(n): list(v) for n, v in self.thread0_ns.items()}, "runs": list(self.runs)}

    @classmethod
    def from_dict(cls, d: Mapping) -> PirateStackResult:
        return cls(stack=EklovStack.from_dict(d["stack"]), command=tuple(d["command"]),
                   cache_bytes=int(d["cache_bytes"]), llc_source=str(d["llc_source"]), pirate=bool(d["pirate"]),
                   profile=str(d["profile"]),
                   thread0_ns={int(n): tuple(float(t) for t in v) for n, v in d.get("thread0_ns", {}).items()},
                   runs=tuple(d.get("runs", ())), warnings=tuple(d.get("warnings", ())),
                   scope=str(d.get("scope", "phase")))


def run_count(counts: Sequence[int], repeat: int, profile: str) -> int:
    cs = sorted(set(counts) | {1})
    return repeat * sum(2 + (n if profile == "all" else 1) for n in cs)


def _isolated_time(log: shim.ShimLog) -> tuple[int, bool]:
    """T_prof of one isolated run in CPU time, and whether isolation held.

    Held: the profiled thread's CPU time summed over its segments between barriers (the counter-free
    stand-in for the paper's unhalted cycles; its monotonic time is kept in the runs). Isolation
    does not hold when the profiled thread waited on a condition variable or was never created, or
    when the program uses primitives the method does not support at all (a held thread may be the
    one a condition variable waits for). Then the CPU-time no-sync estimate of that run stands in
    (per thread, CPU time less the CPU spent inside waits; the pirate ran beside it, and so did the
    program's other threads). CPU time, because in that run the threads and the pirate compete for
    the cores, and other jobs on the machine do too; the curve is a ratio of CPU times."""
    iso = log.isolation
    if iso is not None and not iso.broken and len(iso.segments) and not any(log.unsupported.values()):
        return iso.cpu_ns, True
    return log.nosync_cpu_ns(), False


def measure(p: Plan, repeat: int = 3, *, profile: str = "all", scope: str = "auto", timeout: float | None = 600,
            progress: Callable[[str], None] | None = None) -> PirateStackResult:
    """Run the matrix and build the stack. `progress(label)` is called after every run.

    scope: "phase" times the parallel phase (first pthread_create to last join, the paper's
    scope); "process" the whole run, the serial part outside the phase added to every curve's
    time; "auto" is "phase" unless some run created no thread (its phase would be the whole
    process, and the counts would not compare)."""
    if profile not in ("all", "first"):
        raise ValueError("profile must be 'all' or 'first'")
    if scope not in ("auto", "phase", "process"):
        raise UserError(f"--scope must be auto, phase or process, not {scope!r}")
    if repeat < 1:
        raise UserError("--repeat must be at least 1")
    mod = _pirate_module() if p.pirate else None
    raw: dict[int, dict[str, list]] = {}
    discarded: dict[int, int] = {}
    runs: list[dict] = []
    unsupported: dict[str, int] = {}
    broken: dict[str, int] = {}
    isolated_runs = 0
    no_threads = False
    loads: list[float] = []
    tick = progress or (lambda label: None)

    sized = {n: pirate_size(p.cache_bytes, n) for n in p.counts}
    for n in p.counts:
        raw[n] = {"meas": [], "nosync": [], "prof": [], "thread0": []}
        discarded[n] = 0
    with contextlib.ExitStack() as pirates_open:
        # one lockstep pirate per size, parked between runs, and the repeats outermost: each repeat
        # measures every count in turn, so a slow spell of the machine (or a change in the cache it
        # leaves us) touches T(1) and T(N) alike instead of one count's repeats only
        pirates = {n: pirates_open.enter_context(mod.Pirate(sized[n], p.pirate_cpu)) for n in p.counts
                   if mod is not None and sized[n] > 0 and p.pirate_cpu is not None}
        for rep in range(repeat):
            for n in p.counts:
                argv = substitute(p.argv, n)
                w = sized[n]
                r = raw[n]
                pir = pirates.get(n)
                real_run = shim.run(argv, "phase", timeout=timeout)
                loads.append(real_run.foreign_load)
                real = shim.threaded_log(real_run)
                no_threads |= real.created == 0
                r["meas"].append((real.phase_ns, real.serial_ns))
                runs.append({"n": n, "rep": rep, "kind": "real", "phase_ns": real.phase_ns,
                             "process_ns": real.process_ns, "created": real.created,
                             "foreign_load": real_run.foreign_load})
                tick(f"N={n} real")
                tim = shim.threaded_log(shim.run(argv, "timing", timeout=timeout))
                r["nosync"].append((tim.nosync_ns(), tim.serial_ns))
                for k, v in tim.unsupported.items():
                    unsupported[k] = max(unsupported.get(k, 0), v)
                runs.append({"n": n, "rep": rep, "kind": "timing", "phase_ns": tim.phase_ns,
                             "process_ns": tim.process_ns, "nosync_ns": tim.nosync_ns(), **tim.waits_ns(),
                             "unsupported": dict(tim.unsupported)})
                tick(f"N={n} timing")
                per_thread = []
                for i in (range(n) if profile == "all" else [0]):
                    res = shim.run(argv, "isolate", profile_thread=i, profile_cpu=p.profile_cpu,
                                   pirate_ctl=pir.ctl_path if pir is not None else None, timeout=timeout)
                    log = res.log
                    iso = log.isolation
                    t_prof, held = _isolated_time(log)
                    isolated_runs += 1
                    why = ("" if held else iso.broken_why if iso is not None and iso.broken else
                           "the program created no thread" if log.created == 0 else
                           "the program uses " + ", ".join(k + "s" for k, v in log.unsupported.items() if v)
                           if any(log.unsupported.values()) else "the profiled thread had no segment")
                    if not held and log.created > 0:
                        broken[why] = broken.get(why, 0) + 1
                    bad = 0
                    if pir is not None and iso is not None:
                        bad = sum(1 for _, _, lines, ns in iso.segments.tolist()
                                  if lines > 0 and not pir.segment_ok(int(lines), int(ns)))
                    discarded[n] += bad
                    per_thread.append((t_prof, bad == 0))
                    if i == 0:
                        r["thread0"].append((t_prof, log.serial_ns))
                    runs.append({"n": n, "rep": rep, "kind": "isolated", "profiled": i, "prof_ns": t_prof,
                                 "isolated": held, "prof_mono_ns": iso.mono_ns if iso is not None else None,
                                 "segments": int(len(iso.segments)) if iso is not None else 0,
                                 "discarded_segments": bad, "broken": why or None, "process_ns": log.process_ns,
                                 "pirate_bytes": w if pir is not None else 0})
                    tick(f"N={n} isolated thread {i}")
                    if not held:  # the other threads would not isolate either: one run stands for all
                        for _ in range(i + 1, n if profile == "all" else 1):
                            tick(f"N={n} isolated (skipped)")
                        break
                r["prof"].append((max(t for t, _ in per_thread), all(ok for _, ok in per_thread), log.serial_ns))

    whole = scope == "process" or (scope == "auto" and no_threads)

    def times(pairs):
        return [t + (serial if whole else 0) for t, serial in pairs]

    meas = {n: times(r["meas"]) for n, r in raw.items()}
    nosync = {n: times(r["nosync"]) for n, r in raw.items()}
    # T_prof is CPU time: S_pirate(N) = T_prof(1) / T_prof(N) in CPU time, expressed as wall-clock
    # equivalents (scaled by T(1) / T_prof(1)) so the stack's one T(1) serves every curve.
    t1_cpu = float(np.median([t for t, _, _ in raw[1]["prof"]]))
    t1_wall = float(np.median([t for t, _ in raw[1]["meas"]]))
    scale = t1_wall / t1_cpu if t1_cpu > 0 else 1.0

    def prof_times(pairs):
        return times([(t * scale, serial) for t, serial in pairs])

    pirate_ns = {}
    for n, r in raw.items():
        clean = [(t, s) for t, ok, s in r["prof"] if ok]
        pirate_ns[n] = prof_times(clean or [(t, s) for t, _, s in r["prof"]])
    thread0 = {n: tuple(prof_times(r["thread0"])) for n, r in raw.items()}
    stack = EklovStack.from_runs(meas[1], pirate_ns, nosync, meas, discarded=discarded)
    warns = [*stack.warnings, *warnings(p, unsupported, broken, isolated_runs)]
    busy = [x for x in loads if x == x]
    if busy and float(np.median(busy)) > 0.05:
        warns.insert(0, f"other processes used {float(np.median(busy)):.0%} of the CPUs during the real runs (median): "
                     "wall-clock times are inflated and noisy; repeat when the machine is quiet")
    if whole:
        warns.insert(0, "times are whole runs (the serial part outside the parallel phase included"
                     + (", because a run created no thread)" if scope == "auto" else ")"))
    return PirateStackResult(stack, p.argv, p.cache_bytes, p.cache.source, mod is not None and p.pirate_cpu is not None,
                             profile, thread0, tuple(runs), tuple(warns), "process" if whole else "phase")


def warnings(p: Plan, unsupported: Mapping[str, int], broken: Mapping[str, int], isolated_runs: int) -> list[str]:
    """The method's limits that apply to this run (spec §3 and §5), one sentence each."""
    out = []
    used = {k: v for k, v in unsupported.items() if v}
    if used:
        names = ", ".join(f"{k}s ({v} calls)" for k, v in used.items())
        out.append(f"unsupported synchronization: the program uses {names}; waits on them are not measured, "
                   "so the sync component is underestimated (that waiting is counted as work)")
    for why, k in broken.items():
        out.append(f"isolation was not possible in {k} of {isolated_runs} isolated runs ({why}); for those the "
                   "CPU-time no-sync estimate of a run beside the pirate, the program's other threads running, stands in "
                   "for the isolated time (approximate pirate curve)")
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
