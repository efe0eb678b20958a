"""The report's phase section: present when the trace holds code samples (`record --sample`)."""

from __future__ import annotations

from scalestack.report import ReportOptions, Section, register_section

COLUMNS = [("phase", "phase"), ("intervals", "intervals"), ("share_pct", "share %"), ("time_ms", "time ms"),
           ("running_ms", "running ms"), ("parallelism", "parallelism"), ("code", "top code (share of samples)")]


def phase_rows(res) -> list[dict]:
    """The phase table with ms columns and each phase's most sampled code."""
    rows = []
    for r in res.phases:
        top = res.top_regions[r["phase"] - 1]
        rows.append({**r, "time_ms": r["time_ns"] / 1e6, "running_ms": r["running_ns"] / 1e6,
                     "code": ", ".join(f"{name.split(':', 1)[-1]} {share * 100:.0f}%" for name, share in top[:2])})
    return rows


@register_section("phases", order=60)
def phases_section(source, options: ReportOptions) -> Section | None:
    trace = source.trace
    if trace is None or len(trace.samples) == 0:
        return None
    from scalestack.analysis.phases import phases
    from scalestack.errors import UserError
    from scalestack.report.phase_figures import phase_bottles, phase_timeline

    try:
        res = phases(trace)
    except UserError as e:
        return Section("phases", "Phases", [f"No phases: {e}"])
    summary = [f"{res.k} phases in {len(res.intervals['run'])} intervals of {res.params['interval_samples']} samples "
               f"per thread (k: SimPoint's BIC among 1..{res.params['k_max']}, capped where more phases would only "
               f"model sampling noise; {res.dropped} short intervals, cut off by stalls, "
               f"labelled by the nearest phase but not clustered).",
               "A phase's time is the criticality of its intervals: each instant split among the threads running "
               "then, so the phases' times add up to the time any sampled thread ran. No CPI: no hardware counters."]
    figures = {"phases-timeline": phase_timeline(res), "phases-bottle": phase_bottles(res)}
    iv = res.intervals
    first_run = iv["run"] == 0
    marks = [{"kind": "phase", "label": f"phase {int(p)}", "tid": int(t), "t0_ns": int(a), "t1_ns": int(b)}
             for p, t, a, b in zip(iv["phase"][first_run], iv["tid"][first_run], iv["t_start_ns"][first_run],
                                   iv["t_end_ns"][first_run], strict=True)]
    return Section("phases", "Phases", summary, phase_rows(res), COLUMNS, figures, res.to_dict(), marks)
