"""The report of a thread-count sweep: its speedup stacks first (with how each stack read the run),
the cache-pirate stack beside them when measured, then the largest N's own report."""

from __future__ import annotations

from scalestack.analysis.speedup import phase_stacks
from scalestack.analysis.sweep import gc_checks, stacks
from scalestack.report import Section, build_report, write_report
from scalestack.report.eklov_section import section as eklov_section
from scalestack.report.speedup_figures import speedup_curve, speedup_stacks
from scalestack.trace import Trace


def sweep_report(traces: dict[int, Trace], out_dir: str, gc_logs: dict[int, str] | None = None,
                 pirate=None, passive: dict[int, Trace] | None = None, res: list | None = None) -> dict[str, str]:
    """report.html etc. for the sweep: the speedup stacks first, then the largest N's own report.

    gc_logs (`load_gc_logs`): the JVM's -Xlog:gc pause totals are stated beside the GC term.
    pirate: a pirate-stack result (`eklov.report.load`): its section follows the speedup stacks, with
    the two methods' figures side by side for the thread counts both measured.
    res: the sweep's `stacks(traces, passive)`, when the caller has them."""
    res = res if res is not None else stacks(traces, passive)
    top = max(traces)
    report = build_report(traces[top], title=f"Thread-count sweep; the N = {top} run below")
    rows = [{**r.rows()[0], "total": r.total()} for r in res]
    worst = max(res, key=lambda r: r.n)
    parts = sorted(((getattr(worst, c), c) for c in ("gc", "seq", "sync", "imb", "cont", "other")), reverse=True)
    summary = [f"At N = {worst.n} the speedup is {worst.speedup:.2f}; the largest losses: "
               + ", ".join(f"{name} {v:.2f}" for v, name in parts[:3] if v > 0) + ".",
               "Each bar is N high: the actual speedup plus the speedup each cause costs (managed-speedup-stacks)."]
    cols = [("n", "N"), ("speedup", "speedup"), ("gc", "gc"), ("seq", "seq"), ("sync", "sync"), ("imb", "imb"),
            ("cont", "cont"), ("other", "other")]
    base = min(traces)
    phases = {n: phase_stacks(traces[base], traces[n], n // base) for n in sorted(traces) if n != base}
    for n, per in phases.items():
        for name, st in per.items():
            rows.append({**st.rows()[0], "n": f"{n} ({name})", "total": st.total()})
    summary.append("Rows 'N (phase)': the same stack for the part of the run before the first worker starts, "
                   "the parallel phase, and after the last one ends.")
    summary += stack_notes(res, twins=bool(passive))
    checks = gc_checks(traces, gc_logs or {}, res)
    for c in checks:
        summary.append(f"N = {c['n']}: -Xlog:gc logged {c['pauses']} pauses, {c['log_pause_ms']:.1f} ms; the GC "
                       f"threads' boxes are {c['gc_height_ms']:.1f} ms tall (running {c['gc_running_ms']:.1f} ms); "
                       f"GC term {c['gc_term']:.2f} from the trace, {c['gc_term_log']:.2f} from the log.")
    section = Section("speedup", "Speedup stacks", summary, rows, cols,
                      {"speedup-stacks": speedup_stacks(res), "speedup-curve": speedup_curve(res)},
                      {"stacks": [r.to_dict() for r in res],
                       "phases": {str(n): {k: v.to_dict() for k, v in per.items()} for n, per in phases.items()},
                       "gc_log": checks})
    report.sections.insert(0, section)
    if pirate is not None:
        eklov = eklov_section(pirate)
        eklov.summary[1:1] = side_by_side(res, pirate)
        report.sections.insert(1, eklov)
    return write_report(report, out_dir)


# OTHER at least this share of N with no twin runs: the note names spinning as a cause to rule out
OTHER_HINT = 0.1
# coordinators active less than this % of the run share one line of the notes
IDLE_PCT = 1.0
# baselines this far apart (a fraction of their time) get a note on the noise in S and OTHER
SPREAD_HINT = 0.03


def stack_notes(res: list, twins: bool = False) -> list[str]:
    """How each stack read the run: the SEQ form and both SEQ figures, the working threads, one line
    per thread that drives or coordinates instead of working (docs/speedup.md, "Native programs"),
    and, for a large OTHER in a sweep without passive twins (`twins`), how to tell spinning from it."""
    out = []
    for r in res:
        if r.workers != r.n:  # the speedup is then not that of N threads against one
            out.append(f"N = {r.n}: {r.workers} threads did the work, not {r.n}: if CMD should run {r.n}, its thread "
                       "count did not follow {threads} (check the option or variable that sets it; --env VAR={threads} "
                       "for a variable).")
        if r.n == 1:
            continue
        how = ("serial windows of the N-thread run, (N-1)*T_seq/T_p" if r.form == "native"
               else "driver thread's box height, (N-1)*T_seq/T_p")
        st = "" if r.seq_st_measured else " (the 1-thread run cannot tell its serial part: taken equal)"
        out.append(f"N = {r.n}: SEQ {r.seq:.2f} from the {how}; thesis form {r.seq_thesis:.2f}, general form "
                   f"{r.seq_general:.2f}{st}; T_seq {r.t_seq_mt_ns / 1e6:.1f} ms at N, {r.t_seq_st_ns / 1e6:.1f} ms at 1; "
                   f"{r.workers} working threads" + (f"; spinning {r.spin:.2f} booked as SYNC" if r.spin else "") + ".")
        idle = [t for t in r.threads if t["kind"] == "coordinator" and t["active_pct"] < IDLE_PCT]
        for t in r.threads:
            if t in idle:
                continue
            out.append(f"N = {r.n}: thread {t['tid']} ({t['name']}) is a {t['kind']}, not one of the N slots: active "
                       f"{t['active_pct']:.1f}% of the run, alone {t['alone_pct']:.1f}%, waiting while others work "
                       f"{t['waits_while_others_work_pct']:.1f}%.")
        if idle:  # a runtime's idle helpers (a JVM's, node's V8 platform threads): one line, not one each
            names = sorted({str(t["name"]) for t in idle})
            out.append(f"N = {r.n}: {len(idle)} more thread{'s' if len(idle) > 1 else ''} ({', '.join(names[:3])}"
                       f"{', ...' if len(names) > 3 else ''}) were coordinators active under {IDLE_PCT:g}% of the run "
                       f"each (tids {', '.join(str(t['tid']) for t in idle[:8])}{', ...' if len(idle) > 8 else ''}): "
                       "not among the N slots.")
        if r.baseline_spread >= SPREAD_HINT:
            out.append(f"N = {r.n}: the 1-thread run and its passive twin (the same work) took times {100 * r.baseline_spread:.1f}% "
                       f"apart: S and OTHER are uncertain by about ±{r.speedup * r.baseline_spread:.2f} from the machine's "
                       "run-to-run noise alone; --repeat 3 keeps each count's median run.")
        if not twins and r.form == "native" and r.other >= OTHER_HINT * r.n:
            out.append(f"N = {r.n}: OTHER {r.other:.2f} is no wait the trace shows: slower work (cache, memory: "
                       "--pirate measures it) or spinning, which reads as work and hides serial parts from SEQ "
                       "(runtimes that spin before they sleep: OpenMP, OpenBLAS); --omp-passive or --passive-env "
                       "VAR=VALUE (e.g. OPENBLAS_THREAD_TIMEOUT=4) records twin runs that book it.")
    return out


def side_by_side(res: list, pirate) -> list[str]:
    """One line per thread count both methods measured: where each puts the lost speedup.

    The trace's stack sees waiting (sync, imbalance, CPU contention) but not slower work; the pirate's
    sees slower work (cache, memory) and counts all waiting as sync. So their sync terms should
    agree roughly with sync + imb, and cache + memory is what the trace's stack leaves in 'other'."""
    rows = {r["n"]: r for r in pirate.rows()}
    scope = "parallel phase" if getattr(pirate, "scope", "phase") == "phase" else "whole run"
    out = []
    for r in res:
        e = rows.get(r.n)
        if e is None or r.n == 1:
            continue
        out.append(f"N = {r.n}: from the traces (whole run), speedup {r.speedup:.2f} with sequential part {r.seq:.2f}, "
                   f"sync + imbalance {r.sync + r.imb:.2f}, CPU contention {r.cont:.2f}, other {r.other:.2f}; "
                   f"from isolation and the pirate ({scope}), speedup {e['s_meas']:.2f} with sync {e['sync']:.2f}, "
                   f"cache {e['cache']:.2f}, memory {e['memory']:.2f}.")
    return out
