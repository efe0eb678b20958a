"""Thread-count sweeps: record a program once per (thread count, repeat) and store the traces."""

from __future__ import annotations

import json
import os
from pathlib import Path

import scalestack
from scalestack.errors import UserError


def run_sweep(command: list[str], threads: list[int], out_dir: str, *, repeat: int = 1,
              env: dict[str, str] | None = None, progress=None, gc_log: bool = False,
              omp_passive: bool = False) -> dict:
    """Record `command` with `{threads}` replaced (in argv and env values); write sweep.json.

    gc_log: for a `java` command, add ``-Xlog:gc:file=tN-rK.gclog`` so the JVM's own pause times
    can be set beside the GC component (`scalestack.analysis.gclog`).
    omp_passive: record every run a second time with OMP_WAIT_POLICY=passive (`tN-rK-passive.trace`,
    "policy": "passive" in sweep.json), so the spinning of the default runs can be booked as SYNC
    (`scalestack.analysis.speedup.with_spin`).
    """
    if gc_log and not Path(command[0]).name.startswith("java"):
        raise UserError(f"--gc-log needs a java command (it adds -Xlog:gc), not {command[0]!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    policies = ("", "passive") if omp_passive else ("",)
    for n in threads:
        for k in range(repeat):
            for policy in policies:
                argv = [a.replace("{threads}", str(n)) for a in command]
                tag = f"-{policy}" if policy else ""
                log = out / f"t{n}-r{k}{tag}.gclog"
                if gc_log:
                    argv.insert(1, f"-Xlog:gc:file={log.resolve()}")
                run_env = {v: e.replace("{threads}", str(n)) for v, e in (env or {}).items()}
                if policy:
                    run_env["OMP_WAIT_POLICY"] = policy
                saved = {v: os.environ.get(v) for v in run_env}
                try:
                    os.environ.update(run_env)
                    path = out / f"t{n}-r{k}{tag}.trace"
                    trace = scalestack.record(argv, str(path))
                finally:
                    for var, old in saved.items():
                        if old is None:
                            os.environ.pop(var, None)
                        else:
                            os.environ[var] = old
                runs.append({"threads": n, "repeat": k, "path": path.name, "wall_ns": int(trace.wall_ns),
                             **({"gclog": log.name} if gc_log else {}), **({"policy": policy} if policy else {})})
                if progress is not None:
                    progress()
    manifest = {"command": command, "threads": threads, "repeat": repeat, "env": env or {}, "runs": runs,
                **({"omp_passive": True} if omp_passive else {})}
    (out / "sweep.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def _median_runs(out_dir: str, policy: str = "") -> dict[int, dict]:
    """The sweep.json entry of the median-wall-time run per thread count (of the passive-wait
    runs for policy="passive"; none when the sweep has no such runs)."""
    path = Path(out_dir) / "sweep.json"
    if not path.exists():
        raise UserError(f"{out_dir} has no sweep.json; make one with 'scalestack scale -o {out_dir} -- CMD'")
    manifest = json.loads(path.read_text())
    chosen: dict[int, dict] = {}
    for n in manifest["threads"]:
        runs = sorted((r for r in manifest["runs"] if r["threads"] == n and r.get("policy", "") == policy),
                      key=lambda r: r["wall_ns"])
        if runs:
            chosen[n] = runs[len(runs) // 2]
    return chosen


def load_sweep(out_dir: str, policy: str = "") -> dict[int, scalestack.Trace]:
    """The median-wall-time trace per thread count from a sweep directory (policy="passive": of the
    runs recorded with OMP_WAIT_POLICY=passive by --omp-passive; empty if there are none)."""
    return {n: scalestack.load(str(Path(out_dir) / r["path"])) for n, r in _median_runs(out_dir, policy).items()}


def load_gc_logs(out_dir: str) -> dict[int, str]:
    """The `-Xlog:gc` text of the same median runs, for sweeps recorded with gc_log=True."""
    out = {}
    for n, r in _median_runs(out_dir).items():
        p = Path(out_dir) / r.get("gclog", "")
        if "gclog" in r and p.exists():
            out[n] = p.read_text(errors="replace")
    return out


def gc_checks(traces: dict[int, scalestack.Trace], logs: dict[int, str]) -> list[dict]:
    """Per N: the GC component from the trace beside the same term from the JVM's pause log."""
    from scalestack.analysis.gclog import gc_check, gc_term_from_log

    base = min(traces)
    if base not in logs:
        return []
    by_n = {s.n: s for s in stacks(traces)}
    p1 = gc_check(traces[base], logs[base], 1).log_pause_ns
    rows = []
    for n in sorted(logs):
        k = n // base
        c = gc_check(traces[n], logs[n], k)
        rows.append({**c.rows()[0], "gc_term": by_n[k].gc,
                     "gc_term_log": gc_term_from_log(k, p1, c.log_pause_ns, float(traces[n].wall_ns))})
    return rows


def stacks(traces: dict[int, scalestack.Trace], passive: dict[int, scalestack.Trace] | None = None) -> list:
    """Speedup stacks of every thread count against the smallest one (which should be 1).

    passive: the same counts recorded with OMP_WAIT_POLICY=passive (`load_sweep(dir, "passive")`);
    the working threads' extra running time in the default runs is spinning, booked as SYNC."""
    from scalestack.analysis.speedup import speedup_stack, with_spin

    base = min(traces)
    out = [speedup_stack(traces[base], traces[n], n // base, threads=(base, n)) for n in sorted(traces)]
    if passive and set(passive) >= set(traces):
        out = [with_spin(s, traces[n], passive[n], traces[base], passive[base]) for s, n in zip(out, sorted(traces), strict=True)]
    return out


def sweep_report(traces: dict[int, scalestack.Trace], out_dir: str, gc_logs: dict[int, str] | None = None,
                 pirate=None, passive: dict[int, scalestack.Trace] | None = None) -> dict[str, str]:
    """report.html etc. for the sweep: the speedup stacks first, then the largest N's own report.

    gc_logs (`load_gc_logs`): the JVM's -Xlog:gc pause totals are stated beside the GC term.
    pirate: a pirate-stack result (`eklov.report.load`): its section follows the speedup stacks, with
    the two methods' figures side by side for the thread counts both measured."""
    from scalestack.report import Section, build_report, write_report
    from scalestack.report.speedup_figures import speedup_curve, speedup_stacks

    res = stacks(traces, passive)
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
    from scalestack.analysis.speedup import phase_stacks

    base = min(traces)
    phases = {n: phase_stacks(traces[base], traces[n], n // base) for n in sorted(traces) if n != base}
    for n, per in phases.items():
        for name, st in per.items():
            rows.append({**st.rows()[0], "n": f"{n} ({name})", "total": st.total()})
    summary.append("Rows 'N (phase)': the same stack for the part of the run before the first worker starts, "
                   "the parallel phase, and after the last one ends.")
    summary += stack_notes(res)
    checks = gc_checks(traces, gc_logs or {})
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
        from scalestack.eklov.report import section as eklov_section

        eklov = eklov_section(pirate)
        eklov.summary[1:1] = side_by_side(res, pirate)
        report.sections.insert(1, eklov)
    return write_report(report, out_dir)


def stack_notes(res: list) -> list[str]:
    """How each stack read the run: the SEQ form and both SEQ figures, the working threads, and one line
    per thread that drives or coordinates instead of working (docs/speedup.md, "Native programs")."""
    out = []
    for r in res:
        if r.n == 1:
            continue
        how = ("serial windows of the N-thread run, (N-1)*T_seq/T_p" if r.form == "native"
               else "driver thread's box height, (N-1)*T_seq/T_p")
        st = "" if r.seq_st_measured else " (the 1-thread run cannot tell its serial part: taken equal)"
        out.append(f"N = {r.n}: SEQ {r.seq:.2f} from the {how}; thesis form {r.seq_thesis:.2f}, general form "
                   f"{r.seq_general:.2f}{st}; T_seq {r.t_seq_mt_ns / 1e6:.1f} ms at N, {r.t_seq_st_ns / 1e6:.1f} ms at 1; "
                   f"{r.workers} working threads" + (f"; spinning {r.spin:.2f} booked as SYNC" if r.spin else "") + ".")
        for t in r.threads:
            out.append(f"N = {r.n}: thread {t['tid']} ({t['name']}) is a {t['kind']}, not one of the N slots: active "
                       f"{t['active_pct']:.1f}% of the run, alone {t['alone_pct']:.1f}%, waiting while others work "
                       f"{t['waits_while_others_work_pct']:.1f}%.")
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
