"""`scalestack dvfs`: predicted run time at another clock frequency, and an energy manager."""

from __future__ import annotations

import json
import os
import re

import click

from scalestack.errors import UserError


def parse_ghz(value: str | float, what: str = "frequency") -> float:
    """'4GHz', '3500MHz', '2.5' (GHz) -> GHz."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ghz|mhz|hz)?\s*", str(value), re.I)
    if not m:
        raise UserError(f"{what} {value!r} is not a frequency; write e.g. 4GHz, 3500MHz or 2.5 (GHz)")
    f = float(m.group(1)) * {"ghz": 1.0, "mhz": 1e-3, "hz": 1e-9}[(m.group(2) or "ghz").lower()]
    if not 0.01 <= f <= 100:
        raise UserError(f"{what} {value!r} is out of range (GHz)")
    return f


def parse_fraction(value: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    v = str(value).strip()
    try:
        f = float(v[:-1]) / 100 if v.endswith("%") else float(v)
    except ValueError:
        raise UserError(f"--max-slowdown {value!r}: write e.g. 5% or 0.05") from None
    if not 0 <= f < 10:
        raise UserError(f"--max-slowdown {value!r} is out of range")
    return f


def _workload(spec: str, threads: int | None, seed: int) -> dict:
    from scalestack.sim.dvfs_workloads import MIXES, java_like
    from scalestack.sim.workloads import get

    name = spec[4:] if spec.startswith("sim:") else spec
    if name.startswith("java_") and name[5:] in MIXES:
        return java_like(name[5:], seed, app_threads=threads, gcs=20)
    return get(name, threads, seed)


def load_inputs(path: str, f_from: float | None, cores: int, threads: int | None, seed: int):
    """(Epochs, workload or None): a counter trace, a simulated workload (exact), or a Trace."""
    from scalestack.analysis import dvfs
    from scalestack.sim.workloads import NAMED

    if path.endswith(".jsonl"):
        ep = dvfs.read_jsonl(path)
        if f_from is not None and abs(f_from - ep.f_base_ghz) > 1e-9:
            raise UserError(f"{path} was measured at {ep.f_base_ghz:g} GHz; drop --from or match it")
        return ep, None
    name = path[4:] if path.startswith("sim:") else path
    if path.startswith("sim:") or name in NAMED or name.startswith("java_") or (
            path.endswith((".yaml", ".yml", ".json")) and os.path.exists(path)):
        from scalestack.sim.engine import simulate

        wl = _workload(path, threads, seed)
        try:
            sim = simulate(wl, cores=cores, freq_ghz=f_from or 4.0, seed=seed)
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise UserError(f"{path}: invalid workload ({e})") from None
        return dvfs.from_sim(sim, f_from or 4.0), wl
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file (give a trace, a .jsonl counter trace, or sim:WORKLOAD)")
    if f_from is None:
        raise UserError(f"{path}: give --from, the clock frequency the trace was recorded at")
    import scalestack

    return dvfs.from_trace(scalestack.load(path), f_from), None


def _ms(ns: float) -> str:
    from scalestack.units import format_ns

    return format_ns(ns)


@click.command()
@click.argument("path", metavar="FILE")
@click.option("--to", "to", help="Target frequency (e.g. 4GHz): print the predicted time.")
@click.option("--from", "f_from", help="Frequency FILE was measured at (traces; sim default 4GHz).")
@click.option("--max-slowdown", help="Energy manager: slowdown bound vs. always f_max (e.g. 5%).")
@click.option("--quantum", default="5ms", show_default=True, help="Manager quantum.")
@click.option("--hold-off", type=int, default=1, show_default=True, help="Quanta a choice is kept for.")
@click.option("--step", default="125MHz", show_default=True, help="DVFS step (125MHz: 25 states, 500MHz: 7).")
@click.option("--excess", type=click.Choice(["run", "replace", "bank", "off"]), default="run", show_default=True,
              help="Manager's bound: run = over the whole run so far (pays errors back); replace/bank/off = "
                   "the paper's per-quantum sigma.")
@click.option("--guard", type=float, default=None,
              help="Manager: inflate predicted changes of time by this fraction where threads wait for a CPU "
                   "(default 0.2 with --excess run, else 0).")
@click.option("--spend", type=float, default=0.0, show_default=True,
              help="Manager, --excess run: banked slack a quantum may spend, as a multiple of the bound (inf: all; "
                   "coarse --step saves more with 1 or more).")
@click.option("--oracle", is_flag=True, help="Manager: choose each quantum's frequency from itself (bound).")
@click.option("--clamp", is_flag=True, help="Clamp negative predicted epoch lengths to 0.")
@click.option("--estimator", type=click.Choice(["crit", "leadload", "stall"]), default=None,
              help="Non-scaling estimator (default: the most accurate in the input).")
@click.option("--cores", type=int, default=4, show_default=True, help="Simulated workloads: cores.")
@click.option("--threads", type=int, default=None, help="Simulated workloads: thread count.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--path-lines", type=int, default=12, show_default=True, help="Critical-path runs to print.")
@click.option("--export-jsonl", help="Also write the epochs as a JSON-lines counter trace.")
@click.option("-o", "--figure", help="Write a figure (.png/.svg): predicted vs true time, or energy-delay.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(path, to, f_from, max_slowdown, quantum, hold_off, step, excess, guard, spend, oracle, clamp, estimator, cores,
            threads, seed, path_lines, export_jsonl, figure, as_json):
    """DEP+BURST: predict FILE's run time at another frequency (--to), or pick per-quantum
    frequencies that save energy within a slowdown bound (--max-slowdown).

    FILE is a JSON-lines counter trace (.jsonl, format in docs/readme/dvfs.md), a simulated
    workload (sim:NAME, e.g. sim:java_mem, sim:gc_heavy, or a workload .yaml: exact inputs and
    the simulator's true time), or a recorded trace (epochs only: without hardware counters only
    bounds can be predicted).
    """
    from scalestack.analysis import dvfs

    if hold_off < 1:
        raise UserError("--hold-off must be at least 1 (quanta a choice is kept for)")
    if to is None and max_slowdown is None:
        raise UserError("give --to FREQ (predict) or --max-slowdown PCT (energy manager)")
    fb = parse_ghz(f_from, "--from") if f_from else None
    ep, wl = load_inputs(path, fb, cores, threads, seed)
    if len(ep.t0_ns) == 0:
        raise UserError(f"{path}: no epochs (no thread ever ran)")
    if export_jsonl:
        dvfs.write_jsonl(ep, export_jsonl)
        click.echo(f"scalestack: wrote {export_jsonl}", err=True)
    if not ep.has_counters:
        why = dvfs.counter_support() if ep.source == "trace" else None
        here = f"hardware counters are unavailable on this machine ({why})" if why else \
            f"{path} has no non-scaling counter readings (N: leadload or stall)"
        click.echo(f"scalestack: {here}: M+CRIT, COOP, DEP and DEP+BURST are impossible, they need each thread's "
                   "non-scaling time per epoch (leading-load or L3-miss stall cycles, plus store-queue-full cycles "
                   "for BURST); only bounds are printed; give a JSON-lines counter trace for predictions.", err=True)
        if max_slowdown is not None:
            raise UserError("the energy manager needs DEP+BURST predictions, impossible without counters")
    if to is not None:
        _predict(ep, wl, parse_ghz(to, "--to"), clamp, estimator, cores, seed, path_lines, figure, as_json)
    if max_slowdown is not None:
        from scalestack.analysis.dvfs_manager import GUARD
        from scalestack.units import parse_duration_ns

        if guard is not None and not 0 <= guard <= 10:
            raise UserError(f"--guard must be between 0 and 10 (a fraction), not {guard:g}")
        guard = guard if guard is not None else GUARD if excess == "run" else 0.0
        if not spend >= 0:
            raise UserError(f"--spend must be 0 or more (a multiple of the bound), not {spend:g}")
        _manage(ep, wl, parse_fraction(max_slowdown), parse_duration_ns(quantum, what="--quantum"), hold_off,
                parse_ghz(step, "--step"), excess, guard, spend, not oracle, cores, seed, figure if to is None else None,
                as_json)


def _predict(ep, wl, ft, clamp, estimator, cores, seed, path_lines, figure, as_json):
    from scalestack.analysis import dvfs

    true = None
    if wl is not None:
        from scalestack.sim.engine import simulate

        true = float(simulate(wl, cores=cores, freq_ghz=ft, seed=seed).runtime_ns)
    res = dvfs.predict(ep, ft, clamp=clamp, estimator=estimator, true_ns=true)
    if figure:
        from scalestack.fileio import atomic_write
        from scalestack.report import dvfs_figures, figures

        fig = dvfs_figures.predicted_vs_true(ep, wl, cores=cores, seed=seed, clamp=clamp, estimator=estimator)
        atomic_write(figure, figures.render(fig, os.path.splitext(figure)[1].lstrip(".").lower() or "png"))
        click.echo(f"scalestack: wrote {figure}", err=True)
    if as_json:
        click.echo(res.to_json())
        return
    names = dict(zip(ep.tids.tolist(), ep.roles, strict=True))
    click.echo(f"{ep.f_base_ghz:g} GHz -> {ft:g} GHz: measured {_ms(res.measured_ns)}, {res.epochs} epochs, "
               f"non-scaling estimator {res.estimator} (inputs: {ep.source})")
    click.echo(f"{'model':24s} {'predicted':>12s} {'change':>8s}" + ("   error vs simulator" if true else ""))
    for r in res.rows():
        line = f"{r['model']:24s} {_ms(r['predicted_ns']):>12s} {r['change_pct']:+7.1f}%"
        if true:
            line += f"   {r['error_pct']:+6.1f}%"
        click.echo(line)
    if true:
        click.echo(f"{'true (simulator)':24s} {_ms(true):>12s} {100 * (true / res.measured_ns - 1):+7.1f}%")
    cp = res.critical_path
    click.echo(f"critical-thread path ({'DEP+BURST' if ep.has_counters else 'all time scaling'}, across epochs): "
               f"{len(cp)} runs")
    for tid, b0, b1, p0, p1 in cp[:path_lines]:
        who = f"{tid} ({names.get(tid, '?')})" if tid >= 0 else "no thread running"
        click.echo(f"  {who:22s} base {_ms(b0 - ep.t0_ns[0]):>10s} .. {_ms(b1 - ep.t0_ns[0]):>10s}   "
                   f"predicted {_ms(p0):>10s} .. {_ms(p1):>10s}")
    if len(cp) > path_lines:
        click.echo(f"  ... {len(cp) - path_lines} more runs (--path-lines N)")
    share: dict[int, float] = {}
    for tid, _, _, p0, p1 in cp:
        share[tid] = share.get(tid, 0.0) + p1 - p0
    tot = sum(share.values()) or 1.0
    click.echo("critical share of predicted time: " + ", ".join(
        f"{t if t >= 0 else 'idle'} {100 * v / tot:.0f}%" for t, v in sorted(share.items(), key=lambda x: -x[1])[:6]))


def _manage(ep, wl, s, q_ns, hold_off, step, excess, guard, spend, reactive, cores, seed, figure, as_json):
    from scalestack.analysis.dvfs_manager import manage, simulate_schedule

    trace = None  # the run's waits for a CPU gate the guard band; a counter trace has none: guard everywhere
    if wl is not None:
        from scalestack.sim.engine import simulate

        trace = simulate(wl, cores=cores, freq_ghz=ep.f_base_ghz, seed=seed).trace
    res = manage(ep, s, quantum_ns=q_ns, hold_off=hold_off, step_ghz=step, excess=excess, reactive=reactive,
                 cores=cores, guard=guard, spend=spend, trace=trace)
    online = None
    if wl is not None:
        from scalestack.analysis.dvfs_manager import run_online

        res = simulate_schedule(wl, res, cores=cores)
        online = run_online(wl, s, cores=cores, quantum_ns=q_ns, hold_off=hold_off, step_ghz=step, excess=excess,
                            guard=guard, spend=spend)
    if figure:
        from scalestack.fileio import atomic_write
        from scalestack.report import dvfs_figures, figures

        fig = dvfs_figures.energy_delay(ep, [res], cores=cores, quantum_ns=q_ns)
        atomic_write(figure, figures.render(fig, os.path.splitext(figure)[1].lstrip(".").lower() or "png"))
        click.echo(f"scalestack: wrote {figure}", err=True)
    if as_json:
        d = json.loads(res.to_json())
        if online is not None:
            d["online"] = json.loads(online.to_json())
        click.echo(json.dumps(d, indent=2))
        return
    from collections import Counter

    used = Counter(f for _, f, *_ in res.schedule)
    click.echo(f"energy manager: slowdown bound {100 * s:g}%, quantum {_ms(q_ns)}, hold-off {hold_off}, "
               f"{step * 1000:g} MHz steps, excess {excess}, guard {guard:g}, spend {spend:g}, {'reactive' if reactive else 'oracle'}; "
               f"profiled at {ep.f_base_ghz:g} GHz")
    click.echo(f"{len(res.schedule)} quanta, {res.transitions} transitions; frequencies: "
               + ", ".join(f"{f:g} GHz x{n}" for f, n in sorted(used.items())))
    click.echo(f"predicted: time {_ms(res.predicted_ns)} vs {_ms(res.predicted_fmax_ns)} at f_max "
               f"(slowdown {100 * res.predicted_slowdown:.1f}%), energy saved {100 * res.predicted_saving:.1f}%")
    if res.true_ns is not None:
        click.echo(f"true (simulator): time {_ms(res.true_ns)} vs {_ms(res.true_fmax_ns)} at f_max "
                   f"(slowdown {100 * res.true_slowdown:.1f}%), energy saved {100 * res.true_saving:.1f}%")
    if online is not None:
        click.echo(f"online manager in the simulator (profiles each quantum at the frequency it ran at): "
                   f"{online.transitions} transitions, true slowdown {100 * online.true_slowdown:.1f}% "
                   f"(its own estimate {100 * online.predicted_slowdown:.1f}%), energy saved "
                   f"{100 * online.true_saving:.1f}%")
