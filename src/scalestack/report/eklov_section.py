"""The pirate-stack result as a terminal table, a report section (figures, table, caveats) and files."""

from __future__ import annotations

import shlex

from scalestack.eklov.stack import EklovStack
from scalestack.fileio import output_dir


def _parts(res, title: str | None = None) -> tuple[EklovStack, list[dict], list[str], str]:
    stack = getattr(res, "stack", res)
    rows = res.rows()
    warns = list(getattr(res, "warnings", ()))
    cmd = getattr(res, "command", None)
    title = title or (shlex.join(cmd) if cmd else "multi-instance run")
    return stack, rows, warns, title


def load(path: str):
    """A saved pirate-stack result: its `--json` output, its report.json, or a sweep's pirate_stack.json.

    Returns a PirateStackResult (thread mode) or an EklovStack (`--instances`)."""
    import json

    from scalestack.eklov.driver import PirateStackResult
    from scalestack.errors import UserError

    try:
        with open(path) as fh:
            d = json.load(fh)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (give the JSON 'scalestack pirate-stack --json' printed, or the "
                        "report.json of 'pirate-stack -o DIR')") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a readable JSON file ({e})") from None
    if isinstance(d, dict) and "eklov" in d.get("sections", {}):
        d = d["sections"]["eklov"]
    try:
        if isinstance(d, dict) and "stack" in d:
            return PirateStackResult.from_dict(d)
        if isinstance(d, dict) and "pirate_ns" in d:
            return EklovStack.from_dict(d)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{path}: a pirate-stack result with a missing or malformed field ({e})") from None
    raise UserError(f"{path}: not a pirate-stack result (expected the JSON of 'scalestack pirate-stack --json' "
                    "or its report.json)")


def save(res, path: str) -> None:
    """The result as JSON that `load` reads back, written atomically."""
    from scalestack.fileio import atomic_write

    atomic_write(path, res.to_json().encode())


def table_lines(res, title: str | None = None) -> list[str]:
    """The printed table: the four curves, the components with their run-to-run range, discards."""
    stack, rows, warns, title = _parts(res, title)
    noun = "instances" if stack.mode == "instances" else "threads"
    out = [f"speedup stack of {title} ({noun}; medians of {len(stack.t1_ns)} repeats, T(1) = "
           f"{sorted(stack.t1_ns)[len(stack.t1_ns) // 2] / 1e6:.1f} ms)",
           f"{'N':>3} {'perfect':>7} {'S_pirate':>8} {'S_nosync':>8} {'S_meas':>7}  {'cache':>17}  {'memory':>17}  "
           f"{'sync':>17} {'discarded':>9}"]
    for r in rows:
        comp = "  ".join(f"{r[c]:6.2f} [{r[c + '_min']:5.2f},{r[c + '_max']:5.2f}]" for c in ("cache", "memory", "sync"))
        out.append(f"{r['n']:>3} {r['perfect']:7.2f} {r['s_pirate']:8.2f} {r['s_nosync']:8.2f} {r['s_meas']:7.2f}  "
                   f"{comp} {r['discarded']:>9}")
    out.append("components: value [lowest, highest over the repeats]; negative values are measurement error, "
               "shown as measured")
    if getattr(res, "profile", "") == "all" and any(r["n"] > 1 for r in rows):
        out.append("S_pirate is the slowest profiled thread's (max_i); thread 0 alone: "
                   + ", ".join(f"N={r['n']} {r['s_pirate_thread0']:.2f}" for r in rows if r["n"] > 1))
    out.extend(f"warning: {w}" for w in warns)
    return out


def section(res, title: str | None = None):
    from scalestack.report import Section
    from scalestack.report.eklov_figures import eklov_curves, eklov_stacks

    stack, rows, warns, title = _parts(res, title)
    top = rows[-1]
    parts = sorted(((top[c], c) for c in ("cache", "memory", "sync")), reverse=True)
    summary = [f"At N = {top['n']} the measured speedup is {top['s_meas']:.2f}; of the {top['n'] - top['s_meas']:.2f} "
               "lost: " + ", ".join(f"{name} {v:.2f}" for v, name in parts) + ".",
               "Bottlenecks are added in the paper's order: cache (pirate), then memory, then synchronization; "
               "each bar is N high (Eklov et al.)."]
    summary.extend(f"Caveat: {w}" for w in warns)
    cols = [("n", "N"), ("s_pirate", "S_pirate"), ("s_nosync", "S_nosync"), ("s_meas", "S_meas"), ("cache", "cache"),
            ("cache_min", "min"), ("cache_max", "max"), ("memory", "memory"), ("memory_min", "min"),
            ("memory_max", "max"), ("sync", "sync"), ("sync_min", "min"), ("sync_max", "max"),
            ("discarded", "discarded")]
    figs = {"eklov-curves": eklov_curves(rows, f"Speedup curves: {title}"[:80]),
            "eklov-stacks": eklov_stacks(rows, "Speedup stacks (cache pirate)")}
    return Section("eklov", "Speedup stack from isolation and cache pirating", summary, rows, cols, figs, res.to_dict())


def write(res, out_dir: str, title: str | None = None) -> dict[str, str]:
    """report.html, report.json and the two figures (PNG + SVG) in out_dir."""
    from scalestack.report import Report, write_report

    stack, rows, warns, title = _parts(res, title)
    output_dir(out_dir, "the report directory")
    top = stack.counts[-1]
    facts = {"command": title, "mode": stack.mode, "repeats": len(stack.t1_ns), "threads": top,
             "wall_ns": int(sorted(stack.meas_ns[top])[len(stack.meas_ns[top]) // 2])}  # the phase at the largest N
    return write_report(Report(f"Eklov speedup stack: {title}", facts, [], [section(res, title)]), out_dir)
