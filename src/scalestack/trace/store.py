"""Save and load a Trace: one file, a ZIP of Parquet tables plus `meta.json`.

One file because users mail traces and attach them to issues; Parquet inside because it is
columnar, compressed and readable from any notebook (`pyarrow.parquet.read_table` on the
member). The schema version is checked on load. Writes go to a temporary file that is renamed
into place, so an interrupted save never leaves a half-written trace.
"""

from __future__ import annotations

import datetime
import errno
import io
import json
import os
import shutil
import tempfile
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scalestack.errors import UserError
from scalestack.fileio import atomic_output, atomic_write
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


def _from_arrow(cls, table: pa.Table):
    cols = {}
    for name, dtype in cls.SCHEMA.items():
        if name not in table.column_names:
            if name in cls.DEFAULTS:  # a column added later: older files lack it
                cols[name] = np.full(table.num_rows, cls.DEFAULTS[name], dtype=dtype)
                continue
            raise UserError(f"trace file is missing column {name!r}; was it written by a newer scalestack?")
        col = table.column(name)
        cols[name] = col.to_pylist() if dtype is object else np.asarray(col.to_numpy(), dtype=dtype)
    return cls(**cols)


def _read(zf: zipfile.ZipFile, member: str) -> pa.Table:
    # Arrow's thread pool can abort the interpreter at exit (pyarrow 26: "terminate called
    # without an active exception" in about 1 run in 5); these tables are small, read them
    # on this thread.
    return pq.read_table(io.BytesIO(zf.read(f"{member}.parquet")), use_threads=False)


def save(trace: Trace, path: str | os.PathLike) -> None:
    with atomic_output(path) as fh:
        write(trace, fh)


def write(trace: Trace, fh) -> None:
    """The trace file's bytes, written to an open binary file (`save` writes them atomically)."""
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(MAGIC_MEMBER, str(SCHEMA_VERSION))
        meta = dict(trace.meta)
        meta["schema_version"] = SCHEMA_VERSION
        zf.writestr("meta.json", json.dumps(meta, indent=1, sort_keys=True, default=_json_default))
        for member in [*TABLES, *(m for m in OPTIONAL_TABLES if len(getattr(trace, m)))]:
            buf = io.BytesIO()
            pq.write_table(_to_arrow(getattr(trace, member)), buf, compression="zstd")
            zf.writestr(f"{member}.parquet", buf.getvalue())


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def load(path: str | os.PathLike) -> Trace:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path} is a directory; give a trace file written by `scalestack record`")
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            if MAGIC_MEMBER not in names:
                raise UserError(f"{path} is a ZIP file but not a scalestack trace")
            meta = json.loads(zf.read("meta.json"))
            version = int(meta.get("schema_version", 0))
            if version > SCHEMA_VERSION:
                raise UserError(
                    f"{path} uses trace schema {version}, newer than this scalestack's {SCHEMA_VERSION}; upgrade scalestack"
                )
            tables = {m: _from_arrow(cls, _read(zf, m)) for m, cls in TABLES.items()}
            for m, cls in OPTIONAL_TABLES.items():
                tables[m] = _from_arrow(cls, _read(zf, m)) if f"{m}.parquet" in names else cls.empty()
    except zipfile.BadZipFile:
        raise UserError(
            f"{path} is not a scalestack trace (use `scalestack import` for perf.data, perf script text or Chrome JSON)"
        ) from None
    except (KeyError, pa.ArrowInvalid, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: damaged trace file ({exc})") from None
    return Trace(threads=tables["threads"], states=tables["states"], names=tables["names"], meta=meta,
                 samples=tables["samples"], switch_spans=tables["switch_spans"], frames=tables["frames"],
                 stacks=tables["stacks"], futex_calls=tables["futex_calls"])


FULL_DISK = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def save_or_keep(trace: Trace, output: str) -> None:
    """Save the trace at `output`; where that device is full, keep it in the first other place
    with room (the temporary directory, the home directory, the working directory) and say so in
    one line, with the space it needs. The save is atomic: `output` is never left half-written."""
    try:
        save(trace, output)
        return
    except OSError as exc:
        if exc.errno not in FULL_DISK:
            raise UserError(f"cannot write {output}: {exc.strerror}") from None
    buf = io.BytesIO()
    write(trace, buf)
    need = len(buf.getvalue())
    where = os.path.dirname(os.path.abspath(output))
    free = shutil.disk_usage(where).free
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for d in (tempfile.gettempdir(), os.path.expanduser("~"), os.getcwd()):
        kept = os.path.join(d, f"scalestack-{stamp}-{os.getpid()}.trace")
        if os.path.dirname(os.path.abspath(kept)) == where:
            continue
        try:
            atomic_write(kept, buf.getvalue())
        except OSError:
            continue
        raise UserError(f"no space on the device of {output} (the trace needs {_mb(need)}, {_mb(free)} free there); "
                        f"the trace was kept at {kept}")
    raise UserError(f"no space to save the trace anywhere: it needs {_mb(need)}, the device of {output} has {_mb(free)} "
                    "free and the temporary, home and working directories are full too")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"
