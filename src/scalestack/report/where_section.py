"""Report sections for recordings with call stacks (``record --stacks``): "Critical functions" and
"Locks and waits" (`scalestack.analysis.where`)."""

from __future__ import annotations

from scalestack.analysis.where import where
from scalestack.report import ReportOptions, Section, register_section
from scalestack.report.flame_figures import flame_graph
from scalestack.trace import Trace
from scalestack.units import format_ns


def _result(trace: Trace | None):
    if trace is None or not len(trace.stacks) or not len(trace.samples) or not trace.meta.get("sample_hz"):
        return None
    return where(trace)


@register_section("functions", order=25)
def functions_section(source, options: ReportOptions) -> Section | None:
    res = _result(source.trace)
    if res is None:
        return None
    total = sum(t["criticality_ns"] for t in res.threads) or 1.0
    rows = [{"function": f["function"], "binary": f["binary"].rsplit("/", 1)[-1].strip("[]"),
             "self_pct": round(f["self_ns"] / total * 100, 1), "total_pct": round(f["total_ns"] / total * 100, 1),
             "self_ms": f["self_ns"] / 1e6, "samples": f["samples"]}
            for f in [f for f in res.functions if f["self_ns"] > 0][:25] + [f for f in res.functions
                                                                           if f["self_ns"] == 0][:10]]
    summary = ["Each on-CPU sample weighted by 1/(threads running at that instant): a function's share of the "
               "run's criticality. self = the sample's leaf frame, total = anywhere on its stack; the program's "
               "own functions that only call others (no self time) follow, by total."]
    if rows:
        summary.append(f"Most critical: `{rows[0]['function']}` in {rows[0]['binary']}, {rows[0]['self_pct']}% "
                       "of the criticality.")
    if res.spin_share > 0.01:
        summary.append(f"{res.spin_share * 100:.1f}% of the criticality is spent spinning in synchronization "
                       "code (barrier or spin-lock waits), not work.")
    if res.recording_share > 0.01:
        summary.append(f"{res.recording_share * 100:.1f}% of the criticality is the recording's own work: perf's "
                       "tracepoint handlers (perf_tp_event and below) writing events in the program's threads"
                       + (", and copying their stacks at every futex call for --stacks" if source.meta.get("stacks")
                          else "") + "; unrecorded, the program does not spend it.")
    summary += res.notes
    cols = [("function", "function"), ("binary", "binary"), ("self_pct", "self %"), ("total_pct", "total %"),
            ("self_ms", "self ms"), ("samples", "samples")]
    return Section("functions", "Critical functions", summary, rows, cols, {"flame": flame_graph(res.paths)},
                   {"threads": res.threads, "functions": res.functions, "spin_share": res.spin_share,
                    "recording_share": res.recording_share})


# the locks table's kind column (`where.PRIMITIVES`), short enough for a terminal
SHORT = {"mutex": "mutex", "condition variable": "condvar", "barrier": "barrier", "read-write lock": "rwlock",
         "semaphore": "semaphore", "thread exit": "exit"}


@register_section("locks", order=26)
def locks_section(source, options: ReportOptions) -> Section | None:
    res = _result(source.trace)
    if res is None or not res.locks:
        return None
    rows = []
    for lk in res.locks[:15]:
        rows.append({"lock": lk["name"], "kind": SHORT.get(lk.get("primitive", ""), ""),
                     "wait_ms": lk["wait_ns"] / 1e6, "waits": lk["waits"], "waiters": lk["waiters"],
                     "serial_pct": round(lk["serial_share"] * 100, 1), "idle_ms": lk["idle_wait_ns"] / 1e6,
                     "holder": ", ".join(list(lk["holders"])[:2]), "released_at": ", ".join(list(lk["releasers"])[:2]),
                     "waited_at": ", ".join(list(lk["wait_sites"])[:2])})
    top = res.locks[0]
    if top["wait_ns"] > 0:
        most = (f"Most waited on: {top['name']}, {format_ns(top['wait_ns'])} by {top['waiters']} threads; "
                f"a thread waits there during {top['serial_share'] * 100:.0f}% of the run.")
    else:
        most = "No thread that works waits on a lock; only idle threads wait."
    idle = sum(lk["idle_wait_ns"] for lk in res.locks)
    summary = [most] + ([f"Idle threads (GC, JIT and runtime service threads, threads parked for long stretches) waited "
                         f"{format_ns(idle)} more (idle ms): waiting for work, they delay none, so the other "
                         "columns leave them out."] if idle else []) + [
               "kind = what the waits were in, by their call stacks (mutex, condvar: a condition variable, barrier, "
               "rwlock: a read-write lock, semaphore, exit: a thread's, for a join); holder = what the releasing "
               "thread ran while the others waited (its samples); released at / waited at = the first frame of the "
               "program on the wake and wait call stacks."]
    cols = [("lock", "lock"), ("kind", "kind"), ("wait_ms", "wait ms"), ("waits", "waits"), ("waiters", "waiters"),
            ("idle_ms", "idle ms"), ("serial_pct", "% of run waited"), ("holder", "holder runs"), ("released_at", "released at"),
            ("waited_at", "waited at")]
    return Section("locks", "Locks and waits", summary, rows, cols, {}, {"locks": res.locks})
