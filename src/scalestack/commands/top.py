"""`scalestack top`: a live criticality stack and bottle graph of a running program (eBPF).

Every second: each thread's (or group's) share of the last window and of the whole watch
(criticality: the height of its bottle-graph box), its parallelism (the box's width) and where
its time went. Counters come from the in-kernel aggregator (`collect/aggregator.py`); no trace is kept.
Keys: q quits, s changes the sort, g groups by role / ungroups. Ctrl-C also quits cleanly.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

import click
import numpy as np

from scalestack.errors import UserError

SORTS = ("window", "total", "running", "name", "tid")


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("-p", "--pid", type=int, help="Watch this running process (and its children).")
@click.option("--interval", default="1s", show_default=True, metavar="DURATION", help="Refresh period (the window).")
@click.option("--group-by", metavar="role|REGEX=LABEL,...", help="Rows per role or thread pool instead of per thread.")
@click.option("--sort", "sort", type=click.Choice(SORTS), default="window", show_default=True,
              help="Order rows by last-window criticality, total criticality, running time, name or tid.")
@click.option("--threads-as-roles", "roles", metavar="RULES", help="Thread-role rules REGEX=ROLE,...")
@click.option("--duration", type=float, help="Stop after this many seconds.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(pid, interval, group_by, sort, roles, duration, command):
    """Live per-thread criticality and bottle graph of -p PID or of CMD (after --).

    CMD's own output is discarded so the view stays readable. Example:

        sudo scalestack top -- ./myprog 4
    """
    from scalestack.collect import aggregator
    from scalestack.collect.aggregate_recording import watch
    from scalestack.units import parse_duration_ns

    if pid is None and not command:
        raise UserError("give -p PID or a command after --; usage: scalestack top (-p PID | -- CMD [ARGS...])")
    if pid is not None and command:
        raise UserError("give either -p PID or a command, not both")
    interval_s = parse_duration_ns(interval, what="--interval") / 1e9
    if interval_s < 0.05:
        raise UserError(f"--interval {interval} is too short (50ms at least)")
    aggregator.check()
    if pid is not None:
        aggregator.check_pid(pid)
    view = _View(sort, group_by, roles)
    keys = _Keys()
    final = None
    info = {}
    reason = "quit"
    from rich.console import Console
    from rich.live import Live

    console = Console() if sys.stdout.isatty() else Console(width=160)
    view.width = console.width
    try:
        with keys, Live(console=console, screen=console.is_terminal, auto_refresh=False,
                        transient=not console.is_terminal) as live:
            for prev, cur, info in watch(list(command) or None, pid, interval_s=interval_s, duration_s=duration,
                                         quiet_command=True, stop=lambda: keys.poll(view)):
                view.update(prev, cur, info)
                final = cur
                live.update(view.render(), refresh=True)
            if info.get("ended"):
                reason = "exited"
            elif duration is not None and not keys.quit:
                reason = "duration"
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        if info and command and not info.get("ended"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(info["root_pid"], signal.SIGTERM)
    if final is None:
        return
    view.totals_only = True
    console.print(view.render(final=True))
    who = f"pid {info.get('root_pid')}"
    if reason == "exited":
        status = info.get("exit_status")
        click.echo(f"scalestack top: {who} exited" + (f" with status {status}" if status is not None else "")
                   + f" after {view.elapsed_s:.1f} s", err=True)
    elif reason == "interrupted":
        click.echo(f"scalestack top: interrupted after {view.elapsed_s:.1f} s", err=True)
        sys.exit(130)


class _Keys:
    """Single keys from the terminal without Enter (cbreak mode), restored on exit."""

    def __init__(self):
        self.fd = sys.stdin.fileno() if sys.stdin and sys.stdin.isatty() else None
        self.saved = None
        self.quit = False

    def __enter__(self):
        if self.fd is not None:
            import termios
            import tty

            self.saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def poll(self, view: _View) -> bool:
        """Handle pending keys; True when the user asked to quit."""
        while self.fd is not None and select.select([self.fd], [], [], 0)[0]:
            ch = os.read(self.fd, 1).decode("latin-1")
            if ch in ("q", "Q"):
                self.quit = True
            elif ch == "s":
                view.sort = SORTS[(SORTS.index(view.sort) + 1) % len(SORTS)]
            elif ch == "g":
                view.group_by = None if view.group_by else "role"
        return self.quit


class _View:
    """The table: per thread or group, the last window and the total since the start."""

    def __init__(self, sort: str, group_by, roles: str | None):
        from scalestack.trace.roles import RoleRules

        self.sort = sort
        self.group_by = group_by
        self.rules = RoleRules.parse(roles)
        self.prev = self.cur = None
        self.info: dict = {}
        self.started = time.monotonic()
        self.totals_only = False
        self.width = 200

    @property
    def elapsed_s(self) -> float:
        """Since the program was let go (the aggregator attached: `watch`'s started_ns), to its end;
        from this view's start it counted the eBPF program's load, 0.7-0.8 s."""
        started = self.info.get("started_ns")
        if started is None:
            return time.monotonic() - self.started
        return (self.info.get("ended_ns") or time.monotonic_ns()) / 1e9 - started / 1e9

    def update(self, prev, cur, info) -> None:
        self.prev, self.cur, self.info = prev, cur, info

    def _rows(self):
        from scalestack.analysis.bottle import group_threads
        from scalestack.trace.aggregate import window_rows

        cur = self.cur
        root = self.info.get("root_pid")
        roles = np.array([self.rules.role_of(str(n)) or ("main" if t == root else "app")
                          for t, n in zip(cur.tid.tolist(), cur.name.tolist(), strict=True)], dtype=object)
        win = window_rows(self.prev, cur, 0, self.info.get("started_ns"))
        pos = cur.index()
        wc = np.zeros(len(cur.tid))
        wr = np.zeros(len(cur.tid))
        for t, c, r in zip(win["tid"].tolist(), win["crit_ns"], win["running_ns"], strict=True):
            wc[pos[int(t)]] += c
            wr[pos[int(t)]] += r
        group, labels, groles = group_threads(cur.tid, cur.name, roles, self.group_by)
        ng = len(labels)

        def gsum(x):
            return np.bincount(group, weights=x, minlength=ng)

        state = [""] * ng
        from scalestack.collect.aggregator import STATES

        for i, g in enumerate(group.tolist()):
            s = STATES[int(cur.state[i])]
            state[g] = s if not state[g] or state[g] == s else "mixed"
        span_w = float(win["end_ns"][0] - win["start_ns"][0]) if len(win["tid"]) else 0.0
        return {"label": labels, "role": groles, "state": state, "wc": gsum(wc), "wr": gsum(wr),
                "tc": gsum(cur.crit_ns), "tr": gsum(cur.times_ns["running"]),
                "runnable": gsum(cur.times_ns["runnable"]), "sync": gsum(cur.times_ns["sync_wait"]),
                "io": gsum(cur.times_ns["io_wait"]), "sleep": gsum(cur.times_ns["sleep"]), "span_w": span_w,
                "busy_w": float(win["busy_ns"][0]) if len(win["tid"]) else 0.0}

    def render(self, final: bool = False):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        cur = self.cur
        d = self._rows()
        n = len(d["label"])
        share_w = d["wc"] / d["wc"].sum() if d["wc"].sum() > 0 else np.zeros(n)
        share_t = d["tc"] / d["tc"].sum() if d["tc"].sum() > 0 else np.zeros(n)
        key = {"window": -share_w, "total": -share_t, "running": -d["tr"],
               "name": np.array([str(x) for x in d["label"]], dtype=object), "tid": np.arange(n)}[self.sort]
        order = sorted(range(n), key=lambda i: (key[i], i))
        par_w = d["wr"].sum() / d["wc"].sum() if d["wc"].sum() > 0 else 0.0
        par_t = d["tr"].sum() / d["tc"].sum() if d["tc"].sum() > 0 else 0.0
        title = "since start" if final else f"last {d['span_w'] / 1e9:.1f} s and since start"
        head = Text.assemble(
            ("scalestack top", "bold"), f"  pid {self.info.get('root_pid')}  {self.elapsed_s:.1f} s  ",
            f"running now {cur.running_now}  parallelism win {par_w:.2f} total {par_t:.2f}  ",
            f"threads {len(cur.tid)}  sort {self.sort}" + ("" if final else "  [q quit, s sort, g group]"))
        t = Table(title=f"criticality stack and bottle graph ({title})", header_style="bold", show_edge=False,
                  pad_edge=False, title_justify="left")
        wide = self.width >= 150
        cols = [("box" if self.group_by else "thread", "left")] + ([("role", "left")] if wide else []) + \
            [("state", "left")]
        if not final:
            cols += [("crit % win", "right"), ("stack", "left"), ("width win", "right")]
        cols += [("crit % total", "right"), ("width total", "right"), ("run ms", "right")]
        cols += [("runnable ms", "right"), ("sync ms", "right"), ("io ms", "right"), ("sleep ms", "right")] if wide \
            else [("sync ms", "right")]
        for name, just in cols:
            t.add_column(name, justify=just, no_wrap=name != "thread" and name != "box")
        for i in order[:40]:
            pw = d["wr"][i] / d["wc"][i] if d["wc"][i] > 0 else float("nan")
            pt = d["tr"][i] / d["tc"][i] if d["tc"][i] > 0 else float("nan")
            row = [Text(str(d["label"][i]))] + ([str(d["role"][i])] if wide else []) + [d["state"][i]]
            if not final:
                row += [f"{share_w[i] * 100:5.1f}", "█" * int(round(share_w[i] * (20 if wide else 10))), _f(pw)]
            row += [f"{share_t[i] * 100:5.1f}", _f(pt), f"{d['tr'][i] / 1e6:.1f}"]
            row += [f"{d['runnable'][i] / 1e6:.1f}", f"{d['sync'][i] / 1e6:.1f}", f"{d['io'][i] / 1e6:.1f}",
                    f"{d['sleep'][i] / 1e6:.1f}"] if wide else [f"{d['sync'][i] / 1e6:.1f}"]
            t.add_row(*row)
        if n > 40:
            t.caption = f"{n - 40} more rows"
        return Group(head, t)


def _f(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.2f}"
