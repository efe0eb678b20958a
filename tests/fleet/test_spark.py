"""One function, two engines: DuckDB and Spark (local[*]) give identical answers on the same
1000 recordings. Slow (Spark starts a JVM): one SparkSession for the module."""

from __future__ import annotations

import shutil
import warnings

import pandas as pd
import pytest

from scalestack.fleet import QUERIES, Fleet, query
from scalestack.fleet.synthetic import generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java (17 or newer)")
    from scalestack.fleet.engines import spark_session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyspark warns about pandas 3
        session = spark_session("local[*]")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def fleet_1000(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fleet1000"))
    out = generate(root, 1000, seed=7, hosts=4, days=2, kind="mixed", pool=16)
    assert out["recordings"] == 1000
    return root


def test_duckdb_and_spark_give_identical_answers_on_1000_recordings(spark, fleet_1000):
    with Fleet(fleet_1000) as duck, Fleet(fleet_1000, "spark", spark=spark) as spk, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in QUERIES:
            a, b = duck.query(name), spk.query(name)
            assert len(a) > 0, name
            pd.testing.assert_frame_equal(a, b, check_exact=True, obj=name)
        own = ("SELECT host, COUNT(DISTINCT recording_id) AS recordings, CAST(SUM(crit_ns) AS BIGINT) AS crit_ns "
               "FROM threads GROUP BY host ORDER BY host")
        a, b = duck.sql(own), spk.sql(own)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert a.recordings.sum() == 1000
    # the module-level function, with an engine by name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.testing.assert_frame_equal(query(fleet_1000, "locks"), query(fleet_1000, "locks", "spark", spark=spark),
                                      check_exact=True)


def test_spark_errors_are_one_line(spark, fleet_1000):
    from scalestack.errors import UserError

    with Fleet(fleet_1000, "spark", spark=spark) as spk, pytest.raises(UserError, match="^Spark: "):
        spk.sql("SELECT no_such_column FROM threads")
