"""`scalestack sim`: run the ground-truth simulator on a named or JSON workload."""

from __future__ import annotations

import json

import click


@click.group()
def command():
    """Deterministic multi-threaded program simulator (ground truth for what-if)."""


@command.command("list")
def list_():
    """Named workloads."""
    from scalestack.sim.workloads import NAMED

    for name, fn in NAMED.items():
        click.echo(f"{name:20s} {(fn.__doc__ or '').strip().splitlines()[0]}")


@command.command("run")
@click.argument("workload")
@click.option("--threads", type=int, default=None, help="Thread count (generated workloads).")
@click.option("--cores", type=int, default=4, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--freq", type=float, default=2.0, show_default=True, help="Base frequency, GHz.")
@click.option("--timeslice", type=int, default=0, show_default=True, help="Round-robin slice, ns (0: none).")
@click.option("--accelerate", type=int, default=None, help="Thread tid to run faster.")
@click.option("--factor", type=float, default=2.0, show_default=True)
@click.option("--policy", type=click.Choice(["none", "all-up", "boost-critical", "offline", "bis"]), default=None,
              help="Frequency policy (thesis ch. 7): time, energy and time boosted against the all-base run.")
@click.option("--boost", type=float, default=2.5, show_default=True, help="Boosted frequency, GHz (--policy).")
@click.option("--slice", "slice_ns", type=int, default=None,
              help="Boosting slice, ns (default: 1/50 of the all-base run; the thesis: 10 ms of runs of seconds).")
@click.option("--alpha", type=float, default=1.2, show_default=True,
              help="boost-critical: boost when max/min slice criticality exceeds this.")
@click.option("--beta", type=float, default=0.8, show_default=True,
              help="boost-critical: unboost below this fraction of the maximum.")
@click.option("-o", "--output", help="Write the trace here (Trace.save).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def run(workload, threads, cores, seed, freq, timeslice, accelerate, factor, policy, boost, slice_ns, alpha, beta,
        output, as_json):
    """Simulate WORKLOAD (a name from 'sim list' or a .json file); with --accelerate, the true speedup."""
    from scalestack.errors import UserError
    from scalestack.sim.engine import TID_BASE, simulate
    from scalestack.sim.workloads import get

    wl = get(workload, threads, seed)
    n = len(wl["threads"])
    try:
        base = simulate(wl, cores=cores, freq_ghz=freq, seed=seed, timeslice_ns=timeslice)
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise UserError(f"{workload}: invalid workload ({e}); see the format in scalestack.sim.engine") from None
    out = {"workload": wl.get("name", workload), "runtime_ns": base.runtime_ns, "events": base.events}
    if accelerate is not None:
        i = accelerate - TID_BASE
        if not 0 <= i < n:
            raise UserError(f"--accelerate {accelerate}: tids are {TID_BASE}..{TID_BASE + n - 1}")
        fast = simulate(wl, cores=cores, freq_ghz={j: freq * (factor if j == i else 1.0) for j in range(n)},
                        seed=seed, timeslice_ns=timeslice)
        out.update(accelerate=accelerate, factor=factor, accelerated_runtime_ns=fast.runtime_ns,
                   speedup=base.runtime_ns / fast.runtime_ns)
    if policy is not None:
        from scalestack.sim.policies import run_policy

        pr = run_policy(wl, policy, cores=cores, base=freq, boost=boost, timeslice_ns=timeslice, reference=base,
                        slice_ns=slice_ns or max(base.runtime_ns // 50, 1), alpha=alpha, beta=beta)
        out.update(policy=policy, policy_runtime_ns=pr.runtime_ns, policy_speedup=round(pr.speedup, 4),
                   policy_energy_vs_base=round(pr.energy, 4), time_boosted_share=round(pr.boosted_share, 4))
        base = pr.result
    if output:
        from scalestack.trace.store import save

        save(base.trace, output)
        out["trace"] = output
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            click.echo(f"{k:24s} {v}")
