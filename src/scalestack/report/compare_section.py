"""The "Against the baseline" section of `report --baseline A`: `compare`'s summary and ranked rows."""

from __future__ import annotations

from scalestack.report import Section


def compare_section(res) -> Section:
    """A report section from a `CompareResult` (times in ms in the table, ns in the JSON)."""
    rows = []
    for r in res.rows():
        rows.append({"rank": r["rank"], "kind": r["kind"], "label": r["label"],
                     "contribution_ms": r["contribution_ns"] / 1e6,
                     "share_of_change_pct": r["share_of_change_pct"],
                     **{k[:-3] + "_ms": (None if r[k] is None else r[k] / 1e6)
                        for k in ("criticality_change_ns", "running_change_ns", "runnable_change_ns", "wait_change_ns")}})
    cols = [("rank", "#"), ("kind", "kind"), ("label", "thread / pool / wait object"),
            ("contribution_ms", "wall time ms"), ("share_of_change_pct", "% of change"),
            ("criticality_change_ms", "Δ criticality ms"), ("running_change_ms", "Δ running ms"),
            ("runnable_change_ms", "Δ runnable ms"), ("wait_change_ms", "Δ wait ms")]
    summary = [res.summary()[0].upper() + res.summary()[1:],
               "Each row's contribution to the change in wall time: a thread's or pool's change in criticality, "
               "a wait object's change in wall-time share (docs/compare.md)."]
    data = res.to_dict()
    data["summary_line"] = data.pop("summary")  # the section's own `summary` is its list of sentences
    return Section("baseline", f"Against the baseline ({res.labels[0]})", summary, rows, cols, {}, data)
