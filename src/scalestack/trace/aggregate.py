"""Aggregate recordings: per-thread counters per time window instead of a trace.

`scalestack record --aggregate` (eBPF, `collect/aggregator.py`) writes one Parquet row per thread per
window: its criticality C_j, running time Run_j and RUNNABLE / SYNC_WAIT / IO_WAIT / SLEEP time in
that window. That is all a bottle graph needs (height C_j, width Run_j / C_j), so a service can be
watched for hours in kilobytes. Criticality and bottle graphs add over windows and threads, so
longer windows, the whole run and thread groups are sums of rows: exact, no re-sweep.

A normal recording stays a `Trace`; this is a second, smaller input that `scalestack report`,
`crit`, `bottle`, `compare` and `fleet` accept (`scalestack.criticality(rec)` and
`scalestack.bottle(rec)` take either). Recording one: `collect/aggregate_recording.py`.
"""

from __future__ import annotations

import dataclasses
import json
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
        """Add the window between two `aggregator.Snapshot`s (prev None: counters start at zero at
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
        from scalestack.trace.roles import RoleRules

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


def is_aggregate(path: str) -> bool:
    """True for a Parquet file (magic PAR1), which only aggregate recordings are."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def load_if_aggregate(path: str, active: str = "running", between=None) -> AggregateRecording | None:
    """The aggregate recording at `path`, or None when it is a trace; refuses trace-only options."""
    if not is_aggregate(path):
        return None
    refuse_trace_options(active, between)
    return AggregateRecording.load(path)


def refuse_trace_options(active: str = "running", between=None) -> None:
    """An aggregate recording has whole windows of running-thread counters: one clear error for an
    option only a trace can answer."""
    if between:
        raise UserError("--between needs a trace; an aggregate recording has whole windows only")
    if active != "running":
        raise UserError("an aggregate recording counts running threads only (--active running)")
