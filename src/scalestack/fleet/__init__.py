"""Many recordings, one query: a Parquet dataset of Traces and aggregate recordings, read by
DuckDB (embedded) or Apache Spark with the same SQL.

    from scalestack.fleet import Fleet, export
    export(["run1.trace", "run2.parquet"], "fleet/", host="web1")
    with Fleet("fleet/") as f:                    # DuckDB; Fleet(..., engine="spark") for Spark
        f.parallelism(); f.criticality(); f.locks(); f.worst_windows(3)
        f.sql("SELECT program, SUM(crit_ns) FROM threads GROUP BY program")

The layout and columns: `scalestack.fleet.schema` and docs/fleet.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from scalestack.errors import UserError
from scalestack.fleet.queries import QUERIES, TITLES, sql_of
from scalestack.fleet.schema import (
    TABLES,
    aggregate_tables,
    compact,
    partition_of,
    recording_id,
    scan,
    trace_tables,
    write_tables,
)

__all__ = ["Fleet", "QUERIES", "TABLES", "compact", "export", "export_recording", "query"]


def export_recording(recording: Any, root: str, *, name: str = "recording", host: str | None = None,
                     program: str | None = None, date: str | None = None, window_ns: int = 1_000_000_000) -> list[str]:
    """Write one Trace or AggregateRecording into the fleet dataset at `root`; the files written.

    host/program/date default to the recording's metadata (its binary, the day it was recorded)
    and this machine's name. The same recording exported again replaces its files."""
    from scalestack.trace import Trace
    from scalestack.trace.aggregate import AggregateRecording

    meta = dict(recording.meta)
    part = partition_of(meta, name, host, program, date)
    rid = recording_id(*part, name, meta)
    if isinstance(recording, Trace):
        tables = trace_tables(recording, rid, window_ns)
    elif isinstance(recording, AggregateRecording):
        tables = aggregate_tables(recording, rid)
    else:
        raise TypeError(f"export_recording takes a Trace or an AggregateRecording, not {type(recording).__name__}")
    return write_tables(root, part, rid, tables)


def export(paths: Iterable[str], root: str, **options: Any) -> list[str]:
    """Export recording files (traces or `record --aggregate` Parquet) into `root`."""
    from scalestack.trace.aggregate import AggregateRecording, is_aggregate
    from scalestack.trace.store import load

    written = []
    for path in paths:
        rec = AggregateRecording.load(path) if is_aggregate(path) else load(path)
        written += export_recording(rec, root, name=os.path.basename(path), **options)
    return written


class Fleet:
    """The fleet dataset at `root`, queried with DuckDB (default) or Spark.

    Files that cannot be read, or that are not fleet tables, are skipped: `skipped` holds one line
    per file, and `on_skip` (e.g. a warning printer) is called with each.

    Parameters
    ----------
    root : the dataset directory
    engine : "duckdb" or "spark"
    master : Spark master URL ("local[*]", "spark://host:7077", ...); Spark only
    spark : an existing SparkSession to use (not stopped by `close`)
    """

    def __init__(self, root: str, engine: str = "duckdb", *, master: str = "local[*]", spark=None,
                 on_skip: Callable[[str], None] | None = None, threads: int | None = None):
        from scalestack.fleet.engines import DuckDBEngine, SparkEngine

        self.root = os.fspath(root)
        self.files, self.skipped = scan(self.root)
        for line in self.skipped:
            if on_skip is not None:
                on_skip(line)
        if engine == "duckdb":
            self.engine = DuckDBEngine(self.files, threads=threads)
        elif engine == "spark":
            self.engine = SparkEngine(self.files, self.root, master=master, spark=spark)
        else:
            raise UserError(f"unknown engine {engine!r}; choose duckdb or spark")

    def query(self, name: str, worst: int = 3):
        """One of the named queries (`QUERIES`) as a pandas DataFrame."""
        return self.engine.sql(sql_of(name, worst))

    def parallelism(self):
        return self.query("parallelism")

    def criticality(self):
        return self.query("criticality")

    def locks(self):
        return self.query("locks")

    def worst_windows(self, worst: int = 3):
        return self.query("windows", worst)

    def sql(self, text: str):
        """Your own query over the views recordings, threads and waits."""
        return self.engine.sql(text)

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def query(root: str, name: str, engine: str = "duckdb", **options: Any):
    """One named query over the dataset at `root` (see `Fleet`)."""
    worst = options.pop("worst", 3)
    with Fleet(root, engine, **options) as f:
        return f.query(name, worst)


_ = TITLES  # re-exported for the command
