"""How complete a recording is: the counters its collector and the state builder leave in
`meta`, each with a label and a severity, shown the same way by `record`, `info` and reports.

Severity says what a counter means for the results: INFO describes the recording, DATA_LOSS
counts events the kernel or the collector lost (the builder repaired or bounded them; figures
near the affected spans are less exact), INCONSISTENT counts what should never happen (a thread
seen on two CPUs at once) and points at a collector or kernel bug.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any


class Severity(enum.IntEnum):
    INFO = 0
    DATA_LOSS = 1
    INCONSISTENT = 2

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")


@dataclasses.dataclass(frozen=True)
class Counter:
    key: str  # in Trace.meta (or an aggregate recording's meta)
    label: str
    severity: Severity
    unit: str = ""  # "ns": shown in ms
    always: bool = False  # shown even when zero

    def value(self, meta: Mapping[str, Any]) -> float | int | None:
        """The counter's value (per-thread dicts summed), None when the recording has no such counter."""
        v = meta.get(self.key)
        if v is None:
            return None
        if isinstance(v, Mapping):
            v = sum(v.values())
        return v

    def text(self, value: float | int) -> str:
        return f"{value / 1e6:.1f} ms" if self.unit == "ns" else f"{value:,}"


COUNTERS: tuple[Counter, ...] = (
    Counter("n_events", "events", Severity.INFO, always=True),
    Counter("lost_events", "lost events", Severity.DATA_LOSS, always=True),
    Counter("lost_chunks", "lost perf chunks", Severity.DATA_LOSS),
    Counter("chain_gaps_traced", "dropped scheduler events", Severity.DATA_LOSS, always=True),
    Counter("chain_gaps", "chain gaps on all CPUs", Severity.INFO),
    Counter("missing_wakeups", "missing wakeups", Severity.DATA_LOSS),
    Counter("repaired_intervals", "repaired intervals", Severity.DATA_LOSS),
    Counter("repair_uncertainty_ns", "repair uncertainty", Severity.INFO, unit="ns"),
    Counter("double_running", "threads seen on two CPUs", Severity.INCONSISTENT),
    Counter("steal_ns", "hypervisor steal (shown as unknown)", Severity.INFO, unit="ns"),
    Counter("spins_failed", "switches taken without the aggregator's lock", Severity.DATA_LOSS),
    Counter("table_full", "threads not kept (aggregator table full)", Severity.DATA_LOSS),
)


def counters(meta: Mapping[str, Any], min_severity: Severity = Severity.INFO) -> list[dict[str, Any]]:
    """The recording's counters at `min_severity` or above, in a fixed order: key, label, value,
    text, severity. Zero counters are left out unless they are always shown (events, losses)."""
    out = []
    for c in COUNTERS:
        v = c.value(meta)
        if v is None or c.severity < min_severity or (not v and not c.always):
            continue
        out.append({"key": c.key, "label": c.label, "value": v, "text": c.text(v), "severity": c.severity.label})
    return out


def worst(meta: Mapping[str, Any]) -> Severity:
    """The highest severity among the counters that are not zero."""
    found = [c.severity for c in COUNTERS if c.severity > Severity.INFO and c.value(meta)]
    return max(found, default=Severity.INFO)


def summary_line(meta: Mapping[str, Any], min_severity: Severity = Severity.INFO) -> str:
    """One line for a terminal: "events 33,128 · lost events 0 · dropped scheduler events 2"."""
    return " · ".join(f"{c['label']} {c['text']}" for c in counters(meta, min_severity))
