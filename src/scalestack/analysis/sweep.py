"""Speedup stacks of a thread-count sweep (the traces `collect.sweep.load_sweep` returns), and the
GC term checked against the JVM's own pause log."""

from __future__ import annotations

import dataclasses

from scalestack.analysis.gclog import gc_check, gc_term_from_log
from scalestack.analysis.speedup import speedup_stack, with_spin
from scalestack.trace import Trace


def gc_checks(traces: dict[int, Trace], logs: dict[int, str], res: list | None = None) -> list[dict]:
    """Per N: the GC component from the trace beside the same term from the JVM's pause log.
    res: the sweep's `stacks`, when the caller has them (spin booking leaves the GC term alone)."""
    base = min(traces)
    if base not in logs:
        return []
    by_n = {s.n: s for s in (res if res is not None else stacks(traces))}
    p1 = gc_check(traces[base], logs[base], 1).log_pause_ns
    rows = []
    for n in sorted(logs):
        k = n // base
        c = gc_check(traces[n], logs[n], k)
        rows.append({**c.rows()[0], "gc_term": by_n[k].gc,
                     "gc_term_log": gc_term_from_log(k, p1, c.log_pause_ns, float(traces[n].wall_ns))})
    return rows


def stacks(traces: dict[int, Trace], passive: dict[int, Trace] | None = None) -> list:
    """Speedup stacks of every thread count against the smallest one (which should be 1).

    passive: the same counts recorded with OMP_WAIT_POLICY=passive (`load_sweep(dir, "passive")`);
    the working threads' extra running time in the default runs is spinning, booked as SYNC."""
    base = min(traces)
    out = [speedup_stack(traces[base], traces[n], n // base, threads=(base, n)) for n in sorted(traces)]
    if passive and set(passive) >= set(traces):
        a, b = float(traces[base].wall_ns), float(passive[base].wall_ns)
        spread = abs(a - b) / min(a, b) if base == 1 and min(a, b) > 0 else float("nan")
        out = [dataclasses.replace(with_spin(s, traces[n], passive[n], traces[base], passive[base]), baseline_spread=spread)
               for s, n in zip(out, sorted(traces), strict=True)]
    return out
