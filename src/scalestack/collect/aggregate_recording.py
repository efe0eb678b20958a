"""Recording an aggregate recording (`scalestack record --aggregate`, `scalestack top`): the eBPF
aggregator's snapshots, one window at a time, into a `trace.aggregate.AggregateRecording`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from scalestack.errors import UserError
from scalestack.trace.aggregate import AggregateRecording


def watch(
    command: Sequence[str] | None = None, pid: int | None = None, *, interval_s: float = 1.0,
    duration_s: float | None = None, quiet_command: bool = False, stop: Callable[[], bool] | None = None,
) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Follow a command (started held until the aggregator is attached) or a running pid.

    Yields (previous snapshot, snapshot, info) every `interval_s`, and a last one when the target
    ends, `duration_s` passes or `stop()` says so. info: root pid, exit status, ended flag.
    """
    from scalestack.collect import aggregator

    aggregator.check()
    if (command is None) == (pid is None):
        raise UserError("give either a command (after --) or -p PID")
    gated = None
    if pid is not None:
        aggregator.check_pid(pid)
        root = pid
    else:
        gated = aggregator.GatedCommand(command, quiet=quiet_command)
        root = gated.pid
    info: dict[str, Any] = {"root_pid": root, "exit_status": None, "ended": False}
    import time

    try:
        agg = aggregator.Aggregator(root)
    except BaseException:
        if gated is not None:
            gated.cancel()
        raise
    with agg:
        if gated is not None:
            gated.release()
        info["started_ns"] = time.monotonic_ns()
        prev = None
        t0 = time.monotonic()
        next_tick = t0 + interval_s
        while True:
            ended = False
            while True:
                if gated is not None:
                    rc = gated.proc.poll()
                    ended = rc is not None
                    if ended:
                        info["exit_status"] = rc
                else:
                    ended = not aggregator.pid_alive(pid)
                if ended:
                    info.setdefault("ended_ns", time.monotonic_ns())  # (seen within the 20 ms polls)
                if ended or time.monotonic() >= next_tick or (stop is not None and stop()):
                    break
                if duration_s is not None and time.monotonic() - t0 >= duration_s:
                    break
                time.sleep(min(0.02, max(0.0, next_tick - time.monotonic())))
            cur = agg.snapshot()
            last = ended or (duration_s is not None and time.monotonic() - t0 >= duration_s) \
                or (stop is not None and stop())
            info["ended"] = ended
            yield prev, cur, info
            prev = cur
            if last:
                break
            next_tick += interval_s
            if next_tick < time.monotonic():
                next_tick = time.monotonic() + interval_s


def record_aggregate(
    command: Sequence[str] | None, output: str | None, *, pid: int | None = None, duration: float | None = None,
    window_s: float = 1.0, role_rules: str | None = None, flush_every_s: float = 10.0,
) -> AggregateRecording:
    """`scalestack record --aggregate`: counters per window into a Parquet file (rewritten every
    `flush_every_s`, so a long watch killed hard still leaves its data)."""
    import datetime
    import platform
    import signal
    import time

    meta = {"collector": "ebpf-aggregate", "command": list(command) if command else None, "attached_pid": pid,
            "window_ns": int(window_s * 1e9), "kernel": platform.release(), "cores": os.cpu_count(),
            "role_rules": role_rules, "recorded_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    rec = AggregateRecording.empty(meta)
    interrupted = {"flag": False}

    def on_int(signum, frame):  # Ctrl-C ends the watch, the file is still written
        interrupted["flag"] = True

    # Ctrl-C: with -p it ends the watch (the file is written); with a command it is the
    # command's (it gets it too), and the watch ends when the command does
    old = signal.signal(signal.SIGINT, on_int if pid is not None else signal.SIG_IGN)
    last_flush = time.monotonic()
    try:
        for k, (prev, cur, info) in enumerate(watch(command, pid, interval_s=window_s, duration_s=duration,
                                                     stop=lambda: interrupted["flag"])):
            rec.meta["root_pid"] = info["root_pid"]
            rec.append_window(prev, cur, k, info["started_ns"])
            rec.meta["exit_status"] = info["exit_status"]
            rec.meta["spins_failed"] = cur.spins_failed
            rec.meta["table_full"] = cur.table_full
            if output and time.monotonic() - last_flush > flush_every_s:
                rec.save(output)
                last_flush = time.monotonic()
    finally:
        signal.signal(signal.SIGINT, old)
    if output:
        rec.save(output)
    return rec
