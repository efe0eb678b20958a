"""Thread-count sweeps: record a program once per (thread count, repeat) and store the traces.

Their speedup stacks: `analysis/sweep.py`; their report: `report/sweep.py`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import scalestack
from scalestack.errors import UserError
from scalestack.fileio import output_dir


def run_sweep(command: list[str], threads: list[int], out_dir: str, *, repeat: int = 1,
              env: dict[str, str] | None = None, progress=None, gc_log: bool = False,
              omp_passive: bool = False, passive_env: dict[str, str] | None = None) -> dict:
    """Record `command` with `{threads}` replaced (in argv and env values); write sweep.json.

    gc_log: for a `java` command, add ``-Xlog:gc:file=tN-rK.gclog`` so the JVM's own pause times
    can be set beside the GC component (`scalestack.analysis.gclog`).
    omp_passive: record every run a second time with OMP_WAIT_POLICY=passive (`tN-rK-passive.trace`,
    "policy": "passive" in sweep.json), so the spinning of the default runs can be booked as SYNC
    (`scalestack.analysis.speedup.with_spin`). passive_env: the variables that make the twin's
    waits block at once for another runtime (OpenBLAS: OPENBLAS_THREAD_TIMEOUT=4), added to it.
    """
    if gc_log and not Path(command[0]).name.startswith("java"):
        raise UserError(f"--gc-log needs a java command (it adds -Xlog:gc), not {command[0]!r}")
    out = Path(output_dir(out_dir, "the runs' directory"))
    runs = []
    twin = {**({"OMP_WAIT_POLICY": "passive"} if omp_passive else {}), **(passive_env or {})}
    policies = ("", "passive") if twin else ("",)
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
                    run_env.update(twin)
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
                **({"omp_passive": True} if omp_passive else {}), **({"passive_env": twin} if twin else {})}
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
    twin runs recorded with passive waits by --omp-passive or --passive-env; empty if there are none)."""
    return {n: scalestack.load(str(Path(out_dir) / r["path"])) for n, r in _median_runs(out_dir, policy).items()}


def load_gc_logs(out_dir: str) -> dict[int, str]:
    """The `-Xlog:gc` text of the same median runs, for sweeps recorded with gc_log=True."""
    out = {}
    for n, r in _median_runs(out_dir).items():
        p = Path(out_dir) / r.get("gclog", "")
        if "gclog" in r and p.exists():
            out[n] = p.read_text(errors="replace")
    return out
