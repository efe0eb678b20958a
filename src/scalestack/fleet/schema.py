"""The fleet dataset: Traces and aggregate recordings as hive-partitioned Parquet tables.

A fleet directory holds three tables, each a directory of Parquet files partitioned by
``host=…/program=…/date=…`` (strings), so DuckDB, Spark, pandas or any Parquet reader can
query it directly::

    DIR/recordings/host=web1/program=sort/date=2026-11-25/<file>.parquet
    DIR/threads/host=web1/program=sort/date=2026-11-25/<file>.parquet
    DIR/waits/host=web1/program=sort/date=2026-11-25/<file>.parquet

``recordings``: one row per recording. ``threads``: one row per thread per window: a Trace is
cut into windows of `window_ns` (1 s by default), an aggregate recording keeps its own. ``waits``:
one row per recording, waiting thread and futex (Traces only: aggregate recordings have no wait
objects). Times are int64 ns (criticality rounded to the ns), so sums are exact in every engine
and two engines give bit-identical answers. Columns: `TABLES` below; docs/fleet.md explains each.

Each file carries ``scalestack-fleet`` metadata (table name and schema version); files without
it, damaged ones, or ones whose columns differ are skipped with one line each (`scan`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import socket
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scalestack.analysis.compare import name_pattern
from scalestack.analysis.where import trace_idle_threads
from scalestack.errors import UserError
from scalestack.trace import State, Trace

VERSION = 2  # 2: waits.idle
META_KEY = b"scalestack-fleet"
PARTITIONS = ("host", "program", "date")
STATE_COLUMNS = ("running_ns", "runnable_ns", "sync_wait_ns", "io_wait_ns", "sleep_ns")

TABLES: dict[str, pa.Schema] = {
    "recordings": pa.schema([
        ("recording_id", pa.string()),  # unique in the dataset; also the file's name
        ("kind", pa.string()),  # "trace" or "aggregate"
        ("command", pa.string()),  # the recorded command line, space-joined ("" if attached)
        ("start_ns", pa.int64()),  # first window's start (the recorder's monotonic clock)
        ("wall_ns", pa.int64()),  # length of the recording
        ("window_ns", pa.int64()),  # window length of the threads table's rows
        ("windows", pa.int64()),
        ("threads", pa.int64()),  # distinct threads seen
        ("cores", pa.int64()),  # CPUs of the machine (0 if unknown)
        ("recorded_at", pa.string()),  # ISO 8601 UTC, "" if unknown
    ]),
    "threads": pa.schema([
        ("recording_id", pa.string()),
        ("window_index", pa.int64()),  # 0, 1, ... within the recording
        ("window_start_ns", pa.int64()),
        ("window_end_ns", pa.int64()),
        ("tid", pa.int64()),
        ("name", pa.string()),  # latest thread name
        ("role", pa.string()),  # main, app, gc, jit, runtime, ... (scalestack.trace.roles)
        ("pool", pa.string()),  # the name with digit runs as '*': threads of one pool share it
        ("crit_ns", pa.int64()),  # criticality in the window (each instant split among the running threads)
        ("running_ns", pa.int64()),
        ("runnable_ns", pa.int64()),
        ("sync_wait_ns", pa.int64()),
        ("io_wait_ns", pa.int64()),
        ("sleep_ns", pa.int64()),
    ]),
    "waits": pa.schema([
        ("recording_id", pa.string()),
        ("tid", pa.int64()),  # the waiting thread
        ("name", pa.string()),
        ("role", pa.string()),
        ("pool", pa.string()),
        ("lock", pa.string()),  # the futex address in this recording, hex ("0x0": unknown)
        ("lock_site", pa.string()),  # its offset in the page, hex: the same for a static lock across runs
        ("waits", pa.int64()),  # SYNC_WAIT intervals
        ("wait_ns", pa.int64()),  # their total length
        ("released_by", pa.string()),  # pool of the thread that ended most of these waits ("" if unknown)
        ("idle", pa.bool_()),  # the thread waits for work (parked, a runtime's GC/JIT/service thread): not contention
    ]),
}


# --------------------------------------------------------------------------------------------
# rows from a recording


def _trace_windows(trace: Trace, window_ns: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Window edges and per (window, thread row) sums: crit_ns and the five state columns."""
    from scalestack.analysis.bottle import bottle

    t0, t1 = trace.start_ns, trace.end_ns
    n_win = max(1, int(-(-(t1 - t0) // window_ns)))
    edges = np.minimum(t0 + np.arange(n_win + 1, dtype=np.int64) * window_ns, t1)
    n = len(trace.threads)
    out = {c: np.zeros((n_win, n)) for c in ("crit_ns", *STATE_COLUMNS)}
    if n == 0 or t1 <= t0:
        return edges, out
    res = bottle(trace, window=window_ns)
    for k, w in enumerate(res.windows):
        for box in w.boxes:
            out["crit_ns"][k, trace.thread_index(box.tids[0])[0]] = box.height_ns
    s = trace.states
    a, b = np.clip(s.start_ns, t0, t1), np.clip(s.end_ns, t0, t1)
    keep = b > a
    a, b, rows, state = a[keep], b[keep], trace.thread_index(s.tid[keep]), s.state[keep].astype(np.int64)
    k_a = (a - t0) // window_ns
    k_b = (b - 1 - t0) // window_ns
    pieces = (k_b - k_a + 1).astype(np.int64)
    idx = np.repeat(np.arange(len(a)), pieces)
    k = np.repeat(k_a, pieces) + (np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces))
    dur = (np.minimum(b[idx], t0 + (k + 1) * window_ns) - np.maximum(a[idx], t0 + k * window_ns)).astype(float)
    for col, st in zip(STATE_COLUMNS, (State.RUNNING, State.RUNNABLE, State.SYNC_WAIT, State.IO_WAIT, State.SLEEP),
                       strict=True):
        sel = state[idx] == int(st)
        out[col] = np.bincount(k[sel] * n + rows[idx][sel], weights=dur[sel], minlength=n_win * n).reshape(n_win, n)
    return edges, out


def trace_tables(trace: Trace, recording_id: str, window_ns: int = 1_000_000_000) -> dict[str, pa.Table]:
    """The three tables' rows for one Trace (threads cut into windows of `window_ns`)."""
    th = trace.threads
    edges, sums = _trace_windows(trace, window_ns)
    n_win, n = len(edges) - 1, len(th)
    present = np.zeros((n_win, n), bool)
    for c in sums.values():
        present |= c > 0
    w, r = np.nonzero(present)
    names = th.name.astype(str)
    roles = th.role.astype(str)
    pools = np.array([name_pattern(x) for x in names.tolist()], dtype=object)
    threads = {
        "recording_id": [recording_id] * len(w), "window_index": w.astype(np.int64),
        "window_start_ns": edges[w], "window_end_ns": edges[w + 1], "tid": th.tid[r].astype(np.int64),
        "name": names[r].tolist(), "role": roles[r].tolist(), "pool": pools[r].tolist(),
        **{c: np.rint(sums[c][w, r]).astype(np.int64) for c in ("crit_ns", *STATE_COLUMNS)},
    }
    st = trace.states
    sync = np.flatnonzero(st.state == State.SYNC_WAIT)
    waits: dict[str, list] = {c: [] for c in TABLES["waits"].names}
    if len(sync):
        idle = set(trace_idle_threads(trace, trace.time_in_states()[:, State.RUNNING]).tolist())
        key = np.stack([st.tid[sync].astype(np.int64), st.addr[sync].view(np.int64)], axis=1)
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.ravel()
        wsum = np.bincount(inv, weights=st.duration_ns[sync].astype(float))
        cnt = np.bincount(inv)
        wrow = trace.thread_index(st.waker[sync], missing=-1)
        order = np.argsort(inv, kind="stable")  # each group's waits together: one pass over them
        bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
        for g, (tid, addr_i) in enumerate(uniq.tolist()):
            row = int(trace.thread_index(tid)[0])
            addr = int(np.int64(addr_i).view(np.uint64))
            wk = wrow[order[bounds[g]:bounds[g + 1]]]
            wk = wk[wk >= 0]
            rel = ""
            if len(wk):
                vals, c = np.unique(pools[wk].astype(str), return_counts=True)
                rel = str(vals[int(np.argmax(c))])
            for col, v in (("recording_id", recording_id), ("tid", tid), ("name", names[row]), ("role", roles[row]),
                           ("pool", pools[row]), ("lock", f"{addr:#x}"), ("lock_site", f"{addr & 0xFFF:#05x}"),
                           ("waits", int(cnt[g])), ("wait_ns", int(round(wsum[g]))), ("released_by", rel),
                           ("idle", tid in idle)):
                waits[col].append(v)
    meta = trace.meta
    cmd = meta.get("command")
    rec = _recording_row(recording_id, "trace", " ".join(cmd) if isinstance(cmd, list) else str(cmd or ""),
                         int(edges[0]), trace.wall_ns, window_ns, n_win, n, meta)
    return {"recordings": rec, "threads": _table("threads", threads), "waits": _table("waits", waits)}


def aggregate_tables(rec, recording_id: str) -> dict[str, pa.Table]:
    """The tables' rows for one aggregate recording (`record --aggregate`): its own windows."""
    rec._join()
    cols = rec.columns
    tids, names, roles = rec.threads()
    tid = cols["tid"].astype(np.int64)
    row = np.searchsorted(tids, tid)
    start, end, _ = rec.windows()
    threads = {
        "recording_id": [recording_id] * len(tid), "window_index": cols["window"].astype(np.int64),
        "window_start_ns": cols["start_ns"].astype(np.int64), "window_end_ns": cols["end_ns"].astype(np.int64),
        "tid": tid, "name": [str(x) for x in names[row]], "role": [str(x) for x in roles[row]],
        "pool": [name_pattern(str(x)) for x in names[row]],
        "crit_ns": np.rint(cols["crit_ns"].astype(float)).astype(np.int64),
        **{c: np.rint(cols[c].astype(float)).astype(np.int64) for c in STATE_COLUMNS},
    }
    cmd = rec.meta.get("command")
    span = int(end[-1] - start[0]) if len(start) else 0
    out = {"recordings": _recording_row(recording_id, "aggregate", " ".join(cmd) if isinstance(cmd, list) else "",
                                        int(start[0]) if len(start) else 0, span, rec.window_ns, len(start), len(tids),
                                        rec.meta),
           "threads": _table("threads", threads)}
    out["waits"] = TABLES["waits"].empty_table()
    return out


def _recording_row(rid, kind, command, start_ns, wall_ns, window_ns, windows, threads, meta) -> pa.Table:
    return _table("recordings", {
        "recording_id": [rid], "kind": [kind], "command": [command], "start_ns": [int(start_ns)],
        "wall_ns": [int(wall_ns)], "window_ns": [int(window_ns)], "windows": [int(windows)],
        "threads": [int(threads)], "cores": [int(meta.get("cores") or 0)],
        "recorded_at": [str(meta.get("recorded_at") or "")]})


def _table(name: str, cols: dict[str, Any]) -> pa.Table:
    schema = TABLES[name]
    return pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schema}, schema=schema)


# --------------------------------------------------------------------------------------------
# writing


def _part(value: str, what: str) -> str:
    value = str(value).strip()
    if not value:
        raise UserError(f"the {what} of a fleet recording must not be empty")
    return re.sub(r"[/\\=\s]+", "_", value)


def partition_of(meta: dict[str, Any], path: str | None = None, host: str | None = None, program: str | None = None,
                 date: str | None = None) -> tuple[str, str, str]:
    """(host, program, date) for a recording: the given values, else what its metadata says (the
    recorded command's binary, the date it was recorded), else this machine and today."""
    if program is None:
        cmd = meta.get("command")
        if isinstance(cmd, list) and cmd:
            program = os.path.basename(str(cmd[0]))
        else:
            program = str(meta.get("workload") or (os.path.splitext(os.path.basename(path))[0] if path else "unknown"))
    if date is None:
        at = str(meta.get("recorded_at") or "")
        date = at[:10] if re.match(r"^\d{4}-\d{2}-\d{2}", at) else datetime.date.today().isoformat()
    elif not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(date)):
        raise UserError(f"--date {date!r} must look like 2026-11-25")
    host = host or meta.get("host") or socket.gethostname()
    return _part(host, "host"), _part(program, "program"), _part(date, "date")


def recording_id(host: str, program: str, date: str, name: str, meta: dict[str, Any]) -> str:
    h = hashlib.sha1(json.dumps([host, program, date, name, meta.get("recorded_at"), meta.get("start_ns"),
                                 meta.get("end_ns")], default=str).encode()).hexdigest()[:10]
    return f"{_part(os.path.splitext(os.path.basename(name))[0] or 'rec', 'name')}-{h}"


def write_tables(root: str, partition: tuple[str, str, str], file_stem: str, tables: dict[str, pa.Table]) -> list[str]:
    """Write each table's rows of one partition to ROOT/<table>/host=…/program=…/date=…/STEM.parquet
    (a table without rows gets no file; one already there under that name is removed)."""
    from scalestack.fileio import atomic_output

    host, program, date = partition
    written = []
    for name, table in tables.items():
        if name not in TABLES:
            raise ValueError(f"unknown fleet table {name!r}")
        if table.num_rows == 0:
            stale = os.path.join(root, name, f"host={host}", f"program={program}", f"date={date}", f"{file_stem}.parquet")
            if os.path.exists(stale):
                os.remove(stale)
            continue
        d = os.path.join(root, name, f"host={host}", f"program={program}", f"date={date}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{file_stem}.parquet")
        table = table.cast(TABLES[name]).replace_schema_metadata(
            {META_KEY: json.dumps({"table": name, "version": VERSION}).encode()})
        with atomic_output(path) as fh:
            pq.write_table(table, fh, compression="zstd")
        written.append(path)
    return written


def concat(tables: Iterable[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """Several recordings' tables as one set (one file per table for a whole partition)."""
    tables = list(tables)
    return {name: pa.concat_tables([t[name] for t in tables]) if tables else TABLES[name].empty_table()
            for name in TABLES}


# --------------------------------------------------------------------------------------------
# reading


def scan(root: str) -> tuple[dict[str, list[str]], list[str]]:
    """Every table's readable files under `root`, and one line per file skipped (damaged,
    foreign, or with other columns). Reads only the files' footers."""
    if not os.path.isdir(root):
        raise UserError(f"{root}: no such directory (write one with `scalestack fleet DIR RECORDING...`)")
    files: dict[str, list[str]] = {name: [] for name in TABLES}
    problems: list[str] = []
    found_any = False
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(".parquet"):
                continue
            found_any = True
            path = os.path.join(dirpath, fn)
            why, table = _check(root, path)
            if why:
                problems.append(f"{path}: skipped: {why}")
            else:
                files[table].append(path)
    if not found_any:
        raise UserError(f"{root} holds no Parquet files (write some with `scalestack fleet {root} RECORDING...`)")
    return files, problems


def _check(root: str, path: str) -> tuple[str | None, str]:
    rel = os.path.relpath(path, root).split(os.sep)
    table = rel[0]
    if table not in TABLES:
        return f"not under one of the tables {', '.join(TABLES)}", table
    parts = rel[1:-1]
    if [p.split("=", 1)[0] for p in parts] != list(PARTITIONS) or any("=" not in p for p in parts):
        return "not in a host=…/program=…/date=… directory", table
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is skipped, with its reason
        return f"not a readable Parquet file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})", table
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        return "a Parquet file, but not a scalestack fleet table (no scalestack-fleet metadata)", table
    try:
        meta = json.loads(raw)
    except ValueError:
        return "damaged scalestack-fleet metadata", table
    if meta.get("table") != table:
        return f"a {meta.get('table')!r} table file inside {table}/", table
    if int(meta.get("version", 0)) > VERSION:
        return f"fleet schema {meta.get('version')}, newer than this scalestack's {VERSION}; upgrade", table
    want = TABLES[table]
    got = schema.remove_metadata()
    if [(f.name, f.type) for f in got] != [(f.name, f.type) for f in want]:
        if int(meta.get("version", 0)) < VERSION:
            return (f"fleet schema {meta.get('version')}, older than this scalestack's {VERSION} (waits gained "
                    "`idle`): add its recordings again", table)
        return "its columns differ from the fleet schema", table
    return None, table


def compact(root: str) -> tuple[int, int]:
    """Merge the files of each partition of each table into one (engines open files one by one:
    thousands of one-recording files are slower to query than a few large ones). A recording in
    several files (exported again) keeps the rows of its newest file. Files `scan` skips are left
    alone. Returns (files before, files after) of the partitions merged."""
    from scalestack.fileio import atomic_output

    files, _ = scan(root)
    before = after = 0
    for name, paths in files.items():
        by_dir: dict[str, list[str]] = {}
        for p in paths:
            by_dir.setdefault(os.path.dirname(p), []).append(p)
        for d, group in sorted(by_dir.items()):
            if len(group) < 2:
                continue
            group.sort(key=lambda p: (os.stat(p).st_mtime_ns, p), reverse=True)  # newest first
            seen: set[str] = set()
            parts = []
            for p in group:
                t = pq.read_table(p, use_threads=False)
                ids = t.column("recording_id").to_pylist()
                keep = [i not in seen for i in ids]
                seen.update(ids)
                parts.append(t.filter(pa.array(keep)).cast(TABLES[name]))
            merged = pa.concat_tables(parts).replace_schema_metadata(
                {META_KEY: json.dumps({"table": name, "version": VERSION}).encode()})
            stem = "compacted-" + hashlib.sha1("\n".join(sorted(group)).encode()).hexdigest()[:10]
            out = os.path.join(d, f"{stem}.parquet")
            with atomic_output(out) as fh:
                pq.write_table(merged, fh, compression="zstd")
            for p in group:
                if p != out:
                    os.remove(p)
            before += len(group)
            after += 1
    return before, after
