"""The fleet dataset: export, the DuckDB answers against the analyses, bad files, the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.bottle import bottle
from scalestack.analysis.compare import name_pattern
from scalestack.fleet import Fleet, compact, export, export_recording
from scalestack.fleet.schema import _trace_windows, scan
from scalestack.fleet.synthetic import generate, simulated_recording
from scalestack.results import jsonable
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import lock_critical, random_workload
from scalestack.trace import State
from scalestack.trace.aggregate import AggregateRecording

from ..conftest import requires_recording


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def sim_fleet(tmp_path_factory):
    """Two hosts x two programs of simulated traces, exported with 1 ms windows."""
    root = str(tmp_path_factory.mktemp("fleet"))
    traces = {}
    for host in ("h1", "h2"):
        for seed, wl in enumerate((lock_critical, random_workload)):
            t = simulate(wl(4, seed=seed + (host == "h2")), cores=2).trace.with_meta(command=[wl.__name__])
            traces[(host, wl.__name__)] = t
            export_recording(t, root, name=f"{wl.__name__}.trace", host=host, date="2026-11-20", window_ns=1_000_000)
    return root, traces


def test_parallelism_and_criticality_answers_equal_the_trace_analyses(sim_fleet):
    root, traces = sim_fleet
    with Fleet(root) as f:
        par = f.parallelism()
        crit = f.criticality()
        locks = f.locks()
        per_lock = f.sql("SELECT program, host, lock, CAST(SUM(wait_ns) AS BIGINT) AS wait_ns FROM waits "
                         "GROUP BY program, host, lock")
        worst = f.worst_windows(2)
    assert len(par) == 4 and list(par.columns[:2]) == ["program", "host"]
    for (host, prog), t in traces.items():
        row = par[(par.program == prog) & (par.host == host)].iloc[0]
        run = t.time_in_states()[:, State.RUNNING].sum()
        assert row.running_ns == run  # integer ns: exact
        busy = float(sum(b.height_ns for w in bottle(t, window=1_000_000).windows for b in w.boxes))
        assert row.busy_ns == pytest.approx(busy, abs=len(t.threads) * 100)  # rounded per thread and window
        assert row.parallelism == pytest.approx(run / busy, rel=1e-6)
        # per pool: the bottle graph's boxes grouped by name pattern
        mine = crit[(crit.program == prog) & (crit.host == host)]
        assert mine.share.sum() == pytest.approx(1.0)
        pools = {}
        for name, c in zip(t.threads.name, scalestack.criticality(t).criticality_ns, strict=True):
            pools[name_pattern(name)] = pools.get(name_pattern(name), 0.0) + c
        for pool, c in pools.items():
            got = mine[mine.pool == pool].crit_ns.sum()
            assert got == pytest.approx(c, rel=0.02, abs=2e4), pool
        # wait per lock: the trace's SYNC_WAIT time on that futex
        s = t.states
        sync = s.state == State.SYNC_WAIT
        lk = per_lock[(per_lock.program == prog) & (per_lock.host == host)]
        for addr in np.unique(s.addr[sync]):
            want = int(s.duration_ns[sync & (s.addr == addr)].sum())
            assert lk[lk.lock == f"{int(addr):#x}"].wait_ns.sum() == want
        # the locks query adds them up per page offset and waiting pool
        mine = locks[(locks.program == prog) & (locks.host == host)]
        assert mine.wait_ns.sum() + mine.idle_wait_ns.sum() == int(s.duration_ns[sync].sum())
    assert (worst.groupby(["program", "host"]).size() <= 2).all()
    assert (worst.parallelism.diff().fillna(0)[worst.program.eq(worst.program.shift())
                                                 & worst.host.eq(worst.host.shift())] >= 0).all()


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(200_000, 5_000_000))
def test_windows_add_up_to_the_whole_run(seed, window_ns):
    """Per thread, the windows' state times add up to its time in each state, and their
    criticalities to its whole-run criticality (split at window edges, nothing lost)."""
    t = simulate(random_workload(4, seed=seed), cores=2).trace
    edges, sums = _trace_windows(t, window_ns)
    assert edges[0] == t.start_ns and edges[-1] == t.end_ns
    times = t.time_in_states()
    for col, s in (("running_ns", State.RUNNING), ("runnable_ns", State.RUNNABLE), ("sync_wait_ns", State.SYNC_WAIT)):
        np.testing.assert_allclose(sums[col].sum(axis=0), times[:, s])
    np.testing.assert_allclose(sums["crit_ns"].sum(axis=0), scalestack.criticality(t).criticality_ns, rtol=1e-9, atol=1.0)


def test_idle_threads_waits_are_kept_apart(tmp_path):
    """A thread parked on a condition variable for the whole run and a JIT thread waiting on its
    queue: their waits rows say idle, and the locks answer counts them as idle_wait_ns, not as
    the time the working threads waited on their lock. A file of the older schema (no idle
    column) is skipped with one line saying to add its recordings again."""
    from scalestack.trace import make_trace

    n = 1_000_000
    th = {"tid": [1, 2, 3, 4], "name": ["w-1", "w-2", "parked", "C2 CompilerThre"], "start_ns": [0] * 4,
          "end_ns": [n] * 4}
    st_ = {"tid": [1, 1, 2, 2, 3, 4, 4], "start_ns": [0, n // 2, 0, n // 4, 0, 0, n // 10],
           "end_ns": [n // 2, n, n // 4, n, n, n // 10, n],
           "state": [State.RUNNING, State.SYNC_WAIT, State.SYNC_WAIT, State.RUNNING, State.SYNC_WAIT, State.RUNNING,
                     State.SYNC_WAIT], "addr": [0, 0x1000, 0x1000, 0, 0x2000, 0, 0x3000]}
    t = make_trace(th, st_).with_meta(command=["pool"])
    root = str(tmp_path / "fleet")
    export_recording(t, root, name="pool.trace", host="h", date="2026-12-02")
    with Fleet(root) as f:
        waits = f.sql("SELECT tid, lock, idle FROM waits ORDER BY tid")
        locks = f.locks()
    assert waits.values.tolist() == [[1, "0x1000", False], [2, "0x1000", False], [3, "0x2000", True],
                                     [4, "0x3000", True]]
    by_site = {r.lock_site: (r.wait_ns, r.idle_wait_ns) for r in locks.itertuples() if r.pool == "w-*"}
    assert by_site == {"0x000": (n // 2 + n // 4, 0)}
    assert locks.iloc[0].lock_site == "0x000"  # the lock the workers wait on first, not the longer idle waits
    assert locks.idle_wait_ns.sum() == n + (n - n // 10)
    old = tmp_path / "old"
    path = old / "waits" / "host=h" / "program=p" / "date=2026-12-02" / "x.parquet"
    path.parent.mkdir(parents=True)
    table = pq.read_table(scan(root)[0]["waits"][0]).drop_columns(["idle"])
    pq.write_table(table.replace_schema_metadata({b"scalestack-fleet": json.dumps({"table": "waits", "version": 1})}),
                   path)
    _, problems = scan(str(old))
    assert len(problems) == 1 and "older than this scalestack's 2" in problems[0] and "again" in problems[0]


def test_an_aggregate_recording_keeps_its_windows(tmp_path):
    rec = simulated_recording("pipeline", 4, 1, 2)
    path = tmp_path / "agg.parquet"
    rec.save(str(path))
    export([str(path)], str(tmp_path / "fleet"), host="h", date="2026-01-02")
    back = AggregateRecording.load(str(path))
    with Fleet(str(tmp_path / "fleet")) as f:
        rows = f.sql("SELECT tid, SUM(crit_ns) AS c, SUM(running_ns) AS r, COUNT(DISTINCT window_index) AS w "
                     "FROM threads GROUP BY tid ORDER BY tid")
        kind = f.sql("SELECT kind, program, host, date, windows FROM recordings")
    tids, _, _ = back.threads()
    sums = back.per_thread()
    np.testing.assert_array_equal(rows.tid, tids)
    np.testing.assert_allclose(rows.c, sums["crit_ns"], atol=len(back.windows()[0]))
    np.testing.assert_allclose(rows.r, sums["running_ns"], atol=len(back.windows()[0]))
    assert kind.iloc[0].to_dict() == {"kind": "aggregate", "program": "pipeline", "host": "h", "date": "2026-01-02",
                                      "windows": len(back.windows()[0])}


def test_damaged_and_foreign_files_are_skipped_with_one_line_each(sim_fleet, tmp_path):
    root, _ = sim_fleet
    import shutil

    bad = str(tmp_path / "fleet")
    shutil.copytree(root, bad)
    with Fleet(bad) as f:
        want = f.criticality()
    d = os.path.join(bad, "threads", "host=h1", "program=lock_critical", "date=2026-11-20")
    good = os.path.join(d, sorted(os.listdir(d))[0])
    with open(os.path.join(d, "garbage.parquet"), "wb") as fh:
        fh.write(b"not parquet at all\n")
    with open(good, "rb") as fh:
        data = fh.read()
    with open(os.path.join(d, "truncated.parquet"), "wb") as fh:
        fh.write(data[: len(data) // 2])
    pq.write_table(pa.table({"x": [1, 2]}), os.path.join(d, "foreign.parquet"))
    proc = _cli("fleet", bad, "--query", "criticality", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3, proc.stderr
    for name in ("garbage.parquet", "truncated.parquet", "foreign.parquet"):
        assert sum(name in line for line in lines) == 1
    assert all(line.startswith("scalestack: warning: ") and "skipped" in line for line in lines)
    got = json.loads(proc.stdout)["criticality"]
    assert got == json.loads(json.dumps(jsonable(want.to_dict(orient="records"))))  # the others still read
    files, problems = scan(bad)
    assert len(problems) == 3 and good in files["threads"]


def test_fleet_command_adds_answers_and_runs_sql(tmp_path):
    a = tmp_path / "a.trace"
    scalestack.save(simulate(lock_critical(4), cores=2).trace.with_meta(command=["/usr/bin/app"]), str(a))
    root = str(tmp_path / "f")
    proc = _cli("fleet", root, str(a), "--host", "web1", "--date", "2026-11-25", "--window", "1ms")
    assert proc.returncode == 0, proc.stderr
    assert "added 1 recordings" in proc.stderr and "Parallelism per program and host" in proc.stdout
    assert os.path.isdir(os.path.join(root, "threads", "host=web1", "program=app", "date=2026-11-25"))
    proc = _cli("fleet", root, "--sql", "SELECT program, host, COUNT(*) AS n FROM recordings GROUP BY ALL", "--json")
    assert json.loads(proc.stdout) == {"sql": [{"program": "app", "host": "web1", "n": 1}]}
    proc = _cli("fleet", root, "--sql", "SELEC nothing")
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "DuckDB" in proc.stderr
    proc = _cli("fleet", str(tmp_path / "missing"))
    assert proc.returncode != 0 and "no such directory" in proc.stderr
    proc = _cli("fleet", root, str(a), "--date", "yesterday")
    assert proc.returncode != 0 and "--date" in proc.stderr


def test_generator_writes_n_recordings_in_partitions(tmp_path):
    out = generate(str(tmp_path), 60, seed=3, hosts=3, days=2, kind="mixed", pool=6)
    assert out["recordings"] == 60 and out["waits_rows"] > 0
    with Fleet(str(tmp_path)) as f:
        n = f.sql("SELECT COUNT(DISTINCT recording_id) AS n, COUNT(DISTINCT host) AS h, "
                  "COUNT(DISTINCT date) AS d FROM threads").iloc[0]
        kinds = f.sql("SELECT kind, COUNT(*) AS n FROM recordings GROUP BY kind ORDER BY kind")
    assert (n.n, n.h, n.d) == (60, 3, 2)
    assert dict(zip(kinds.kind, kinds.n, strict=True)) == {"aggregate": 45, "trace": 15}


@requires_recording
def test_a_real_recording_s_lock_in_the_fleet(c_programs, tmp_path):
    """mutex_counter recorded for real: the fleet's wait time on its lock is the trace's."""
    trace = scalestack.record([str(c_programs["mutex_counter"]), "3", "20000"], str(tmp_path / "m.trace"))
    root = str(tmp_path / "f")
    export([str(tmp_path / "m.trace")], root, host="here")
    s = trace.states
    sync = s.state == State.SYNC_WAIT
    addrs, inv = np.unique(s.addr[sync], return_inverse=True)
    per = np.bincount(inv, weights=s.duration_ns[sync], minlength=len(addrs))
    lock = int(addrs[int(np.argmax(np.where(np.bincount(inv) >= 3, per, 0)))])
    with Fleet(root) as f:
        got = f.sql(f"SELECT SUM(wait_ns) AS w FROM waits WHERE lock = '{lock:#x}'").iloc[0].w
        prog = f.parallelism()
    assert got == int(s.duration_ns[sync & (s.addr == lock)].sum())
    # the trace's own parallelism (whether the threads overlapped at all depends on the machine)
    run = trace.time_in_states()[:, State.RUNNING].sum()
    busy = float(sum(b.height_ns for w in bottle(trace, window=1_000_000_000).windows for b in w.boxes))
    assert prog.program.tolist() == ["mutex_counter"] and prog.running_ns.iloc[0] == run
    assert prog.parallelism.iloc[0] == pytest.approx(run / busy, rel=1e-4) and prog.parallelism.iloc[0] >= 1 - 1e-6


def test_fleet_query_benchmark_runs_and_prints_its_times():
    from ..conftest import ROOT

    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speed" / "fleet_query.py"), "--sizes", "100", "--no-spark"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "100 recordings:" in proc.stdout and "duckdb:" in proc.stdout


def test_compact_merges_a_partition_and_keeps_the_newest_copy(tmp_path):
    root = str(tmp_path / "f")
    traces = [simulate(random_workload(4, seed=s), cores=2).trace.with_meta(command=["app"], start_ns=0)
              for s in range(4)]
    for k, t in enumerate(traces):
        export_recording(t, root, name=f"r{k}.trace", host="h", date="2026-11-25", window_ns=1_000_000)
    with Fleet(root) as f:
        want = f.criticality()
    assert compact(root) == (4 * 3, 3)  # three tables, four files each
    assert all(len(v) == 1 for v in scan(root)[0].values())
    export_recording(traces[0], root, name="r0.trace", host="h", date="2026-11-25", window_ns=1_000_000)
    assert compact(root) == (2 * 3, 3)
    with Fleet(root) as f:
        pd_got = f.criticality()
        n = f.sql("SELECT COUNT(*) AS n FROM recordings").n.iloc[0]
    assert n == 4  # the recording exported again is not counted twice
    assert pd_got.equals(want)
