"""HotSpot `-Xlog:gc` pause times as a cross-check of the GC component of a speedup stack.

The GC term is computed from the trace alone (the height of the GC threads' bottle-graph boxes,
spec managed-speedup-stacks.md §2.5). The JVM's own log states each stop-the-world pause; when a
sweep has the log (``scalestack scale --gc-log``), the pause total is printed beside the term:
``GC_log = (N·P_N − P_1) / T_N`` with P the summed pauses, and the GC threads' running time next
to it. The two GC estimates differ where GC threads run concurrently with the application (G1's
marking threads add box height that is not a pause) or a pause's safepoint wait is not GC-thread
time; a large gap says to read the GC term with care.

Lines parsed (JDK 9+ unified logging, default decorators), for G1 and Parallel GC::

    [0.125s][info][gc] GC(0) Pause Young (Allocation Failure) 16M->0M(61M) 2.493ms
    [0.109s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 6M->1M(64M) 1.564ms
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from scalestack.results import Result
from scalestack.trace import State, Trace

_PAUSE = re.compile(r"GC\((\d+)\)\s+Pause\s+(.*?)\s+(\d+(?:\.\d+)?)ms\s*$")


def parse_gc_log(text: str) -> list[tuple[int, str, float]]:
    """(GC id, pause kind, ms) for every stop-the-world pause line of a `-Xlog:gc` log."""
    out = []
    for line in text.splitlines():
        m = _PAUSE.search(line)
        if m:
            kind = re.sub(r"\s+\d+[KMG]->.*$", "", m.group(2))
            out.append((int(m.group(1)), kind, float(m.group(3))))
    return out


def pause_ns(text: str) -> int:
    """Summed stop-the-world pause time of a `-Xlog:gc` log, in ns."""
    return int(round(sum(ms for _, _, ms in parse_gc_log(text)) * 1e6))


@dataclasses.dataclass(frozen=True)
class GcCheck(Result):
    """One run's GC time three ways: the log's pauses, the GC threads' box height, their CPU time."""

    n: int
    pauses: int
    log_pause_ns: int
    gc_height_ns: int
    gc_running_ns: int
    kind: str = "gc_check"

    def rows(self) -> list[dict]:
        return [{"n": self.n, "pauses": self.pauses, "log_pause_ms": self.log_pause_ns / 1e6,
                 "gc_height_ms": self.gc_height_ns / 1e6, "gc_running_ms": self.gc_running_ns / 1e6}]


def gc_check(trace: Trace, log_text: str, n: int) -> GcCheck:
    """Compare a run's `-Xlog:gc` pauses with what the trace says about its GC threads."""
    from scalestack.analysis.speedup import _role_height

    gc = np.asarray(trace.threads.role == "gc", dtype=bool)
    running = int(trace.time_in_states()[gc, int(State.RUNNING)].sum())
    return GcCheck(n=n, pauses=len(parse_gc_log(log_text)), log_pause_ns=pause_ns(log_text),
                   gc_height_ns=int(_role_height(trace, "gc")), gc_running_ns=running)


def gc_term_from_log(n: int, p_1_ns: float, p_n_ns: float, t_n_ns: float) -> float:
    """The GC component computed from the logs' pause totals instead of the trace (speedup units)."""
    return (n * p_n_ns - p_1_ns) / t_n_ns
