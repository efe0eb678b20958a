"""`scalestack record --aggregate`: the eBPF counters mode (kept apart from perf's options)."""

from __future__ import annotations

import sys

import click

from scalestack.errors import UserError


def record_aggregate_command(command, output, pid, duration, window, roles, quiet) -> None:
    """Watch the command (or pid) with the in-kernel aggregator and write the windows; exits."""
    from scalestack.collect.aggregate_recording import record_aggregate
    from scalestack.units import parse_duration_ns

    window_ns = parse_duration_ns(window, what="--window")
    if window_ns < 10_000_000:
        raise UserError(f"--window {window} is too short for --aggregate (10ms at least)")
    if duration is not None and duration <= 0:
        raise UserError("--duration must be positive")
    rec = record_aggregate(command, output, pid=pid, duration=duration, window_s=window_ns / 1e9, role_rules=roles)
    if not quiet:
        start, end, _ = rec.windows()
        span = (end[-1] - start[0]) / 1e9 if len(start) else 0.0
        tids, _, _ = rec.threads()
        import os

        size = os.path.getsize(output) if output and os.path.exists(output) else 0
        click.echo(f"scalestack: aggregated {len(tids)} threads over {span:.3f} s in {len(start)} windows "
                   f"({len(rec.columns['tid'])} rows, {size / 1024:.1f} KiB) -> {output}", err=True)
        if rec.meta.get("spins_failed") or rec.meta.get("table_full"):
            click.echo(f"scalestack: warning: {rec.meta.get('spins_failed')} switches taken without the aggregator's "
                       "lock (a CPU stalled mid-update; their criticality weights are approximate), "
                       f"{rec.meta.get('table_full')} threads not kept (table full)", err=True)
    status = rec.meta.get("exit_status")
    if status is not None and status < 0:
        sys.exit(128 - status)
    sys.exit(int(status or 0))
