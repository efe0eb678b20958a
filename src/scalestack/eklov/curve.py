"""Stand-alone Cache Pirating: a program's time as a function of the cache it is left (spec §2.3).

The target (single-threaded, or run with one thread) runs pinned to one CPU while a pirate on a CPU
sharing the LLC holds W bytes, so the target keeps about C - W. Two ways: one run per W and repeat,
the repeats going round the sizes (`pirate_curve`: any program, fixed work timed whole), or the
paper's single run with W changing every few hundred ms (`one_run_curve`: one run, but it needs a
measure of the work done in a window, here the bytes the program reads and writes). Each run or
window is one segment of a lockstep pirate driven from here (re-warmed before, parked after) and
checked by the pirate's time per line over it. Where
`perf stat` can count cycles, instructions and LLC misses, CPI(c) and bandwidth(c) are added;
where it cannot (a VM, as here) the result says so once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scalestack.eklov.pirate import LLCInfo
from scalestack.errors import UserError
from scalestack.results import Result
from scalestack.tools import which

_EVENTS = ("cycles", "instructions", "LLC-load-misses")


class RunTooShort(UserError):
    """The program ended before every pirate size had its windows: a longer run measures it."""


def counters_notice() -> str | None:
    """None when perf can count cycles, instructions and LLC misses here, else why not (one line)."""
    if which("perf") is None:
        return "perf is not installed: time(cache size) only, no CPI(c) or bandwidth(c)"
    try:
        res = subprocess.run(["perf", "stat", "-x", ",", "-e", ",".join(_EVENTS), "true"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"perf stat failed ({exc}): time(cache size) only, no CPI(c) or bandwidth(c)"
    bad = [e for e in _EVENTS if not any(line.split(",")[2:3] == [e] and line.split(",")[0][:1].isdigit()
                                         for line in res.stderr.splitlines())]
    if res.returncode != 0 or bad:
        return (f"hardware counters not supported here (perf stat: {', '.join(bad) or 'error'}): "
                "time(cache size) only, no CPI(c) or bandwidth(c)")
    return None


def _perf_counts(path: str) -> dict[str, float]:
    out: dict[str, float] = {}
    with open(path) as fh:
        for line in fh:
            parts = line.strip().split(",")
            if len(parts) > 2 and parts[2] in _EVENTS and parts[0].replace(".", "", 1).isdigit():
                out[parts[2]] = float(parts[0])
    return out


@dataclass(frozen=True)
class PirateCurve(Result):
    """time(cache size): per pirate size W, the repeats of the target's time with about C - W left."""

    argv: tuple[str, ...]
    llc_bytes: int
    llc_source: str
    line_bytes: int
    sizes: tuple[int, ...]
    times_ns: Mapping[int, tuple[float, ...]]
    discarded: Mapping[int, int]
    clock: str = "cpu"
    counters: Mapping[int, tuple[dict, ...]] = field(default_factory=dict)
    notice: str | None = None
    # one run (--one-run): times_ns holds one whole-run time per measured window, and estimate_ns the
    # curve's point, total progress x (time / progress summed over the size's clean windows)
    mode: str = "runs"
    progress: str | None = None
    estimate_ns: Mapping[int, float] = field(default_factory=dict)

    kind = "pirate_curve"

    def _point(self, w: int) -> float:
        return float(self.estimate_ns[w]) if w in self.estimate_ns else float(np.median(self.times_ns[w]))

    def rows(self) -> list[dict]:
        base = self._point(self.sizes[0]) if self.sizes else float("nan")
        out = []
        for w in self.sizes:
            t = np.asarray(self.times_ns[w], dtype=float)
            med = self._point(w)
            row = {"pirate_bytes": w, "cache_bytes": self.llc_bytes - w, "time_ns": med,
                   "time_min_ns": float(t.min()), "time_max_ns": float(t.max()),
                   "slowdown": med / base, "discarded": int(self.discarded.get(w, 0)), "runs": int(t.size)}
            cs = self.counters.get(w, ())
            if cs:
                cyc = np.median([c.get("cycles", np.nan) for c in cs])
                ins = np.median([c.get("instructions", np.nan) for c in cs])
                miss = np.median([c.get("LLC-load-misses", np.nan) for c in cs])
                row["cpi"] = float(cyc / ins) if ins else float("nan")
                row["bandwidth_mb_s"] = float(miss * self.line_bytes / med * 1e3)
            out.append(row)
        return out

    def to_dict(self) -> dict:
        return {"argv": list(self.argv), "llc_bytes": self.llc_bytes, "llc_source": self.llc_source,
                "clock": self.clock, "notice": self.notice, "mode": self.mode, "progress": self.progress,
                "rows": self.rows(),
                "times_ns": {str(w): list(v) for w, v in self.times_ns.items()}}


def default_sizes(llc_bytes: int, line: int = 64) -> list[int]:
    """W = 0, C/2, 3C/4, 7C/8, 15C/16 and C (less a line): most points where the target's share is small."""
    return [0, llc_bytes // 2, 3 * llc_bytes // 4, 7 * llc_bytes // 8, 15 * llc_bytes // 16, llc_bytes - line]


def _plan(argv: Sequence[str], sizes: Sequence[int] | None, cpu: int | None,
          pirate_cpu: int | None) -> tuple[LLCInfo, list[int], int, int | None]:
    """Check a curve's inputs before anything runs: (the LLC, the sorted sizes, the program's CPU,
    the pirate's CPU or None when no size needs one)."""
    from scalestack.eklov.instances import _cpus
    from scalestack.eklov.pirate import llc_info

    if not argv:
        raise UserError("no command: give 'scalestack pirate-curve -- CMD'")
    llc = llc_info(0 if cpu is None else cpu)
    sizes = sorted({int(w) for w in (sizes if sizes is not None else default_sizes(llc.size_bytes, llc.line_bytes))})
    for w in sizes:
        if w < 0:
            raise UserError(f"pirate size {w} is negative")
        if w > llc.size_bytes:
            raise UserError(f"pirate size {w / 2**20:.1f} MiB is larger than the last-level cache "
                            f"({llc.size_bytes / 2**20:.1f} MiB, {llc.source}); give sizes up to the cache size")
    cpus = _cpus(llc.cpus)
    target = cpus[0] if cpu is None else cpu
    if pirate_cpu is None:
        others = [c for c in cpus if c != target]
        if not others and any(w > 0 for w in sizes):
            raise UserError("the pirate needs a second CPU sharing the last-level cache; only one is available")
        pirate_cpu = others[0] if others else None
    return llc, sizes, target, pirate_cpu


def pirate_curve(argv: Sequence[str], sizes: Sequence[int] | None = None, repeat: int = 3, *,
                 cpu: int | None = None, pirate_cpu: int | None = None, threshold: float = 1.5,
                 clock: str = "cpu", timeout: float = 600.0, counters: bool | None = None,
                 progress: Callable[[str], None] | None = None) -> PirateCurve:
    """Run `argv` next to a pirate of each size in `sizes` (bytes; default default_sizes)."""
    from scalestack.eklov.instances import co_run
    from scalestack.eklov.pirate import Pirate

    if repeat < 1:
        raise UserError("--repeat must be at least 1")
    llc, sizes, target, pirate_cpu = _plan(argv, sizes, cpu, pirate_cpu)
    notice = counters_notice() if counters is None or counters else None
    use_perf = counters is not False and notice is None
    tick = progress or (lambda _label: None)

    def one(pir) -> tuple[float, bool, dict]:
        run = list(argv)
        out = None
        if use_perf:
            fd, out = tempfile.mkstemp(suffix=".perf")
            os.close(fd)
            run = ["perf", "stat", "-x", ",", "-o", out, "-e", ",".join(_EVENTS), "--", *run]
        if pir is None:
            t, ok = co_run(run, [target], timeout, clock)[0], True
        else:
            with pir.segment() as seg:
                t = co_run(run, [target], timeout, clock)[0]
            ok = seg["ok"]
        counts = {}
        if out is not None:
            counts = _perf_counts(out)
            os.unlink(out)
        return t, ok, counts

    clean: dict[int, list[float]] = {w: [] for w in sizes}
    flagged: dict[int, list[float]] = {w: [] for w in sizes}
    cs: dict[int, list[dict]] = {w: [] for w in sizes}
    with contextlib.ExitStack() as stack:
        # one parked lockstep pirate per size, each re-warmed for its run: the repeats go round the
        # sizes, so a slow spell of the shared machine touches every point of the curve alike
        pirates = {w: stack.enter_context(Pirate(w, pirate_cpu, threshold=threshold)) if w >= llc.line_bytes else None
                   for w in sizes}
        for _ in range(repeat):
            for w in sizes:
                t, ok, counts = one(pirates[w])
                (clean if ok else flagged)[w].append(t)
                cs[w].append(counts)
                tick(f"W={w / 2**20:.1f} MiB")
    times = {w: tuple(clean[w] or flagged[w]) for w in sizes}
    discarded = {w: len(flagged[w]) for w in sizes}
    perf = {w: tuple(cs[w]) for w in sizes} if use_perf else {}
    return PirateCurve(tuple(argv), llc.size_bytes, llc.source, llc.line_bytes, tuple(sizes), times, discarded,
                       clock, perf, notice)


def _proc_progress(pid: int, what: str) -> int:
    """The program's progress so far as --progress counts it: bytes it read and wrote through
    system calls (/proc/PID/io rchar + wchar, all its threads)."""
    with open(f"/proc/{pid}/io") as fh:
        fields = dict(line.split(":", 1) for line in fh if ":" in line)
    if what == "read":
        return int(fields["rchar"])
    return int(fields["rchar"]) + int(fields["wchar"])


def _proc_cpu_ns(pid: int) -> int:
    """CPU time of the whole program, ns: the kernel's process CPU clock (CPUCLOCK_SCHED of the pid,
    `clock_getcpuclockid`), which keeps the time of threads that have ended. A sum over the live
    threads' schedstat drops when a thread ends, and a window with a thread's end in it measured a
    negative time."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def _exited(pid: int) -> bool:
    """True once the program has ended; it is left unreaped so its /proc counters stay readable."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


PROGRESS = ("io", "read", "instructions")
MIN_WINDOWS = 3  # per size, so a point is more than one moment of the program


def one_run_curve(argv: Sequence[str], sizes: Sequence[int] | None = None, *, hold: float = 0.25,
                  settle: float = 0.05, progress_by: str = "io", cpu: int | None = None,
                  pirate_cpu: int | None = None, threshold: float = 1.5, clock: str = "cpu",
                  timeout: float = 600.0, seed: int = 0, counter_event: str = "instructions",
                  progress: Callable[[str], None] | None = None) -> PirateCurve:
    """time(cache size) from ONE run of `argv`, the pirate changing W every `hold` seconds (spec
    §2.3's stand-alone mode).

    The work done in a window is the program's progress: progress_by="instructions" counts its
    user-mode instructions where the machine has the counter (the paper's measure; not on this VM);
    without counters "io" takes the bytes it read and wrote through system calls and "read" the bytes
    read, which suits programs that stream their input (compressors, filters, checksums). Each window: the
    pirate takes the next size (the sizes go round in a new random order each round, so a phase of
    the program falls on every size alike), re-warms while the program runs on, then `settle`
    seconds pass (the cache settles to the new split) before `hold` seconds are measured: the
    program's CPU (or wall) time and progress over them, and the pirate's self-check. A size's point
    is the run's total progress x its windows' summed time / summed progress. (`counter_event` lets
    the tests run the counter path with a software event on a machine without hardware counters.)
    """
    import random

    from scalestack.eklov.counter import EventCounter
    from scalestack.eklov.instances import exit_error, pinned
    from scalestack.eklov.pirate import MAX_SIZES, Pirate

    if progress_by not in PROGRESS:
        raise UserError(f"--progress must be one of {', '.join(PROGRESS)}, not {progress_by!r}")
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be cpu or wall, not {clock!r}")
    if not hold > 0 or settle < 0:
        raise UserError("--hold must be positive and the settle time not negative")
    llc, sizes, target, pirate_cpu = _plan(argv, sizes, cpu, pirate_cpu)
    if progress_by == "instructions":
        EventCounter(os.getpid(), counter_event).close()  # no counter here: say so before anything starts
    pirated = [w for w in sizes if w >= llc.line_bytes]
    if len(pirated) > MAX_SIZES:
        raise UserError(f"one run holds at most {MAX_SIZES} pirate sizes besides 0 ({len(pirated)} given): "
                        "give fewer --sizes, or measure one run per size without --one-run")
    if len(sizes) < 2:
        raise UserError("--one-run needs at least two sizes to compare (e.g. --sizes 0,4M)")
    tick = progress or (lambda _label: None)
    rng = random.Random(seed)
    windows: dict[int, list[tuple[float, float, bool]]] = {w: [] for w in sizes}
    with contextlib.ExitStack() as stack:
        pirate = stack.enter_context(Pirate(pirated, pirate_cpu, threshold=threshold)) if pirated else None
        err = stack.enter_context(tempfile.TemporaryFile())
        run, gate = list(argv), None
        if progress_by == "instructions":
            # a counter inherits only into threads created after it is opened: the program waits
            # for it behind a small launcher that reads a pipe, then execs (the counter stays with the pid)
            if shutil.which(argv[0]) is None:
                raise UserError(f"cannot run {argv[0]}: not found or not executable")
            wait_fd, gate = os.pipe()
            stack.callback(os.close, gate)
            stack.callback(os.close, wait_fd)
            run = [sys.executable, "-c", "import os, sys; fd = int(sys.argv[1]); os.read(fd, 1); os.close(fd); "
                   "os.execvp(sys.argv[2], sys.argv[2:])", str(wait_fd), *argv]
        try:
            proc = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=err, pass_fds=(wait_fd,) if gate else (),
                                    preexec_fn=pinned(target))
        except OSError as exc:
            raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
        stack.callback(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        start = time.monotonic()
        counter = None
        if gate is not None:
            counter = stack.enter_context(EventCounter(proc.pid, counter_event))
            os.write(gate, b"go\n")

        def work() -> int:
            return counter.read() if counter is not None else _proc_progress(proc.pid, progress_by)

        def reading() -> tuple[int, int]:
            t = _proc_cpu_ns(proc.pid) if clock == "cpu" else time.monotonic_ns()
            return t, work()

        def measure() -> tuple[float, float] | None:
            time.sleep(settle)
            if _exited(proc.pid):
                return None
            t0, p0 = reading()
            time.sleep(hold)
            if _exited(proc.pid):  # ended inside the window: its end is not a steady state
                return None
            t1, p1 = reading()
            return float(t1 - t0), float(p1 - p0)

        done = False
        while not done:
            order = list(sizes)
            rng.shuffle(order)
            for w in order:
                if _exited(proc.pid) or time.monotonic() - start > timeout:
                    done = True
                    break
                if w in pirated:
                    pirate.hold(w)
                    with pirate.segment() as seg:
                        got = measure()
                    ok = seg["ok"]
                else:
                    got, ok = measure(), True
                if got is not None:
                    windows[w].append((*got, ok))
                    tick(f"W={w / 2**20:.1f} MiB")
        if not _exited(proc.pid):
            raise UserError(f"{argv[0]} did not end within {timeout:g} s")
        total = work()
        _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise exit_error(argv, proc.returncode, err.read().decode(errors="replace"))
    short = [w for w in sizes if len(windows[w]) < MIN_WINDOWS]
    if short:
        raise RunTooShort(f"{argv[0]} ended before every pirate size had {MIN_WINDOWS} windows ({len(short)} of "
                        f"{len(sizes)} had fewer): give it more work, or a shorter --hold")
    if total <= 0 or not any(p > 0 for ws in windows.values() for _, p, _ in ws):
        seen = "no instructions counted" if progress_by == "instructions" else "it read and wrote nothing through system calls"
        raise UserError(f"{argv[0]} made no progress that --progress {progress_by} can see ({seen} while measured; "
                        "a wrapper script's children are not counted, give the program itself): "
                        "measure one run per size without --one-run")
    times, estimate, discarded = {}, {}, {}
    for w in sizes:
        clean = [(t, p) for t, p, ok in windows[w] if ok] or [(t, p) for t, p, _ in windows[w]]
        discarded[w] = sum(1 for *_, ok in windows[w] if not ok) if any(ok for *_, ok in windows[w]) else 0
        sum_t, sum_p = sum(t for t, _ in clean), sum(p for _, p in clean)
        estimate[w] = total * sum_t / sum_p if sum_p > 0 else float("nan")  # no progress seen at this size
        times[w] = tuple(total * t / p for t, p in clean if p > 0) or (estimate[w],)
    every = [p for ws in windows.values() for _, p, _ in ws]
    idle = sum(1 for p in every if p <= 0)
    notice = None
    if idle > len(every) // 4:  # work that shows in bursts (read-ahead, a final write): the ratios mean little
        notice = (f"{idle} of {len(every)} windows saw no progress: {argv[0]}'s work does not show steadily as "
                  f"--progress {progress_by}; this curve is unreliable, measure one run per size without --one-run")
    return PirateCurve(tuple(argv), llc.size_bytes, llc.source, llc.line_bytes, tuple(sizes), times, discarded,
                       clock, {}, notice, mode="one-run", progress=progress_by, estimate_ns=estimate)


def figure(curve: PirateCurve):
    """time(cache size) (and CPI/bandwidth when counted), the paper's stand-alone curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(curve.rows(), key=lambda r: r["cache_bytes"])
    x = [r["cache_bytes"] / 2**20 for r in rows]
    has_cpi = any("cpi" in r for r in rows)
    fig, axes = plt.subplots(1, 3 if has_cpi else 1, figsize=(11 if has_cpi else 5.5, 3.6), squeeze=False)
    ax = axes[0][0]
    med = [r["time_ns"] / 1e6 for r in rows]
    err = [[m - r["time_min_ns"] / 1e6 for m, r in zip(med, rows, strict=True)],
           [r["time_max_ns"] / 1e6 - m for m, r in zip(med, rows, strict=True)]]
    ax.errorbar(x, med, yerr=err, marker="o", capsize=3, color="#1f77b4")
    for xi, mi, r in zip(x, med, rows, strict=True):
        if r["discarded"]:
            ax.annotate(f"{r['discarded']} flagged", (xi, mi), fontsize=7, color="#d62728")
    ax.set_xlabel("cache left to the program (MiB, C - W)")
    ax.set_ylabel(f"time per run ({curve.clock}, ms)")
    ax.set_title("time(cache size)" + (f", one run (work: {curve.progress})" if curve.mode == "one-run" else ""))
    ax.grid(alpha=0.3)
    if has_cpi:
        axes[0][1].plot(x, [r.get("cpi", np.nan) for r in rows], marker="o")
        axes[0][1].set_title("CPI(c)")
        axes[0][2].plot(x, [r.get("bandwidth_mb_s", np.nan) for r in rows], marker="o")
        axes[0][2].set_title("bandwidth(c), MB/s")
        for a in axes[0][1:]:
            a.set_xlabel("cache left (MiB)")
            a.grid(alpha=0.3)
    if curve.notice:
        fig.text(0.01, -0.02, curve.notice, fontsize=7, color="#555555", ha="left", va="top")
    fig.tight_layout()
    return fig


def write(curve: PirateCurve, out_dir: str) -> list[str]:
    """pirate_curve.json, .png and .svg in `out_dir`, each written whole or not at all."""
    from scalestack.fileio import atomic_write, output_dir
    from scalestack.report.figures import render

    output_dir(out_dir)
    paths = []
    atomic_write(os.path.join(out_dir, "pirate_curve.json"), curve.to_json().encode())
    paths.append(os.path.join(out_dir, "pirate_curve.json"))
    for fmt in ("png", "svg"):
        path = os.path.join(out_dir, f"pirate_curve.{fmt}")
        atomic_write(path, render(figure(curve), fmt))
        paths.append(path)
    return paths
