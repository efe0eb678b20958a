"""`scalestack phases`: recurring phases of each thread's execution, matched across threads and runs."""

from __future__ import annotations

import click


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="TRACE...")
@click.option("--interval-samples", type=int, default=100, show_default=True,
              help="Samples per interval (per thread).")
@click.option("--interval", "interval", metavar="DURATION", help="Fixed time per interval instead, e.g. 50ms.")
@click.option("--k-max", type=int, default=10, show_default=True, help="Largest number of phases tried.")
@click.option("--dims", type=int, default=15, show_default=True, help="Random projection dimensions.")
@click.option("--granularity", type=click.Choice(["symbol", "block"]), default="symbol", show_default=True,
              help="Code region: function, or function + 64-byte block of the offset.")
@click.option("--noise-factor", type=float, default=1.5, show_default=True,
              help="Cap k where the clustering error is within this factor of sampling noise (0: BIC alone).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", "out_dir", help="Also write report.html, report.json and the figures (PNG, SVG) here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(paths, interval_samples, interval, k_max, dims, granularity, noise_factor, seed, out_dir, as_json):
    """Phases of one run, or of several runs (e.g. 1, 2, 4 threads) clustered together.

    Per phase: its share of the run, its time (each instant split among the threads running
    then), the CPU time of its threads, their parallelism (cpu time / time), and with several
    runs the speedup over the run with the fewest threads (meaningful when every run does the
    same total work: compare the cpu time column).
    """
    import os

    import scalestack
    from scalestack.analysis.phases import choose_k, phases
    from scalestack.report.phase_section import phase_rows
    from scalestack.units import format_ns, parse_duration_ns

    traces = [scalestack.load(p) for p in paths]
    interval_ns = parse_duration_ns(interval, what="--interval") if interval else None
    labels = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    res = phases(traces, interval_samples=interval_samples, interval_ns=interval_ns, k_max=k_max, dims=dims,
                 granularity=granularity, seed=seed, labels=labels, noise_factor=noise_factor or None)
    if out_dir:
        _write_report(res, traces, out_dir)
    if as_json:
        click.echo(res.to_json())
        return
    n = len(res.intervals["run"])
    bic_k = choose_k(res.k_values, res.bic, res.params["bic_threshold"])
    click.echo(f"{res.k} phases among {n} intervals ({res.dropped} short ones, cut off by stalls, only labelled); "
               f"k tried 1..{len(res.bic)}, SimPoint's BIC alone would pick {bic_k}")
    head = f"{'run':>12} {'thr':>4} {'phase':>5} {'ivals':>6} {'share%':>7} {'time':>10} {'cpu time':>10} {'parallel':>8}"
    if len(traces) > 1:
        head += f" {'speedup':>8}"
    click.echo(head + "  top code")
    for r in phase_rows(res):
        line = (f"{r['run'][-12:]:>12} {r['n_threads']:>4} {r['phase']:>5} {r['intervals']:>6} {r['share_pct']:>7.1f} "
                f"{format_ns(r['time_ns']):>10} {format_ns(r['running_ns']):>10} {r['parallelism']:>8.2f}")
        if len(traces) > 1:
            line += f" {r['speedup']:>8.2f}" if r["speedup"] else f" {'-':>8}"
        click.echo(line + "  " + r["code"])
    if len(traces) > 1:  # spec 1.6: the joint clustering may pick another k than each run alone
        alone = [phases(t, interval_samples=interval_samples, interval_ns=interval_ns, k_max=k_max, dims=dims,
                        granularity=granularity, seed=seed, noise_factor=noise_factor or None).k for t in traces]
        click.echo("k of each run clustered alone: " + ", ".join(f"{lab} {k}" for lab, k in zip(labels, alone, strict=True)))
    iv = res.intervals
    for c, i in enumerate(res.representative):
        click.echo(f"phase {c + 1}: weight {res.weights[c]:.3f}, representative: {res.runs[iv['run'][i]]['label']} "
                   f"tid {iv['tid'][i]} interval {iv['index'][i]} [{iv['t_start_ns'][i]}, {iv['t_end_ns'][i]}) ns")


def _write_report(res, traces, out_dir: str) -> None:
    """report.html (the phase table and all three figures), report.json and the figures as PNG/SVG."""
    from scalestack.report import Report, Section, facts, write_report
    from scalestack.report.phase_figures import phase_bottles, phase_speedups, phase_timeline
    from scalestack.report.phase_section import COLUMNS, phase_rows

    figs = {"phases-timeline": phase_timeline(res), "phases-bottle": phase_bottles(res),
            "phases-speedup": phase_speedups(res)}
    cols = [("run", "run"), ("n_threads", "threads"), *COLUMNS]
    if len(res.runs) > 1:
        cols.insert(-1, ("speedup", "speedup"))
    summary = [f"{res.k} phases in {len(res.intervals['run'])} intervals of {len(res.runs)} run(s), clustered together: "
               "a phase number means the same code in every thread and every run."]
    section = Section("phases", "Phases", summary, phase_rows(res), cols,
                      {k: v for k, v in figs.items() if v is not None}, res.to_dict())
    title = "Phases: " + ", ".join(r["label"] for r in res.runs)
    write_report(Report(title, facts(traces[-1]), [], [section]), out_dir)
