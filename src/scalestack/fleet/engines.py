"""Two SQL engines over one fleet dataset: DuckDB (embedded, one machine) and Apache Spark.

Both register the same three views (`recordings`, `threads`, `waits`, each with the partition
columns host, program, date as strings) over the files `schema.scan` accepted, run the same
SQL text and hand back a pandas DataFrame with the same dtypes (`normalize`), so a query gives
identical answers on either.
"""

from __future__ import annotations

import os

import pyarrow as pa

from scalestack.errors import UserError
from scalestack.fleet.schema import PARTITIONS, TABLES


def full_schema(name: str) -> pa.Schema:
    """A table's columns as a query sees them: the file's, then the partition columns."""
    schema = TABLES[name]
    for p in PARTITIONS:
        schema = schema.append(pa.field(p, pa.string()))
    return schema


def normalize(df):
    """Same dtypes from both engines: int64, float64 and Python str (None for NULL)."""
    import numpy as np
    import pandas as pd

    out = {}
    for col in df.columns:
        s = df[col]
        if pd.api.types.is_bool_dtype(s):
            out[col] = s.astype(bool)
        elif pd.api.types.is_integer_dtype(s) and not s.isna().any():
            out[col] = s.astype(np.int64)
        elif pd.api.types.is_numeric_dtype(s):
            out[col] = s.astype(np.float64)
        else:
            vals = [None if (v is None or (isinstance(v, float) and np.isnan(v))) else
                    (v if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)) for v in s.tolist()]
            if vals and all(isinstance(v, (int, float)) or v is None for v in vals) and any(v is not None for v in vals):
                out[col] = pd.Series(vals, dtype=np.float64)  # a numeric column that came back as objects
            else:
                out[col] = pd.Series(vals, dtype=object)
    return pd.DataFrame(out, columns=list(df.columns))


class DuckDBEngine:
    """Embedded DuckDB: nothing to start; reads the Parquet files in place."""

    name = "duckdb"

    def __init__(self, files: dict[str, list[str]], threads: int | None = None):
        try:
            import duckdb
        except ImportError:  # pragma: no cover - a dependency of scalestack
            raise UserError("the fleet queries need DuckDB: pip install duckdb") from None
        self.con = duckdb.connect()
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        for name in TABLES:
            paths = files.get(name, [])
            if paths:
                lit = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
                self.con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({lit}, hive_partitioning = true, "
                                 "hive_types_autocast = false)")
            else:
                self.con.register(name, full_schema(name).empty_table())

    def sql(self, text: str):
        import duckdb

        try:
            return normalize(self.con.execute(text).df())
        except duckdb.Error as exc:
            raise UserError(f"DuckDB: {str(exc).splitlines()[0]}") from None

    def close(self) -> None:
        self.con.close()


def spark_session(master: str = "local[*]", app: str = "scalestack-fleet"):
    """A SparkSession for fleet queries (partition values read as strings, no UI)."""
    import warnings

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UserError("--engine spark needs pyspark (and Java 17+): pip install 'scalestack[spark]'") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark 4 warns about pandas 3; toPandas works
        return _builder(SparkSession, master, app)


def _builder(SparkSession, master: str, app: str):  # noqa: N803 - the class, passed in after its import
    return (SparkSession.builder.master(master).appName(app)
            .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            # the files are listed by `scan`: no listing job, and no job to infer the schema
            .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
            .config("spark.sql.files.openCostInBytes", str(64 * 1024))
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate())


def _quiet(spark) -> None:
    spark.sparkContext.setLogLevel("ERROR")


_SPARK_TYPES = {pa.int64(): "bigint", pa.string(): "string", pa.bool_(): "boolean"}


class SparkEngine:
    """Apache Spark: `local[*]` on one machine, or a cluster by its master URL (every executor
    must see the fleet directory at the same path: a shared file system, or object storage)."""

    name = "spark"

    def __init__(self, files: dict[str, list[str]], root: str, *, master: str = "local[*]", spark=None):
        self.own = spark is None
        self.spark = spark if spark is not None else spark_session(master)
        _quiet(self.spark)
        for name in TABLES:
            paths = files.get(name, [])
            ddl = ", ".join(f"`{f.name}` {_SPARK_TYPES[f.type]}" for f in full_schema(name))
            if paths:
                df = self.spark.read.schema(ddl).option("basePath", os.path.join(root, name)).parquet(*paths)
            else:
                df = self.spark.createDataFrame([], ddl)
            df.createOrReplaceTempView(name)

    def sql(self, text: str):
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # pyspark 4 about pandas 3
                pdf = self.spark.sql(text).toPandas()
        except Exception as exc:  # noqa: BLE001 - Spark's analysis and parse errors are the user's query
            if type(exc).__name__ in ("AnalysisException", "ParseException", "SparkException",
                                      "IllegalArgumentException", "ArithmeticException", "PySparkException"):
                raise UserError(f"Spark: {str(exc).strip().splitlines()[0]}") from None
            raise
        return normalize(pdf)

    def close(self) -> None:
        if self.own:
            self.spark.stop()
