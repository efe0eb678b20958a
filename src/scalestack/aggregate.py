"""Aggregate recordings: per-thread counters per time window instead of a trace.

`scalestack record --aggregate` (eBPF, `collect/ebpf.py`) writes one Parquet row per thread per
window: its criticality C_j, running time Run_j and RUNNABLE / SYNC_WAIT / IO_WAIT / SLEEP time in
that window. That is all a bottle graph needs (height C_j, width Run_j / C_j), so a service can be
watched for hours in kilobytes. Criticality and bottle graphs add over windows and threads, so
longer windows, the whole run and thread groups are sums of rows: exact, no re-sweep.

A normal recording stays a `Trace`; this is a second, smaller input that `scalestack report`
(and `crit`/`bottle` through `load_any`) accepts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from scalestack.errors import UserError

FORMAT = "scalestack-aggregate"
VERSION = 1
COLUMNS = ("window", "start_ns", "end_ns", "busy_ns", "tid", "pid", "name", "crit_ns", "running_ns", "runnable_ns",
           "sync_wait_ns", "io_wait_ns", "sleep_ns")
STATE_COLUMNS = ("running_ns", "runnable_ns", "sync_wait_ns", "io_wait_ns", "sleep_ns")


@dataclasses.dataclass
class AggregateRecording:
    """Rows (one per thread per window, as NumPy columns) and metadata."""

    columns: dict[str, np.ndarray]
    meta: dict[str, Any]
    _pending: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list, repr=False)

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls, meta: dict[str, Any]) -> AggregateRecording:
        cols = {c: np.zeros(0, dtype=object if c == "name" else np.float64) for c in COLUMNS}
        return cls(cols, meta)

    def append_window(self, prev, cur, index: int, start_ns: int | None = None) -> None:
        """Add the window between two `ebpf.Snapshot`s (prev None: counters start at zero at
        `start_ns`)."""
        self._pending.append(window_rows(prev, cur, index, start_ns))  # joined when read: no O(n²) growth

    def _join(self) -> None:
        if self._pending:
            self.columns = {c: np.concatenate([self.columns[c], *(p[c] for p in self._pending)]) for c in COLUMNS}
            self._pending.clear()

    # ---- storage ------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from scalestack.fileio import atomic_output

        self._join()
        ints = {"window", "start_ns", "end_ns", "tid", "pid"}
        arrays = {c: pa.array(self.columns[c].astype(np.int64) if c in ints else
                              (self.columns[c].astype(str) if c == "name" else self.columns[c].astype(np.float64)))
                  for c in COLUMNS}
        table = pa.table(arrays)
        meta = {**self.meta, "format": FORMAT, "version": VERSION}
        table = table.replace_schema_metadata({b"scalestack": json.dumps(meta).encode()})
        with atomic_output(path) as fh:
            pq.write_table(table, fh, compression="zstd")

    @classmethod
    def load(cls, path: str) -> AggregateRecording:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
            raise UserError(f"{path}: not a readable Parquet file ({exc})") from None
        raw = (table.schema.metadata or {}).get(b"scalestack")
        meta = json.loads(raw) if raw else {}
        if meta.get("format") != FORMAT:
            raise UserError(f"{path} is a Parquet file but not a scalestack aggregate recording")
        if int(meta.get("version", 0)) > VERSION:
            raise UserError(f"{path} uses aggregate format {meta['version']}, newer than this scalestack's; upgrade")
        cols = {c: table.column(c).to_numpy(zero_copy_only=False) for c in COLUMNS}
        cols["name"] = cols["name"].astype(object)
        return cls(cols, meta)

    # ---- views --------------------------------------------------------------------------------
    @property
    def window_ns(self) -> int:
        return int(self.meta.get("window_ns", 1_000_000_000))

    def windows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start_ns, end_ns, busy_ns) per recorded window, in order."""
        self._join()
        w = self.columns["window"].astype(np.int64)
        if len(w) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        _, first = np.unique(w, return_index=True)
        return (self.columns["start_ns"][first].astype(np.int64), self.columns["end_ns"][first].astype(np.int64),
                self.columns["busy_ns"][first].astype(np.float64))

    def threads(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tid, latest name, role) of every thread seen."""
        self._join()
        tid = self.columns["tid"].astype(np.int64)
        uniq, last = np.unique(tid[::-1], return_index=True)
        names = self.columns["name"][::-1][last]
        return uniq, names, self._roles(uniq, names)

    def _roles(self, tids: np.ndarray, names: np.ndarray) -> np.ndarray:
        from scalestack.roles import RoleRules

        saved = self.meta.get("role_rules")
        rules = RoleRules.parse(saved) if isinstance(saved, str) else RoleRules()
        root = self.meta.get("root_pid")
        out = np.empty(len(tids), dtype=object)
        for i, (t, n) in enumerate(zip(tids.tolist(), names.tolist(), strict=True)):
            out[i] = rules.role_of(str(n)) or ("main" if root is not None and t == int(root) else "app")
        return out

    def per_thread(self, window_mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Sums per thread (rows of `threads()`) over the windows selected."""
        self._join()
        tids, _, _ = self.threads()
        tid = self.columns["tid"].astype(np.int64)
        keep = np.ones(len(tid), bool) if window_mask is None else window_mask[self.columns["window"].astype(np.int64)]
        row = np.searchsorted(tids, tid[keep])
        return {c: np.bincount(row, weights=self.columns[c][keep].astype(np.float64), minlength=len(tids))
                for c in ("crit_ns", *STATE_COLUMNS)}

    def criticality(self):
        """The criticality stack of the whole recording (a `CriticalityResult`)."""
        from scalestack.analysis.criticality import CriticalityResult

        tids, names, roles = self.threads()
        sums = self.per_thread()
        start, end, busy = self.windows()
        span = int(end[-1] - start[0]) if len(start) else 0
        return CriticalityResult(tids=tids, names=names, roles=roles, criticality_ns=sums["crit_ns"],
                                 running_ns=sums["running_ns"], idle_ns=float(max(span - busy.sum(), 0.0)),
                                 span_ns=span, active="running", t0_ns=int(start[0]) if len(start) else 0)

    def bottle(self, group_by=None, window: int | None = None):
        """Bottle graph of the whole recording, or one per `window` ns (a multiple of the recorded
        window; rounded to the nearest)."""
        from scalestack.analysis.bottle import (
            BottleResult,
            WindowedBottleResult,
            _boxes,
            group_threads,
        )

        tids, names, roles = self.threads()
        group, labels, groles = group_threads(tids, names, roles, group_by)
        start, end, busy = self.windows()
        if window is None:
            s = self.per_thread()
            span = int(end[-1] - start[0]) if len(start) else 0
            return BottleResult(_boxes(s["crit_ns"], s["running_ns"], group, labels, groles, tids),
                                float(max(span - busy.sum(), 0.0)), span, int(start[0]) if len(start) else 0,
                                "running")
        k = max(1, int(round(window / self.window_ns)))
        out = []
        for j in range(0, len(start), k):
            mask = np.zeros(len(start), bool)
            mask[j:j + k] = True
            s = self.per_thread(mask)
            span = int(end[min(j + k, len(end)) - 1] - start[j])
            out.append(BottleResult(_boxes(s["crit_ns"], s["running_ns"], group, labels, groles, tids),
                                    float(max(span - busy[mask].sum(), 0.0)), span, int(start[j]), "running"))
        return WindowedBottleResult(k * self.window_ns, tuple(out))




def window_rows(prev, cur, index: int, start_ns: int | None = None) -> dict[str, np.ndarray]:
    """Counter differences between two snapshots, one row per thread that did anything."""
    n = len(cur.tid)
    crit = cur.crit_ns.copy()
    times = {s: cur.times_ns[s].copy() for s in ("running", "runnable", "sync_wait", "io_wait", "sleep")}
    busy = cur.busy_ns
    start = cur.t_ns if start_ns is None else min(int(start_ns), cur.t_ns)
    if prev is not None:
        pi = prev.index()
        rows = np.array([pi.get(int(t), -1) for t in cur.tid.tolist()], dtype=np.int64)
        seen = rows >= 0
        crit[seen] -= prev.crit_ns[rows[seen]]
        for s in times:
            times[s][seen] -= prev.times_ns[s][rows[seen]]
        busy -= prev.busy_ns
        start = prev.t_ns
    active = (crit > 0) | np.any(np.stack([v > 0 for v in times.values()]), axis=0) if n else np.zeros(0, bool)
    out = {
        "window": np.full(n, index, dtype=np.int64), "start_ns": np.full(n, start, dtype=np.int64),
        "end_ns": np.full(n, cur.t_ns, dtype=np.int64), "busy_ns": np.full(n, max(busy, 0.0)),
        "tid": cur.tid.copy(), "pid": cur.tgid.copy(), "name": cur.name.copy(), "crit_ns": np.maximum(crit, 0.0),
        **{f"{s}_ns": np.maximum(v, 0.0) for s, v in times.items()},
    }
    if n and not active.any():  # keep one row so the window (and its idle time) is not lost
        active[0] = True
    return {c: v[active] for c, v in out.items()}


def watch(
    command: Sequence[str] | None = None, pid: int | None = None, *, interval_s: float = 1.0,
    duration_s: float | None = None, quiet_command: bool = False, stop: Callable[[], bool] | None = None,
) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Follow a command (started held until the aggregator is attached) or a running pid.

    Yields (previous snapshot, snapshot, info) every `interval_s`, and a last one when the target
    ends, `duration_s` passes or `stop()` says so. info: root pid, exit status, ended flag.
    """
    from scalestack.collect import ebpf

    ebpf.check()
    if (command is None) == (pid is None):
        raise UserError("give either a command (after --) or -p PID")
    gated = None
    if pid is not None:
        ebpf.check_pid(pid)
        root = pid
    else:
        gated = ebpf.GatedCommand(command, quiet=quiet_command)
        root = gated.pid
    info: dict[str, Any] = {"root_pid": root, "exit_status": None, "ended": False}
    import time

    try:
        agg = ebpf.Aggregator(root)
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
                    ended = not ebpf.pid_alive(pid)
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


def is_aggregate(path: str) -> bool:
    """True for a Parquet file (magic PAR1), which only aggregate recordings are."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def build_report(rec: AggregateRecording, window: int | None = None, group_by=None, title: str | None = None):
    """The report of an aggregate recording: thread states, criticality stack, bottle graph(s).

    The same sections, figures and JSON keys as a trace's report, from counters."""
    from scalestack.report import Report, Section
    from scalestack.report.figures import bottle_graph, bottle_strip, criticality_stack
    from scalestack.units import format_ns

    tids, names, roles = rec.threads()
    sums = rec.per_thread()
    start, end, busy = rec.windows()
    span = int(end[-1] - start[0]) if len(start) else 0
    rows = [{"tid": int(t), "name": str(n), "role": str(r),
             **{f"{c[:-3]}_ms": float(sums[c][i]) / 1e6 for c in STATE_COLUMNS}}
            for i, (t, n, r) in enumerate(zip(tids, names, roles, strict=True))]
    cols = [("tid", "tid"), ("name", "name"), ("role", "role"), ("running_ms", "running"),
            ("runnable_ms", "runnable"), ("sync_wait_ms", "sync wait"), ("io_wait_ms", "io wait"), ("sleep_ms", "sleep")]
    threads = Section("threads", "Threads and their states",
                      [f"{len(tids)} threads over {format_ns(span)} in {len(start)} windows of "
                       f"{format_ns(rec.window_ns)} (in-kernel counters, no trace); times in ms."],
                      rows, cols, {}, {"threads": rows})
    crit = rec.criticality()
    crows = crit.rows()
    for r in crows:
        r["criticality_ms"] = r["criticality_ns"] / 1e6
        r["running_ms"] = r["running_ns"] / 1e6
    summary = []
    if crit.most_critical_tid is not None:
        i = int(np.flatnonzero(crit.tids == crit.most_critical_tid)[0])
        summary.append(f"Most critical: {crit.names[i]} ({crit.most_critical_tid}) with {crit.share[i] * 100:.1f}% "
                       "of the run time.")
    ccols = [("tid", "tid"), ("name", "name"), ("role", "role"), ("share_pct", "share %"),
             ("criticality_ms", "criticality ms"), ("running_ms", "running ms"), ("parallelism", "parallelism")]
    csec = Section("criticality", "Criticality stack", summary, crows, ccols, {"criticality": criticality_stack(crit)},
                   crit.to_dict())
    bres = rec.bottle(group_by=group_by)
    brows = [{**r, "height_ms": r["height_ns"] / 1e6, "area_ms": r["area_ns"] / 1e6} for r in bres.rows()]
    brows.reverse()
    bcols = [("label", "box"), ("role", "role"), ("height_ms", "height ms"), ("width", "width"),
             ("area_ms", "area ms"), ("share_pct", "share %")]
    figures = {"bottle": bottle_graph(bres)}
    data = bres.to_dict()
    bsummary = ["Box height = criticality, width = parallelism, area = running time (from per-window counters)."]
    wres = rec.bottle(group_by=group_by, window=window or rec.window_ns)
    if len(wres.windows) > 1:
        figures["bottle-windows"] = bottle_strip(wres)
        data["windows"] = wres.to_dict()
        bsummary.append(f"{len(wres.windows)} windows of {format_ns(wres.window_ns)} in bottle-windows.")
    bsec = Section("bottle", "Bottle graph", bsummary, brows, bcols, figures, data)
    meta = rec.meta
    facts = {k: meta[k] for k in ("collector", "command", "exit_status", "cores", "kernel", "recorded_at", "window_ns")
             if meta.get(k) is not None}
    facts["wall_ns"] = span
    facts["threads"] = len(tids)
    warnings = []
    if meta.get("spins_failed") or meta.get("table_full"):
        warnings.append(f"{meta.get('spins_failed', 0)} switches taken without the aggregator's lock (a CPU "
                        "stalled mid-update; their criticality weights are approximate), "
                        f"{meta.get('table_full', 0)} threads not kept (table full)")
    cmd = meta.get("command")
    from scalestack.report.text import command_line, short_command

    return Report(title or (short_command(cmd) if cmd else f"pid {meta.get('attached_pid')}"), facts, warnings,
                  [threads, csec, bsec], full_title=command_line(cmd))


def load_if_aggregate(path: str, active: str = "running", between=None) -> AggregateRecording | None:
    """The aggregate recording at `path`, or None when it is a trace; refuses trace-only options."""
    if not is_aggregate(path):
        return None
    if between:
        raise UserError("--between needs a trace; an aggregate recording has whole windows only")
    if active != "running":
        raise UserError("an aggregate recording counts running threads only (--active running)")
    return AggregateRecording.load(path)
