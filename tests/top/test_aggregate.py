"""Aggregate counters: the snapshot arithmetic, windows, the file, and the online F identity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.bottle import bottle, group_threads
from scalestack.analysis.criticality import criticality, timeline
from scalestack.collect.aggregator import FX_SHIFT, parse_snapshot
from scalestack.trace.aggregate import AggregateRecording, window_rows

FX = 1 << FX_SHIFT


def _line(tid, tgid, state, since, f_in_ns, crit_ns, ns, comm="worker"):
    ns8 = [0] * 8
    for k, v in ns.items():
        ns8[k] = v
    return (f"T {tid} {tgid} {state} {since} {int(f_in_ns * FX)} {int(crit_ns * FX)} " + " ".join(map(str, ns8))
            + f" 0 3 {comm}")


def _snap(now, F_ns, r, last, busy, threads):
    return parse_snapshot([f"G {now} {int(F_ns * FX)} {r} {last} {busy} 0 0 10 0 0", *threads])


def test_snapshot_closes_open_states_at_its_time():
    # F(8000) = 5000 with r = 2 since then: F(10000) = 5000 + 2000 / 2 = 6000
    s = _snap(10_000, 5000, 2, 8000, 3000, [
        _line(11, 10, 1, 6000, 4000, 100, {1: 500}, "my worker"),  # running since 6000
        _line(12, 10, 3, 9000, 0, 0, {3: 200}),  # sync wait since 9000
    ])
    assert s.crit_ns.tolist() == [100 + 6000 - 4000, 0]
    assert s.times_ns["running"].tolist() == [500 + 4000, 0]
    assert s.times_ns["sync_wait"].tolist() == [0, 200 + 1000]
    assert s.busy_ns == 3000 + 2000
    assert s.name.tolist() == ["my worker", "worker"]
    assert s.running_now == 2


def test_window_is_the_difference_of_two_snapshots():
    a = _snap(1000, 100, 0, 1000, 400, [_line(11, 10, 3, 900, 0, 300, {1: 300, 3: 50})])
    b = _snap(2000, 400, 0, 2000, 900, [_line(11, 10, 5, 1900, 0, 600, {1: 700, 3: 160, 5: 0}),
                                        _line(12, 10, 5, 1500, 0, 20, {1: 20})])
    w = window_rows(a, b, 1)
    assert w["tid"].tolist() == [11, 12]
    assert w["crit_ns"].tolist() == [300, 20]
    assert w["running_ns"].tolist() == [400, 20]
    assert w["sync_wait_ns"].tolist() == [10, 0]
    assert w["sleep_ns"].tolist() == [100, 500]
    assert w["busy_ns"].tolist() == [500, 500]
    assert w["start_ns"].tolist() == [1000, 1000] and w["end_ns"].tolist() == [2000, 2000]


def _recording(rng, n_threads, n_windows, window_ns=1_000_000):
    rows = {c: [] for c in ("window", "start_ns", "end_ns", "busy_ns", "tid", "pid", "name", "crit_ns", "running_ns",
                            "runnable_ns", "sync_wait_ns", "io_wait_ns", "sleep_ns")}
    for k in range(n_windows):
        run = rng.uniform(0, window_ns, n_threads)
        par = rng.uniform(1, n_threads, n_threads)
        for j in range(n_threads):
            for c, v in (("window", k), ("start_ns", k * window_ns), ("end_ns", (k + 1) * window_ns),
                         ("busy_ns", window_ns * 0.9), ("tid", 100 + j), ("pid", 100),
                         ("name", "main" if j == 0 else f"pool-{j % 2}"), ("crit_ns", run[j] / par[j]),
                         ("running_ns", run[j]), ("runnable_ns", 1.0), ("sync_wait_ns", 2.0), ("io_wait_ns", 0.0),
                         ("sleep_ns", 3.0)):
                rows[c].append(v)
    cols = {c: np.array(v, dtype=object if c == "name" else None) for c, v in rows.items()}
    return AggregateRecording(cols, {"window_ns": window_ns, "root_pid": 100, "command": ["x"]})


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 9), st.integers(1, 4), st.integers(0, 2**31))
def test_windows_and_groups_add_up_to_the_whole(n_threads, n_windows, k, seed):
    rec = _recording(np.random.default_rng(seed), n_threads, n_windows)
    total = bottle(rec)
    merged = bottle(rec, window=k * rec.window_ns)
    assert len(merged.windows) == -(-n_windows // k)
    assert sum(w.height_ns for w in merged.windows) == pytest.approx(total.height_ns)
    by_pool = bottle(rec, group_by="pool-=pool")
    assert by_pool.height_ns == pytest.approx(total.height_ns)
    assert sum(b.area_ns for b in by_pool.boxes) == pytest.approx(sum(b.area_ns for b in total.boxes))
    crit = criticality(rec)
    assert crit.criticality_ns.sum() == pytest.approx(total.height_ns)
    assert crit.idle_ns == pytest.approx(n_windows * rec.window_ns * 0.1)


def test_file_round_trip_and_roles(tmp_path):
    rec = _recording(np.random.default_rng(1), 3, 4)
    path = tmp_path / "run.agg.parquet"
    rec.save(str(path))
    back = AggregateRecording.load(str(path))
    for c in ("tid", "crit_ns", "running_ns", "window"):
        np.testing.assert_allclose(back.columns[c].astype(float), rec.columns[c].astype(float))
    tids, names, roles = back.threads()
    assert tids.tolist() == [100, 101, 102]
    assert roles.tolist() == ["main", "app", "app"]
    idx, labels, _ = group_threads(tids, names, roles, "role")
    assert labels == ["app", "main"] and idx.tolist() == [1, 0, 0]
    assert path.stat().st_size < 20_000


def test_a_foreign_parquet_file_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scalestack.errors import UserError

    pq.write_table(pa.table({"x": [1]}), tmp_path / "x.parquet")
    with pytest.raises(UserError, match="not a scalestack aggregate"):
        AggregateRecording.load(str(tmp_path / "x.parquet"))


def _online(intervals):
    """The kernel program's algorithm, event by event: r and F per tree, F(out) - F(in) per thread."""
    events = sorted([(a, 1, j) for j, (a, b) in enumerate(intervals)] + [(b, 0, j) for j, (a, b) in enumerate(intervals)])
    r, F, last = 0, 0, None
    f_in, crit = {}, np.zeros(len(intervals))
    for t, is_in, j in events:
        if last is not None and r > 0:
            F += ((t - last) << FX_SHIFT) // r  # fixed point, integer division as in BPF
        last = t
        if is_in:
            f_in[j] = F
            r += 1
        else:
            crit[j] += F - f_in[j]
            r -= 1
    return crit / FX


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 10**6)), min_size=1, max_size=30))
def test_online_identity_matches_the_offline_sweep(spans):
    intervals = [(a, a + d) for a, d in spans]
    a = np.array([x for x, _ in intervals], dtype=np.int64)
    b = np.array([y for _, y in intervals], dtype=np.int64)
    tl, where = timeline(a, b, int(a.min()), int(b.max()))
    m = len(a)
    offline = tl.F[where[1:2 * m:2]] - tl.F[where[0:2 * m:2]]
    online = _online(intervals)
    # fixed point: each F step truncates by under 1/65536 ns, and a thread sees at most 2m steps
    np.testing.assert_allclose(online, offline, atol=2 * m / FX + 1e-9)
    assert online.sum() == pytest.approx(offline.sum(), abs=2 * m * m / FX + 1e-9)
    assert online.sum() <= offline.sum() + 1e-9  # truncation only ever loses


def test_crit_bottle_and_report_read_an_aggregate_file(tmp_path):
    import json

    from click.testing import CliRunner

    from scalestack.cli import cli

    rec = _recording(np.random.default_rng(3), 3, 6)
    path = str(tmp_path / "r.agg.parquet")
    rec.save(path)
    runner = CliRunner()
    res = runner.invoke(cli, ["crit", path, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert sum(t["criticality_ns"] for t in data["threads"]) == pytest.approx(bottle(rec).height_ns)
    res = runner.invoke(cli, ["bottle", path, "--window", "2ms", "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.output)["windows"]) == 3
    res = runner.invoke(cli, ["report", path, "-o", str(tmp_path / "rep"), "--window", "2ms", "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "rep" / "bottle-windows.svg").exists()
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert set(report["sections"]) == {"threads", "criticality", "bottle"}
