"""`scalestack hwsim`: the trace-driven multicore simulator with per-thread cycle accounting."""

from __future__ import annotations

import click

from scalestack.errors import UserError
from scalestack.units import parse_counts, parse_size_bytes


def _machine(config: str | None, sets: tuple[str, ...], cores: int | None):
    from scalestack.hwsim.config import HwConfig, load_config, make_config

    cfg = load_config(config) if config else HwConfig()
    kv = {}
    for s in sets:
        if "=" not in s:
            raise UserError(f"--set {s!r}: expected KEY=VALUE")
        k, v = s.split("=", 1)
        kv[k] = v
    return make_config(kv, cfg)


def _config_in_paths(paths: tuple[str, ...], config: str | None) -> tuple[tuple[str, ...], str | None]:
    """`run CONFIG`: a .yaml/.yml/.json positional is the machine config; its `traces:` list (paths
    relative to the file) adds trace files."""
    from pathlib import Path

    out = []
    for p in paths:
        if p.endswith((".yaml", ".yml", ".json")):
            if config:
                raise UserError(f"{p}: give one config (already have {config})")
            config = p
            text = Path(p).read_text() if Path(p).exists() else ""
            if p.endswith(".json"):
                import json

                data = json.loads(text or "{}")
            else:
                import yaml

                data = yaml.safe_load(text) or {}
            listed = data.get("traces", []) if isinstance(data, dict) else []
            if isinstance(listed, str):
                listed = [listed]
            out += [str(Path(p).parent / t) for t in listed]
        else:
            out.append(p)
    return tuple(out), config


def _traces(paths: tuple[str, ...], gens: tuple[str, ...], cores: int | None):
    from scalestack.hwsim.traces import from_arrays, generate, mix, read_text

    parts = [read_text(p) for p in paths]
    streams = []
    for i, g in enumerate(gens):
        f = g.split(":")
        if len(f) != 3:
            raise UserError(f"--gen {g!r}: expected KIND:WORKING_SET:ACCESSES, e.g. random:1M:100000")
        streams.append(generate(f[0], parse_size_bytes(f[2]), parse_size_bytes(f[1]), seed=i))
    if streams:
        parts.append(from_arrays(streams, [f"{g}" for g in gens]))
    if not parts:
        raise UserError("give trace files or --gen KIND:WS:N")
    tr = parts[0] if len(parts) == 1 and not gens else mix(parts)
    if cores is not None:
        if cores < 1:
            raise UserError("--cores must be at least 1")
        if tr.threads > cores:
            raise UserError(f"{tr.threads} threads on {cores} cores: `run` gives every thread its own core; "
                            f"time-share fewer cores with `scalestack hwsim mix --cores {cores}`")
    return tr


@click.group()
def command():
    """Trace-driven multicore memory simulator: per-thread cycle accounting (thesis Ch. 6.2)."""


@command.command("run")
@click.argument("paths", nargs=-1, metavar="TRACES...")
@click.option("--config", "config", help="YAML/JSON file of machine parameters (Table 6.2 defaults).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override one machine parameter.")
@click.option("--gen", "gens", multiple=True, metavar="KIND:WS:N", help="Add a synthetic thread (stream, strided, random, chase).")
@click.option("--cores", type=int, help="Cores of the machine (default: one per thread).")
@click.option("--no-truth", is_flag=True, help="Skip the isolated replays (no error figures).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", help="Write JSON here.")
def run(paths, config, sets, gens, cores, no_truth, as_json, output):
    """Run traces together; per thread: cycles, interference by cause, estimated isolated time."""
    from scalestack.hwsim.accounting import account

    paths, config = _config_in_paths(paths, config)
    cfg = _machine(config, sets, cores)
    tr = _traces(paths, gens, cores)
    res = account(tr, cfg, ground_truth=not no_truth)
    if output:
        if not output.endswith(".json"):
            raise UserError(f"cannot tell the format of {output}: use .json")
        with open(output, "w") as fh:
            fh.write(res.to_json())
        click.echo(f"scalestack: wrote {output}", err=True)
        return
    if as_json:
        click.echo(res.to_json())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="per-thread cycle accounting (thesis 6.2)")
    for col in ("thread", "cycles", "inter-miss", "mem wait", "positive", "isolated est", "isolated", "error %"):
        t.add_column(col, justify="right")
    for r in res.threads:
        t.add_row(r.name, f"{r.cycles:,.0f}", f"{r.inter_miss_penalty:,.0f}", f"{r.memory_wait:,.0f}",
                  f"{r.positive:,.0f}", f"{r.isolated_est:,.0f}",
                  "-" if r.isolated_measured is None else f"{r.isolated_measured:,.0f}",
                  "-" if r.error is None else f"{100 * r.error:+.2f}")
    Console(width=max(Console().width, 120)).print(t)  # (not a terminal: 80 columns cut the headers)


@command.command("trace")
@click.option("-o", "--output", required=True, help="Text trace to write.")
@click.option("--max-accesses", type=int, default=None, help="Stop after about this many accesses.")
@click.argument("argv", nargs=-1, required=True)
def trace(output, max_accesses, argv):
    """Trace a real (single-threaded) program with valgrind lackey into the hwsim text format."""
    from scalestack.hwsim.traces import trace_program

    n = trace_program(list(argv), output, max_accesses=max_accesses)
    click.echo(f"scalestack: wrote {n} accesses to {output}", err=True)


@command.command("mix")
@click.argument("paths", nargs=-1, metavar="TRACES...")
@click.option("--gen", "gens", multiple=True, metavar="KIND:WS:N", help="Add a synthetic program.")
@click.option("--cores", type=int, required=True, help="Cores the programs share (fewer than programs).")
@click.option("--policy", type=click.Choice(["round-robin", "progress-aware", "both"]), default="both")
@click.option("--slice", "slice_cycles", type=int, default=10_000_000, show_default=True,
              help="Time slice in cycles (5 ms at 2 GHz).")
@click.option("--config", "config", help="YAML/JSON file of machine parameters.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def mix_(paths, gens, cores, policy, slice_cycles, config, sets, as_json):
    """Programs time-sharing fewer cores: fairness of round-robin vs progress-aware (thesis 7.2)."""
    import json

    from scalestack.hwsim.sched import schedule

    cfg = _machine(config, sets, None)
    tr = _traces(paths, gens, None)
    pols = ["round-robin", "progress-aware"] if policy == "both" else [policy]
    res = [schedule(tr, cores, p, cfg, slice_cycles) for p in pols]
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in res], indent=2))
        return
    for r in res:
        click.echo(f"{r.policy:15s} fairness {r.fairness:.3f} (estimated {r.fairness_est:.3f}), "
                   f"wall {r.wall_cycles:,.0f} cycles")
        for row in r.rows():
            click.echo(f"  {row['program']:24s} progress {row['progress']:.3f}")


mix_.name = "mix"


@command.command("stack")
@click.argument("paths", nargs=-1, metavar="TRACES...")
@click.option("--kernel", "kernels", multiple=True, metavar="KIND:WS:ACCESSES",
              help="Generate a parallel kernel (stream, strided, random, chase), e.g. random:4M:20000.")
@click.option("--threads", "threads", default="4", show_default=True,
              help="Thread counts for --kernel, comma-separated (one thread per core), e.g. 2,4,8,16.")
@click.option("--locks", type=int, default=1, show_default=True, help="Locks in a kernel (0: none).")
@click.option("--lock-every", type=int, default=500, show_default=True, help="Accesses between critical sections.")
@click.option("--barriers", type=int, default=4, show_default=True, help="Barriers per thread.")
@click.option("--imbalance", type=float, default=0.2, show_default=True, help="Extra work of the last thread (fraction).")
@click.option("--config", "config", help="YAML/JSON file of machine parameters.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--tree", is_flag=True, help="Also print the classification tree (spec Sec. 4) over the stacks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-o", "--output", help="Write the stacks figure (.png/.svg) or JSON (.json).")
@click.option("--report", "report_dir", help="Write report.html/report.json and the figures into this directory.")
def stack(paths, kernels, threads, locks, lock_every, barriers, imbalance, config, sets, tree, as_json, output,
          report_dir):
    """Hardware speedup stacks (thesis eq. 3.8) of multi-threaded traces with locks and barriers."""
    import json

    from scalestack.hwsim.stack import classify_stacks, render_tree, speedup_stack
    from scalestack.hwsim.traces import parallel_kernel, read_text

    cfg = _machine(config, sets, None)
    jobs = [(p, read_text(p)) for p in paths]
    ns = parse_counts(threads, "--threads")
    for i, k in enumerate(kernels):
        f = k.split(":")
        if len(f) != 3:
            raise UserError(f"--kernel {k!r}: expected KIND:WORKING_SET:ACCESSES, e.g. random:4M:20000")
        for n in ns:
            jobs.append((f"{k}x{n}", parallel_kernel(f[0], n, parse_size_bytes(f[2]), parse_size_bytes(f[1]), locks=locks,
                                                     lock_every=lock_every, barriers=barriers,
                                                     imbalance=imbalance, seed=i)))
    if not jobs:
        raise UserError("give multi-threaded trace files or --kernel KIND:WS:N")
    from rich.progress import track

    stacks = [speedup_stack(tr, cfg, name=name) for name, tr in track(jobs, description="simulating", transient=True)]
    if report_dir:
        from scalestack.report.hwsim import write_stack_report

        written = write_stack_report(stacks, report_dir, cfg.freq_ghz)
        click.echo(f"scalestack: wrote {written['report.html']}", err=True)
    if output and not output.endswith(".json"):
        from scalestack.report.hwsim import stacks_figure

        stacks_figure(stacks, output)
        click.echo(f"scalestack: wrote {output}", err=True)
    if as_json or (output and output.endswith(".json")):
        text = json.dumps({"stacks": [s.rows()[0] for s in stacks],
                           "tree": classify_stacks(stacks) if tree else None}, indent=2)
        if output and output.endswith(".json"):
            with open(output, "w") as fh:
                fh.write(text)
        else:
            click.echo(text)
        return
    hdr = ("stack", "N", "S", "S^", "err%", "base", "pos", "netLLC", "mem", "spin", "yield", "imb")
    click.echo(" ".join(f"{h:>8s}" for h in hdr))
    for s in stacks:
        vals = (s.speedup, s.estimated, 100 * (s.error or 0), s.base, s.positive, s.net_negative_llc, s.memory,
                s.spinning, s.yielding, s.imbalance)
        click.echo(f"{s.name[-8:]:>8s} {s.n:8d} " + " ".join(f"{v:8.2f}" for v in vals))
    if tree:
        click.echo(render_tree(classify_stacks(stacks)))
