"""The multi-instance speedup stack: N copies of a single-threaded program (spec §1, §2.6; paper §5).

No shim: Thr_pirate(N) comes from one instance run next to a pirate holding C(N-1)/N of the LLC
(driven from here: re-warmed before each run, parked after it, checked per run), Thr_meas(N) from N instances co-run, pinned round-robin over the CPUs. With no counters the
runs are fixed work and timed as processes (time per run replaces CPI/IPC, spec §3; by default
their CPU time, since other jobs share this machine's CPUs), so
Thr_pirate(N) = N T_alone / T_pirate(N) and Thr_meas(N) = N T_alone / mean_i T_i(N). There is no sync.
N = 1 needs no separate runs: a pirate of size 0 and one co-run instance are both "alone".
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from scalestack.eklov.stack import EklovStack, pirate_size
from scalestack.errors import UserError


def pinned(cpu: int | None) -> Callable[[], None] | None:
    """A preexec_fn that pins the child to `cpu` (None: no pinning)."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def co_run(argv: Sequence[str], cpus: Sequence[int | None], timeout: float = 600.0,
           clock: str = "cpu") -> list[float]:
    """Start one copy of `argv` per entry of `cpus` (pinned there) at once; each copy's time, ns.

    clock="cpu": the copy's user + system CPU time (for single-threaded fixed work: the time it ran,
    cache and memory stalls included, descheduling by other jobs on a shared machine excluded);
    clock="wall": from its start to its exit.
    """
    if not argv:
        raise UserError("no command to run")
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be cpu or wall, not {clock!r}")
    procs: list[subprocess.Popen] = []
    starts: list[int] = []
    out = [0.0] * len(cpus)
    status = [0] * len(cpus)
    try:
        for cpu in cpus:
            starts.append(time.monotonic_ns())
            try:
                procs.append(subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                              preexec_fn=pinned(cpu)))
            except OSError as exc:
                raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None

        def wait(i: int) -> None:
            killer = threading.Timer(timeout, procs[i].kill)
            killer.start()
            try:
                _, st, ru = os.wait4(procs[i].pid, 0)  # reaped here, with its resource usage
            finally:
                killer.cancel()
            end = time.monotonic_ns()
            procs[i].returncode = status[i] = os.waitstatus_to_exitcode(st)
            out[i] = (ru.ru_utime + ru.ru_stime) * 1e9 if clock == "cpu" else float(end - starts[i])

        waiters = [threading.Thread(target=wait, args=(i,)) for i in range(len(procs))]
        for w in waiters:
            w.start()
        for w in waiters:
            w.join()
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                p.wait()
    for p in procs:
        err = p.stderr.read().decode(errors="replace").strip() if p.stderr else ""
        if p.stderr:
            p.stderr.close()
        if p.returncode != 0:
            raise exit_error(argv, p.returncode, err)
    return out


def exit_error(argv: Sequence[str], status: int, stderr: str) -> UserError:
    """The one line for a measured program that failed: its status and the last line it printed."""
    lines = stderr.strip().splitlines()
    return UserError(f"{argv[0]} exited with status {status}" + (f": {lines[-1]}" if lines else ""))


def _cpus(cache_cpus: Sequence[int]) -> list[int]:
    allowed = sorted(os.sched_getaffinity(0))
    shared = [c for c in cache_cpus if c in allowed]
    return shared if len(shared) >= 2 else allowed


def instance_stack(argv: Sequence[str], counts: Sequence[int] = (1, 2), repeat: int = 3, *,
                   cache_bytes: int | None = None, cpu: int | None = None, pirate_cpu: int | None = None,
                   threshold: float = 1.5, timeout: float = 600.0, clock: str = "cpu",
                   progress: Callable[[str], None] | None = None) -> EklovStack:
    """Cache and memory components for N copies of the single-threaded `argv` (mode="instances").

    Each pirate run is one segment of a lockstep pirate, checked by its time per line over the run;
    a run it flags is counted in `discarded` and left out unless every run was flagged.
    """
    from scalestack.eklov.pirate import Pirate, llc_info

    counts = sorted({int(n) for n in counts})
    if not counts or counts[0] < 1:
        raise UserError("instance counts must be positive integers")
    if repeat < 1:
        raise UserError("repeat must be at least 1")
    llc = llc_info(0 if cpu is None else cpu)
    c = int(cache_bytes) if cache_bytes else llc.size_bytes
    if c > llc.size_bytes:
        raise UserError(f"cache size {c / 2**20:.1f} MiB is larger than the last-level cache "
                        f"({llc.size_bytes / 2**20:.1f} MiB, {llc.source})")
    cpus = _cpus(llc.cpus)
    target = cpus[0] if cpu is None else cpu
    others = [x for x in cpus if x != target]
    if pirate_cpu is None and max(counts) > 1:
        if not others:
            raise UserError("the pirate needs a second CPU sharing the last-level cache; only one is available")
        pirate_cpu = others[0]
    tick = progress or (lambda _label: None)

    sized = {n: pirate_size(c, n) for n in counts}
    pirated = [n for n in counts if n > 1 and sized[n] >= llc.line_bytes]
    alone: list[float] = []
    clean: dict[int, list[float]] = {n: [] for n in pirated}
    flagged: dict[int, list[float]] = {n: [] for n in pirated}
    coruns: dict[int, list[float]] = {n: [] for n in counts if n > 1}
    ring = [target] + others
    with contextlib.ExitStack() as stack:
        # one lockstep pirate per size, parked between runs: every repeat runs alone, beside each
        # pirate and co-run in turn, so a slow spell of the machine touches all the curves alike
        pirates = {n: stack.enter_context(Pirate(sized[n], pirate_cpu, threshold=threshold)) for n in pirated}
        for _ in range(repeat):
            alone.append(co_run(argv, [target], timeout, clock)[0])
            tick("alone")
            for n in pirated:
                with pirates[n].segment() as seg:
                    t = co_run(argv, [target], timeout, clock)[0]
                (clean if seg["ok"] else flagged)[n].append(t)
                tick(f"N={n} pirate")
            for n in coruns:
                times = co_run(argv, [ring[i % len(ring)] for i in range(n)], timeout, clock)
                coruns[n].append(sum(times) / len(times))
                tick(f"N={n} co-run")
    pirate_ns = {n: tuple(clean[n] or flagged[n]) if n in pirated else tuple(alone) for n in counts}
    discarded = {n: len(flagged[n]) if n in pirated else 0 for n in counts}
    meas_ns = {n: tuple(coruns[n]) if n > 1 else tuple(alone) for n in counts}
    return EklovStack.from_runs(alone, pirate_ns, None, meas_ns, mode="instances", discarded=discarded)


def run_count(counts: Sequence[int], repeat: int) -> int:
    """How many progress ticks instance_stack makes (for a progress bar); at most, as a pirate too
    small to hold a line is not started."""
    return repeat * (1 + 2 * sum(1 for n in set(counts) if n > 1))
