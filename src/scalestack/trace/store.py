"""Save and load a Trace: one file, a ZIP of Parquet tables plus `meta.json`.

One file because users mail traces and attach them to issues; Parquet inside because it is
columnar, compressed and readable from any notebook (`pyarrow.parquet.read_table` on the
member). The schema version is checked on load. Writes go to a temporary file that is renamed
into place, so an interrupted save never leaves a half-written trace.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import io
import json
import mmap
import os
import shutil
import tempfile
import time
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scalestack.errors import UserError
from scalestack.fileio import atomic_output, atomic_write, parent_dir
from scalestack.trace.model import (
    SCHEMA_VERSION,
    FrameTable,
    FutexCallTable,
    NameTable,
    SampleTable,
    StackTable,
    StateTable,
    SwitchSpanTable,
    ThreadTable,
    Trace,
)
from scalestack.trace.parallel import balanced, on_threads
from scalestack.trace.spill import ColumnFiles, pread_into

MAGIC_MEMBER = "scalestack-trace"
TABLES = {"threads": ThreadTable, "states": StateTable, "names": NameTable}
OPTIONAL_TABLES = {"samples": SampleTable, "switch_spans": SwitchSpanTable, "frames": FrameTable,
                   "stacks": StackTable, "futex_calls": FutexCallTable}  # written only when not empty


def _to_arrow(table) -> pa.Table:
    names = list(table.SCHEMA)
    return pa.Table.from_arrays([_column(getattr(table, n), table.SCHEMA[n]) for n in names], names=names)


def _column(arr: np.ndarray, dtype) -> pa.Array:
    """One column as an Arrow array built from its buffers: `pa.array` imports pandas (0.5-0.7 s)
    to check what it was given, longer than writing a million rows."""
    n = len(arr)
    if dtype is object:
        data = [str(v).encode() for v in arr.tolist()]
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum([len(b) for b in data], out=offsets[1:])
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])
    if arr.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(np.packbits(arr, bitorder="little"))])
    arr = np.ascontiguousarray(arr)
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), n, [None, pa.py_buffer(arr)])


def _read(cls, zf: zipfile.ZipFile, member: str, mapped: mmap.mmap | None = None,
          window: tuple[int, int] | None = None, key: tuple | None = None):
    """One table. Members are stored uncompressed in the ZIP, so a memory-mapped trace file is read
    in place; with `window`, only the row groups whose time range overlaps it (their Parquet
    statistics say so) are read.

    Each column is decoded one row group at a time into its final NumPy array: reading the whole
    Arrow table first and converting it held every row twice, and Arrow's allocator kept the
    freed table (a 2.9 M-row trace loaded in +312 MB for 117 MB of tables). Text columns are read
    as Parquet's dictionary, so a name repeated on every row is one Python string, not one each.
    `key` names the file's version (`_file_key`): its row groups' time ranges are then read
    from their statistics once, not again for every window a chunked analysis loads.
    """
    info = zf.getinfo(f"{member}.parquet")
    if mapped is not None and info.compress_type == zipfile.ZIP_STORED:
        head = mapped[info.header_offset:info.header_offset + 30]  # the member's local header: its data follows
        start = info.header_offset + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
        data = pa.py_buffer(mapped)[start:start + info.file_size]
    else:
        data = pa.py_buffer(zf.read(info))
    text = [name for name, dtype in cls.SCHEMA.items() if dtype is object]
    pf = pq.ParquetFile(pa.BufferReader(data), read_dictionary=text)
    groups = range(pf.num_row_groups)
    if window is not None:
        _, lo, hi = _group_spans(pf.metadata, None if key is None else (*key, member))
        groups = np.flatnonzero((hi > window[0]) & (lo < window[1])).tolist()
    n = sum(pf.metadata.row_group(g).num_rows for g in groups)
    present = set(pf.schema_arrow.names)
    cols, read = {}, []
    for name, dtype in cls.SCHEMA.items():
        if name in present:
            read.append(name)
        elif name in cls.DEFAULTS:  # a column added later: older files lack it
            cols[name] = np.full(n, cls.DEFAULTS[name], dtype=dtype)
        else:
            raise UserError(f"trace file is missing column {name!r}; was it written by a newer scalestack?")
    # Arrow decodes a column without the GIL, so the columns are shared among threads of ours, each
    # with its own reader of the member (Arrow's own thread pool can abort the interpreter at exit,
    # pyarrow 26: "terminate called without an active exception" in about 1 run in 5)
    workers = _read_threads(n, len(read))
    where = {c.path_in_schema: c for c in (pf.metadata.row_group(0).column(i) for i in range(pf.metadata.num_columns))} \
        if pf.num_row_groups else {}
    size = np.array([where[name].total_uncompressed_size if name in where else 1 for name in read], np.int64)
    shares = balanced(size, workers)
    for name in read:
        cols[name] = np.empty(n, dtype=cls.SCHEMA[name])

    def decode(k: int) -> None:
        own = pf if k == 0 else pq.ParquetFile(pa.BufferReader(data), read_dictionary=text)
        for j in shares[k].tolist():
            _read_column(own, groups, read[j], cols[read[j]])

    on_threads(len(shares), decode)
    return cls(**{name: cols[name] for name in cls.SCHEMA})


def _read_threads(rows: int, columns: int) -> int:
    """Threads a member's columns are read on: one per CPU this process may use (no more than the
    columns), from 2^16 rows on."""
    return min(len(os.sched_getaffinity(0)), columns) if rows >= 1 << 16 else 1


def _read_column(pf: pq.ParquetFile, groups, name: str, out: np.ndarray) -> None:
    """Column `name` of row groups `groups`, decoded one row group at a time into `out`."""
    at = 0
    for g in groups:
        for chunk in pf.read_row_group(g, columns=[name], use_threads=False).column(0).chunks:
            k = len(chunk)
            if out.dtype != object:
                np.copyto(out[at:at + k], _numpy(chunk), casting="unsafe")
            elif isinstance(chunk, pa.DictionaryArray) and not chunk.null_count:
                words = np.empty(len(chunk.dictionary), dtype=object)
                words[:] = chunk.dictionary.to_pylist()
                out[at:at + k] = words[_numpy(chunk.indices)]
            else:
                out[at:at + k] = chunk.to_pylist()
            at += k


def _numpy(chunk: pa.Array) -> np.ndarray:
    """A chunk's values, viewed in its buffers where it has no nulls: Arrow's `to_numpy` imports
    pandas (~70 MB and 0.2 s on the first call), which nothing else on the load path needs."""
    t = chunk.type
    if chunk.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        buf, lo, hi = chunk.buffers()[1], chunk.offset, chunk.offset + len(chunk)
        if pa.types.is_boolean(t):
            return np.unpackbits(np.frombuffer(buf, np.uint8), count=hi, bitorder="little")[lo:].view(np.bool_)
        kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
        return np.frombuffer(buf, np.dtype(f"{kind}{t.bit_width // 8}"))[lo:hi]
    return chunk.to_numpy(zero_copy_only=False)


_SPANS: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # `_group_spans` of files read lately


def _file_key(path: str) -> tuple:
    """The version of the file at `path` (a file saved again under its name is another)."""
    st = os.stat(path)
    return os.path.realpath(path), st.st_mtime_ns, st.st_size, st.st_ino


def _group_spans(md, key: tuple | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, lo, hi) of each row group: it may hold rows inside [t0, t1) iff hi > t0 and lo < t1,
    by the min/max statistics of its time columns (t0 <= time_ns < t1, or start_ns < t1 and
    end_ns > t0); a bound without them is open. Kept under `key` for the next window of the file."""
    if key is not None and key in _SPANS:
        return _SPANS[key]
    n = md.num_row_groups
    rows = np.empty(n, np.int64)
    lo = np.full(n, np.iinfo(np.int64).min, np.int64)
    hi = np.full(n, np.iinfo(np.int64).max, np.int64)
    for g in range(n):
        group = md.row_group(g)
        rows[g] = group.num_rows
        stats = {}
        for c in range(group.num_columns):
            col = group.column(c)
            if col.path_in_schema in ("start_ns", "end_ns", "time_ns") and col.statistics is not None \
                    and col.statistics.has_min_max:
                stats[col.path_in_schema] = (col.statistics.min, col.statistics.max)
        if "time_ns" in stats:
            lo[g], hi[g] = stats["time_ns"][0], min(stats["time_ns"][1], np.iinfo(np.int64).max - 1) + 1
        else:
            if "start_ns" in stats:
                lo[g] = stats["start_ns"][0]
            if "end_ns" in stats:
                hi[g] = stats["end_ns"][1]
    if key is not None:
        if len(_SPANS) >= 32:
            _SPANS.clear()
        for a in (rows, lo, hi):
            a.flags.writeable = False  # shared by every later caller
        _SPANS[key] = (rows, lo, hi)
    return rows, lo, hi


# rows per Parquet row group: the unit a windowed load (or a chunked analysis) reads or skips. A
# window reads at least one group per thread of the states and the switch spans: 2^17 rows keep
# that at 1 M rows for 4 threads (files 0.2% larger than with 2^19, times delta-encoded)
ROW_GROUP = 1 << 17
THREAD_GROUPED = ("states", "switch_spans")  # thread-sorted tables whose row groups follow threads


def save(trace: Trace, path: str | os.PathLike) -> None:
    with atomic_output(path) as fh:
        write(trace, fh)


def write(trace: Trace, fh) -> None:
    """The trace file's bytes, written to an open binary file (`save` writes them atomically)."""
    members = [*TABLES, *(m for m in OPTIONAL_TABLES if len(getattr(trace, m)))]
    _write_file(fh, trace.meta, [(m, getattr(trace, m)) for m in members])


def _write_file(fh, meta: dict, members: list) -> None:
    """The ZIP: its magic, meta.json and one Parquet member per (name, table or ThreadSpill)."""
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(MAGIC_MEMBER, str(SCHEMA_VERSION))
        meta = dict(meta)
        meta["schema_version"] = SCHEMA_VERSION
        zf.writestr("meta.json", json.dumps(meta, indent=1, sort_keys=True, default=_json_default))
        for member, table in members:
            if isinstance(table, ThreadSpill):
                _write_member(zf, member, table.cls, table.row_groups(), len(table) * _row_bytes(table.cls))
                continue
            arrow = _to_arrow(table)
            bounds = group_bounds(table.tid, ROW_GROUP) if member in THREAD_GROUPED else \
                np.arange(0, len(table) + ROW_GROUP, ROW_GROUP).clip(max=len(table))
            groups = (arrow.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:], strict=True))
            _write_member(zf, member, type(table), groups, arrow.nbytes)


def _write_member(zf: zipfile.ZipFile, member: str, cls, groups, nbytes: int) -> None:
    """One Parquet member written straight into the ZIP, a row group at a time: no copy of the
    compressed member is held (building it in a BytesIO held two). The entry is made as `writestr`
    makes it, so the file's bytes are those it wrote; `nbytes` (the rows' size in memory) only
    bounds the member's size for ZIP64, which `writestr` chose from the size it was given: a member
    that might pass 2 GiB (Parquet never doubles its input) gets ZIP64 headers."""
    info = zipfile.ZipInfo(f"{member}.parquet", date_time=time.localtime(time.time())[:6])
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o600 << 16
    info.file_size = 2 * nbytes + (1 << 26)
    with zf.open(info, "w") as out, pq.ParquetWriter(out, _to_arrow(cls.empty()).schema, **_encodings(cls)) as w:
        for group in groups:
            w.write_table(group, row_group_size=ROW_GROUP)


def _row_bytes(cls) -> int:
    """Bytes of one row of a table without text columns, in memory (a bool as one byte)."""
    return sum(np.dtype(dtype).itemsize for dtype in cls.SCHEMA.values())


def _encodings(cls) -> dict:
    """Parquet options of a table: times as deltas (DELTA_BINARY_PACKED; rows of one thread follow
    each other in time), dictionaries for text only. On a 2.9 M-row state table: 14.4 MB, written
    in 0.25 s and read in 0.12 s, where zstd over dictionaries and plain values took 18.1 MB, 0.44 s
    and 0.13 s (2^19-row groups; 26.5 MB with 2^17)."""
    times = [name for name, dtype in cls.SCHEMA.items() if name in ("start_ns", "end_ns", "time_ns")
             and dtype is not object and np.dtype(dtype).kind in "iu"]
    text = [name for name, dtype in cls.SCHEMA.items() if dtype is object]
    return {"compression": "zstd", "use_dictionary": text or False,
            "column_encoding": {name: "DELTA_BINARY_PACKED" for name in times} or None}


def group_bounds(tid: np.ndarray, size: int) -> np.ndarray:
    """Row-group boundaries of a thread-sorted table: at most `size` rows a group, and a thread
    with at least size // 8 rows in groups of its own. A group holding the end of one thread and
    the start of the next spans the whole run in time, so a windowed load (or a chunked analysis)
    would read it for every window; small threads still share groups (their rows are few)."""
    n = len(tid)
    if n == 0:
        return np.zeros(1, np.int64)
    starts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
    return run_group_bounds(np.diff(np.r_[starts, n]), size)


def run_group_bounds(lengths: np.ndarray, size: int) -> np.ndarray:
    """`group_bounds` of a table whose threads have `lengths` rows, in order: what a spilled table
    (`ThreadSpill`) knows of its threads without holding their tid column."""
    ends = np.cumsum(lengths, dtype=np.int64)
    n = int(ends[-1]) if len(ends) else 0
    big = max(size // 8, 1)
    cuts = [0]
    for lo, hi in zip((ends - lengths).tolist(), ends.tolist(), strict=True):
        own = hi - lo >= big
        if own and lo > cuts[-1]:
            cuts.append(lo)
        while hi - cuts[-1] > size:
            cuts.append(cuts[-1] + size)
        if own and hi > cuts[-1]:
            cuts.append(hi)
    if cuts[-1] < n:
        cuts.append(n)
    return np.asarray(cuts, np.int64)


class ThreadSpill(ColumnFiles):
    """The rows of a thread-grouped table (states, switch spans) that a streaming builder emits in
    time chunks, kept on disk until the trace file is written in (tid, start_ns) order.

    A chunk holds rows of any threads in any order across threads; across chunks each thread's
    rows come in start order (`add` checks it). Each chunk is sorted by (tid, start_ns), stably,
    and appended to one file per column in a temporary directory; of each chunk only the row range
    of each of its threads is kept. The member is then written a row group at a time read back
    from those files, with the row groups `group_bounds` gives the whole sorted table: memory is
    one row group plus O(chunks x threads), never the table. The directory is removed by `close`
    (a `with` block closes it, on success or error)."""

    def __init__(self, cls, directory: str | os.PathLike):
        if any(dtype is object for dtype in cls.SCHEMA.values()):
            raise TypeError(f"{cls.__name__} has text columns; a spill holds fixed-width columns only")
        self.cls = cls
        super().__init__(cls.SCHEMA, directory)
        self._runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per chunk: tids, file row, rows
        self._seen = np.zeros(0, np.int32)  # threads met so far, sorted, and the last start of each
        self._last = np.zeros(0, np.int64)

    def add(self, chunk) -> None:
        """Append a chunk of rows (a table of this spill's class). A thread's rows in it must start
        at or after its rows of earlier chunks: ValueError otherwise."""
        if type(chunk) is not self.cls:
            raise TypeError(f"a {self.cls.__name__} spill got a {type(chunk).__name__}")
        if not self._files:
            raise ValueError("the spill is closed")
        n = len(chunk)
        if n == 0:
            return
        tid, start = chunk.tid, chunk.start_ns
        same = tid[1:] == tid[:-1]
        order = None  # a chunk already in (tid, start) order is written as it is
        if np.any(tid[1:] < tid[:-1]) or np.any(same & (start[1:] < start[:-1])):
            order = np.argsort(chunk.tid, kind="stable")  # a builder's rows of one thread come in start order:
            tid, start = chunk.tid[order], chunk.start_ns[order]  # sorting by tid is enough
            same = tid[1:] == tid[:-1]
            if np.any(same & (start[1:] < start[:-1])):
                order = np.lexsort((chunk.start_ns, chunk.tid))
                start = chunk.start_ns[order]
        first = np.flatnonzero(np.r_[True, ~same])
        last = np.r_[first[1:], n] - 1
        tids = tid[first]
        pos = np.searchsorted(self._seen, tids)
        met = pos < len(self._seen)
        met[met] = self._seen[pos[met]] == tids[met]
        early = start[first[met]] < self._last[pos[met]]
        if np.any(early):
            i = int(np.flatnonzero(early)[0])
            raise ValueError(f"tid {int(tids[met][i])}: a row starting at {int(start[first[met]][i])} comes after "
                             f"one starting at {int(self._last[pos[met]][i])}, in an earlier chunk")
        self._last[pos[met]] = start[last[met]]
        self._seen = np.insert(self._seen, pos[~met], tids[~met])
        self._last = np.insert(self._last, pos[~met], start[last[~met]])
        self._runs.append((tids, self._rows + first, np.diff(np.r_[first, n])))
        self._append(lambda name: getattr(chunk, name), n, order)

    def row_groups(self):
        """The whole table in (tid, start_ns) order, one Arrow table per row group of
        `group_bounds`, each read from the column files."""
        self._flushed()
        if not self._runs:
            return
        tid, at, rows = (np.concatenate(c) for c in zip(*self._runs, strict=True))
        order = np.argsort(tid, kind="stable")  # a thread's runs in chunk order
        tid, at, rows = tid[order], at[order], rows[order]
        threads = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
        ends = np.cumsum(rows)  # of each run in the sorted table
        bounds = run_group_bounds(np.add.reduceat(rows, threads), ROW_GROUP)
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            cols = {name: np.empty(b - a, dtype) for name, dtype in self.cls.SCHEMA.items()}
            i = int(np.searchsorted(ends, a, side="right"))
            row = a
            while row < b:
                skip = row - int(ends[i] - rows[i])
                k = min(int(ends[i]), b) - row
                for name, fh in self._files.items():
                    pread_into(fh, cols[name][row - a:row - a + k], int(at[i]) + skip)
                row += k
                i += 1
            yield _to_arrow(self.cls(**cols))


class TraceWriter:
    """A trace file written from parts, for a builder that cannot hold its tables: the states and
    switch spans are added chunk by chunk (`states.add`, `switch_spans.add`: spills, see
    `ThreadSpill`), the small tables are given to `finish`. The file `load` then reads equals the
    one `save` writes for the whole Trace. Nothing appears at `path` before `finish` completes
    (atomic, as `save`); the spills' temporary directories, next to `path`, are removed when the
    `with` block ends, on success or error."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        directory = parent_dir(self.path)
        self.states = ThreadSpill(StateTable, directory)
        try:
            self.switch_spans = ThreadSpill(SwitchSpanTable, directory)
        except BaseException:
            self.states.close()
            raise

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.states.close()
        self.switch_spans.close()

    def finish(self, threads: ThreadTable, names: NameTable, meta: dict, samples: SampleTable | None = None,
               frames: FrameTable | None = None, stacks: StackTable | None = None,
               futex_calls: FutexCallTable | None = None) -> None:
        """Write the trace file (its meta completed as `Trace` completes it), then drop the spills."""
        given = {"samples": samples, "frames": frames, "stacks": stacks, "futex_calls": futex_calls}
        small = Trace(threads=threads, states=StateTable.empty(), names=names, meta=meta,
                      **{m: t for m, t in given.items() if t is not None})
        tables = {"threads": threads, "states": self.states, "names": names, "switch_spans": self.switch_spans,
                  **{m: getattr(small, m) for m in given}}
        members = [*TABLES, *(m for m in OPTIONAL_TABLES if len(tables[m]))]
        with atomic_output(self.path) as fh:
            _write_file(fh, small.meta, [(m, tables[m]) for m in members])
        self.close()


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def read_meta(path: str | os.PathLike) -> dict:
    """A trace file's meta.json alone (its time range, say, before choosing a window to load)."""
    with _opened(os.fspath(path)) as (zf, _names):
        return _meta(zf, os.fspath(path))


def load(path: str | os.PathLike, window: tuple[int, int] | None = None) -> Trace:
    """The trace in `path`. With `window` = (t0_ns, t1_ns), only the rows that may overlap it are
    read (whole Parquet row groups: the caller still cuts with `Trace.between`), so a part of a big
    trace loads in memory that follows the part."""
    path = os.fspath(path)
    with _opened(path) as (zf, names), _mapped(path) as mapped:
        meta = _meta(zf, path)
        key = _file_key(path)
        tables = {m: _read(cls, zf, m, mapped, window if m == "states" else None, key) for m, cls in TABLES.items()}
        for m, cls in OPTIONAL_TABLES.items():
            timed = window if m in ("samples", "switch_spans", "futex_calls") else None
            tables[m] = _read(cls, zf, m, mapped, timed, key) if f"{m}.parquet" in names else cls.empty()
    return Trace(threads=tables["threads"], states=tables["states"], names=tables["names"], meta=meta,
                 samples=tables["samples"], switch_spans=tables["switch_spans"], frames=tables["frames"],
                 stacks=tables["stacks"], futex_calls=tables["futex_calls"])


def load_threads(path: str | os.PathLike) -> tuple[ThreadTable, dict]:
    """A trace file's thread table and meta alone: what holds for the whole run without reading
    any state (a chunked analysis reads those window by window)."""
    path = os.fspath(path)
    with _opened(path) as (zf, _names):
        return _read(ThreadTable, zf, "threads"), _meta(zf, path)


def load_states(path: str | os.PathLike, window: tuple[int, int] | None = None) -> StateTable:
    """The state table alone, or with `window` only its row groups that may overlap it, unclipped
    (as `load` reads them): a chunk of `scalestack info` without the switch spans it does not use."""
    path = os.fspath(path)
    with _opened(path) as (zf, _names), _mapped(path) as mapped:
        _meta(zf, path)  # the schema version check
        return _read(StateTable, zf, "states", mapped, window)


@contextlib.contextmanager
def _mapped(path: str):
    """The trace file mapped read-only, for `_read`. Python's map, not Arrow's: Arrow's read_at asks
    the kernel for the whole member at once (MADV_WILLNEED), which maps all of it into the process
    (+157 MB RSS for a 3 M-row window of a 37.5 M-row state table); here only the pages of the row
    groups read are touched. Arrow's allocator is emptied after: it kept 24 MB of decoded pages."""
    with open(path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        yield mapped
    finally:
        try:
            mapped.close()
        except BufferError:  # views of it still held (an error's frames, say): it closes once they go, and
            pass  # the error that left them is the one to report, not this
        pa.default_memory_pool().release_unused()


def group_ranges(path: str | os.PathLike, member: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row group of a table with start_ns/end_ns columns (states, switch_spans): its rows, the
    earliest start and the latest end, from the Parquet statistics alone (a group without them
    spans all time). Empty arrays when the file has no such member. What a chunked analysis plans
    its windows with before reading any row."""
    path = os.fspath(path)
    with _opened(path) as (zf, names):
        if f"{member}.parquet" not in names:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        key = (*_file_key(path), member)
        if key in _SPANS:
            return _SPANS[key]
        with zf.open(f"{member}.parquet") as fh:
            return _group_spans(pq.ParquetFile(fh).metadata, key)


@contextlib.contextmanager
def _opened(path: str):
    """The trace file as an open ZipFile and its member names; its errors as one line each."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path} is a directory; give a trace file written by `scalestack record`")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        if _starts_as_trace(path):  # its first member is the trace's mark, but the ZIP's directory is gone
            raise UserError(f"{path}: damaged trace file (its end is missing: cut short while written or copied); "
                            "record or import it again") from None
        with open(path, "rb") as fh:
            parquet = fh.read(4) == b"PAR1"
        if parquet:
            raise UserError(f"{path} is a Parquet file, not a trace: an aggregate recording (`record --aggregate`) is "
                            "read by crit, bottle, report and compare; a fleet's tables by `scalestack fleet`") from None
        raise UserError(
            f"{path} is not a scalestack trace (use `scalestack import` for perf.data, perf script text or Chrome JSON)"
        ) from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror or exc}") from None
    try:
        with zf:
            names = zf.namelist()
            if MAGIC_MEMBER not in names:
                raise UserError(f"{path} is a ZIP file but not a scalestack trace")
            yield zf, names
    except (zipfile.BadZipFile, KeyError, pa.ArrowInvalid, OSError, json.JSONDecodeError) as exc:
        # a member that fails its CRC or does not decode: the file was a trace, and was damaged since
        if isinstance(exc, OSError) and exc.errno is not None:  # unreadable, not damaged
            raise UserError(f"{path}: {exc.strerror}") from None
        raise UserError(f"{path}: damaged trace file ({exc}); record or import it again") from None


def _starts_as_trace(path: str) -> bool:
    """Whether the file begins as `write` begins a trace: a ZIP local header of MAGIC_MEMBER."""
    with open(path, "rb") as fh:
        head = fh.read(30 + len(MAGIC_MEMBER))
    return head[:4] == b"PK\x03\x04" and head[30:] == MAGIC_MEMBER.encode() and \
        int.from_bytes(head[26:28], "little") == len(MAGIC_MEMBER)


def _meta(zf: zipfile.ZipFile, path: str) -> dict:
    meta = json.loads(zf.read("meta.json"))
    version = int(meta.get("schema_version", 0))
    if version > SCHEMA_VERSION:
        raise UserError(f"{path} uses trace schema {version}, newer than this scalestack's {SCHEMA_VERSION}; "
                        "upgrade scalestack")
    return meta


FULL_DISK = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def save_or_keep(trace: Trace, output: str) -> None:
    """Save the trace at `output`; where it cannot be written there (the device is full, the
    directory is gone), keep it in the first other place that takes it (the temporary directory,
    the home directory, the working directory) and say so in one line, with the space it needs
    when space was the problem. The save is atomic: `output` is never left half-written."""
    try:
        save(trace, output)
        return
    except OSError as exc:
        full, why = exc.errno in FULL_DISK, f"cannot write {output}: {exc.strerror or exc}"
    except UserError as exc:  # its directory or its temporary file could not be made ("cannot write ...")
        full, why = False, str(exc)
    buf = io.BytesIO()
    write(trace, buf)
    need = len(buf.getvalue())
    where = os.path.dirname(os.path.abspath(output))
    free = shutil.disk_usage(where).free if full else 0
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for d in (tempfile.gettempdir(), os.path.expanduser("~"), os.getcwd()):
        kept = os.path.join(d, f"scalestack-{stamp}-{os.getpid()}.trace")
        if os.path.dirname(os.path.abspath(kept)) == where:
            continue
        try:
            atomic_write(kept, buf.getvalue())
        except (OSError, UserError):
            continue
        if full:
            raise UserError(f"no space on the device of {output} (the trace needs {_mb(need)}, {_mb(free)} free "
                            f"there); the trace was kept at {kept}")
        raise UserError(f"{why}; the trace was kept at {kept}")
    if full:
        raise UserError(f"no space to save the trace anywhere: it needs {_mb(need)}, the device of {output} has "
                        f"{_mb(free)} free and the temporary, home and working directories are full too")
    raise UserError(f"{why}; nor could the temporary, home or working directory keep the trace")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"
