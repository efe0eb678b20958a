"""A recording's counters: one list with labels and severities, the same in `record`, `info` and reports."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scalestack.trace.quality import COUNTERS, Severity, counters, summary_line, worst


def test_worked_example():
    meta = {"n_events": 33128, "lost_events": 0, "chain_gaps_traced": 2, "chain_gaps": 7,
            "repaired_intervals": {101: 1, 102: 2}, "steal_ns": {101: 2_500_000}, "double_running": 0}
    rows = counters(meta)
    assert [r["key"] for r in rows] == ["n_events", "lost_events", "chain_gaps_traced", "chain_gaps",
                                        "repaired_intervals", "steal_ns"]
    assert rows[4]["value"] == 3 and rows[5]["text"] == "2.5 ms"
    assert worst(meta) == Severity.DATA_LOSS
    assert summary_line(meta) == ("events 33,128 · lost events 0 · dropped scheduler events 2 · chain gaps on all "
                                  "CPUs 7 · repaired intervals 3 · hypervisor steal (shown as unknown) 2.5 ms")
    assert [r["key"] for r in counters(meta, Severity.DATA_LOSS)] == ["lost_events", "chain_gaps_traced",
                                                                      "repaired_intervals"]
    assert worst({"double_running": 1}) == Severity.INCONSISTENT
    assert worst({"n_events": 10}) == Severity.INFO and counters({}) == []


@given(st.dictionaries(st.sampled_from([c.key for c in COUNTERS]), st.integers(0, 10**9)))
def test_counters_shown_once_in_order_and_zero_only_when_always(meta):
    rows = counters(meta)
    order = [c.key for c in COUNTERS]
    keys = [r["key"] for r in rows]
    assert keys == sorted(keys, key=order.index) and len(set(keys)) == len(keys)
    always = {c.key for c in COUNTERS if c.always}
    assert all(r["value"] or r["key"] in always for r in rows)
    assert set(keys) == {k for k, v in meta.items() if v or k in always}
    sev = {c.key: c.severity for c in COUNTERS}
    assert worst(meta) == max((sev[k] for k, v in meta.items() if v and sev[k] > Severity.INFO), default=Severity.INFO)
    line = summary_line(meta)
    assert all(r["label"] in line for r in rows)
