"""Fleet query time: the four built-in questions over 10^2, 10^3 and 10^4 synthetic aggregate
recordings, on DuckDB (embedded) and Spark (local[*]).

Each size is generated once (`scalestack.fleet.synthetic.generate`: simulated runs, 20 hosts,
7 programs, 7 days; the recordings of one partition in one file per table). The time of an engine
is: listing and checking the files (`scan`), registering the views, and running parallelism,
criticality, locks and the worst windows; Spark's session start is printed apart (paid once).
--quick: DuckDB on all three sizes, Spark on 10^2 only. Target: 10^4 on DuckDB under 5 s.
--one-per-file: each recording in its own files first (timed), then compacted (`fleet --compact`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings

from scalestack.fleet import QUERIES, Fleet, compact
from scalestack.fleet.synthetic import generate


def timed(root: str, engine: str, spark=None) -> tuple[float, float, dict[str, float]]:
    t0 = time.perf_counter()
    with Fleet(root, engine, spark=spark) as f:
        t_open = time.perf_counter() - t0
        per = {}
        for name in QUERIES:
            t = time.perf_counter()
            f.query(name)
            per[name] = time.perf_counter() - t
    return time.perf_counter() - t0, t_open, per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Spark on 10^2 recordings only")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--one-per-file", action="store_true",
                    help="one file per recording (as adding each by itself writes them), then again after --compact")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    spark = None
    if not a.no_spark:
        try:
            import pyspark  # noqa: F401

            from scalestack.fleet.engines import spark_session

            if shutil.which("java") is None:
                raise ImportError("no java")
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                spark = spark_session("local[*]")
            print(f"spark local[*]: session started in {time.perf_counter() - t:.1f} s (once, not counted below)")
        except ImportError as exc:
            print(f"spark: skipped ({exc})")
    print(f"machine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    warnings.simplefilter("ignore")
    for n in sizes:
        root = tempfile.mkdtemp(prefix=f"fleet{n}-")
        try:
            t = time.perf_counter()
            out = generate(root, n, seed=1, per_file=1 if a.one_per_file else None)
            print(f"{n:>6} recordings: {out['threads_rows']:,} thread-window rows in {out['files']} files "
                  f"(generated in {time.perf_counter() - t:.1f} s)")
            if a.one_per_file:
                total, t_open, _ = timed(root, "duckdb")
                print(f"        duckdb, one file per recording: {total:6.2f} s (files checked {t_open:.2f} s)")
                t = time.perf_counter()
                before, after = compact(root)
                print(f"        compacted {before} files into {after} in {time.perf_counter() - t:.1f} s")
            total, t_open, per = timed(root, "duckdb")
            print(f"        duckdb: {total:6.2f} s (files checked and views made {t_open:.2f} s; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in per.items()) + ")"
                  + (" [target < 5 s: met]" if n == 10_000 and total < 5 else
                     " [target < 5 s: MISSED]" if n == 10_000 else ""))
            if spark is not None and (not a.quick or n == min(sizes)):
                total, t_open, per = timed(root, "spark", spark)
                print(f"  spark local: {total:6.2f} s (files checked and views made {t_open:.2f} s; "
                      + ", ".join(f"{k} {v:.2f}" for k, v in per.items()) + ")")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
