"""Formulas and invariants of phase detection (spec parallel-phases.md §1.2-1.7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.phases import (
    bic_score,
    choose_k,
    estimate,
    phases,
    projection_rows,
    running_and_criticality,
    variance_reduction,
)
from scalestack.errors import UserError
from scalestack.trace import State, make_trace


def test_bic_matches_simpoint_formula_by_hand():
    x = np.array([[0.0, 0.0], [0.0, 2.0], [10.0, 0.0], [10.0, 1.0], [10.0, 2.0]])
    labels = np.array([0, 0, 1, 1, 1])
    cent = np.array([[0.0, 1.0], [10.0, 1.0]])
    r, m, k = 5, 2, 2
    sse = 1 + 1 + 1 + 0 + 1
    s2 = sse / (m * r)
    ll = 2 * np.log(2 / 5) + 3 * np.log(3 / 5) - r * m / 2 * (np.log(2 * np.pi * s2) + 1)
    p = (k - 1) + m * k + 1
    assert bic_score(x, labels, cent) == pytest.approx(ll - p / 2 * np.log(r))
    # weights replace counts
    w = np.array([2.0, 2.0, 1.0, 1.0, 1.0])
    big_r = w.sum()
    s2w = (2 + 2 + 1 + 0 + 1) / (m * big_r)
    llw = 4 * np.log(4 / 7) + 3 * np.log(3 / 7) - big_r * m / 2 * (np.log(2 * np.pi * s2w) + 1)
    assert bic_score(x, labels, cent, w) == pytest.approx(llw - p / 2 * np.log(big_r))


def test_choose_k_takes_smallest_k_within_90_percent_of_range():
    ks = np.arange(1, 6)
    assert choose_k(ks, np.array([0.0, 50.0, 91.0, 95.0, 100.0])) == 3
    assert choose_k(ks, np.array([0.0, 89.0, 89.5, 90.0, 100.0])) == 4
    assert choose_k(ks, np.array([100.0, 50.0, 20.0, 10.0, 0.0])) == 1


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=20, unique=True), st.randoms())
@settings(max_examples=30, deadline=None)
def test_projection_row_depends_only_on_the_region(names, rnd):
    shuffled = list(names)
    rnd.shuffle(shuffled)
    a = dict(zip(names, projection_rows(names, 15), strict=True))
    b = dict(zip(shuffled, projection_rows(shuffled, 15), strict=True))
    for n in names:
        assert np.array_equal(a[n], b[n])
        assert np.all(np.abs(a[n]) <= 1)


def _sampled_trace(seq, period=1_000_000, stall_after=None, stall_ns=50_000_000):
    """One thread running the symbols in `seq`, one sample per period; an optional stall (sleep)."""
    t = np.arange(len(seq), dtype=np.int64) * period + period
    if stall_after is not None:
        t[stall_after:] += stall_ns
    end = int(t[-1]) + period
    if stall_after is None:
        states = {"tid": [1], "start_ns": [0], "end_ns": [end], "state": [State.RUNNING]}
    else:
        s0 = int(t[stall_after - 1]) + 1
        s1 = int(t[stall_after]) - period
        states = {"tid": [1, 1, 1], "start_ns": [0, s0, s1], "end_ns": [s0, s1, end],
                  "state": [State.RUNNING, State.SLEEP, State.RUNNING]}
    n = len(seq)
    samples = {"tid": np.ones(n, np.int32), "time_ns": t, "cpu": np.zeros(n, np.int16), "ip": np.zeros(n, np.uint64),
               "offset": np.zeros(n, np.int64), "symbol": list(seq), "binary": ["app"] * n}
    return make_trace({"tid": [1], "name": ["t"], "start_ns": [0], "end_ns": [end]}, states, samples=samples)


def test_intervals_are_cut_at_a_stall_and_short_ones_dropped():
    seq = ["a"] * 250 + ["b"] * 130
    tr = _sampled_trace(seq, stall_after=250)
    res = phases(tr, interval_samples=100, k_max=3)
    iv = res.intervals
    # 250 -> 100, 100, 50 ; 130 -> 100, 30 ; all >= 10% kept
    assert iv["n_samples"].tolist() == [100, 100, 50, 100, 30]
    assert np.allclose(iv["weight"], [1, 1, 0.5, 1, 0.3])
    assert res.k == 2
    assert len(set(iv["phase"][:3])) == 1 and len(set(iv["phase"][3:])) == 1 and iv["phase"][0] != iv["phase"][3]
    res2 = phases(_sampled_trace(["a"] * 205), interval_samples=100, k_max=2)
    assert res2.dropped == 1 and res2.intervals["n_samples"].tolist() == [100, 100, 5]
    assert res2.intervals["fitted"].tolist() == [True, True, False] and res2.params["fitted_on"] == 2
    # the short interval is labelled (its time counts) but never a representative
    assert res2.intervals["phase"][2] == res2.intervals["phase"][0] and 2 not in res2.representative


def test_no_samples_is_a_user_error():
    tr = make_trace({"tid": [1], "name": ["t"], "start_ns": [0], "end_ns": [10]},
                    {"tid": [1], "start_ns": [0], "end_ns": [10], "state": [State.RUNNING]})
    with pytest.raises(UserError, match="--sample"):
        phases(tr)


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 1), st.integers(1, 50)), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(1, 3), st.integers(0, 400), st.integers(1, 200)), min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_interval_running_and_criticality_add_up_to_the_whole(segs, queries):
    """Windows tiling each thread's lifetime get exactly its running time and criticality."""
    tids, starts, ends, states = [], [], [], []
    clock = {1: 0, 2: 0, 3: 0}
    for tid, running, d in segs:
        tids.append(tid)
        starts.append(clock[tid])
        ends.append(clock[tid] + d)
        states.append(State.RUNNING if running else State.SLEEP)
        clock[tid] += d
    present = sorted({t for t, *_ in segs})
    tr = make_trace({"tid": present, "name": [str(t) for t in present], "start_ns": [0] * len(present),
                     "end_ns": [clock[t] for t in present]},
                    {"tid": tids, "start_ns": starts, "end_ns": ends, "state": states})
    crit = scalestack.criticality(tr)
    for i, tid in enumerate(crit.tids):
        cuts = np.unique(np.r_[0, [q[1] for q in queries if q[1] < clock[tid]], clock[tid]])
        t0, t1 = cuts[:-1], cuts[1:]
        run, cr = running_and_criticality(tr, np.full(len(t0), tid), t0, t1)
        assert run.sum() == pytest.approx(crit.running_ns[i])
        assert cr.sum() == pytest.approx(crit.criticality_ns[i])
        assert np.all(run >= 0) and np.all(cr <= run + 1e-9)


def test_variance_reduction_and_estimate_formulas():
    class R:  # the attributes the formulas read
        k = 2
        intervals = {"weight": np.array([1.0, 1.0, 1.0, 1.0]), "phase": np.array([1, 1, 2, 2])}
        weights = np.array([0.5, 0.5])
        representative = np.array([0, 3])

    m = np.array([1.0, 3.0, 10.0, 12.0])
    s_all = np.std(m)
    s_ph = 0.5 * 1.0 + 0.5 * 1.0
    assert variance_reduction(R, m) == pytest.approx((s_all - s_ph) / s_all)
    est, true, err = estimate(R, m)
    assert est == pytest.approx(0.5 * 1 + 0.5 * 12) and true == pytest.approx(6.5)
    assert err == pytest.approx(0.0)


def test_noise_sse_matches_monte_carlo():
    """The per-interval sampling-noise estimate equals the spread of resampled intervals."""
    from scalestack.analysis.phases import noise_sse

    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(8))
    proj = rng.uniform(-1, 1, (8, 15))
    n, reps = 200, 4000
    counts = rng.multinomial(n, p, size=reps)
    share = counts / n
    x = share @ proj
    truth = p @ proj
    mc = np.mean(np.sum((x - truth) ** 2, axis=1))
    crow, cgid = np.nonzero(share)
    est = noise_sse(crow, cgid, share[crow, cgid], proj, x, np.full(reps, n))
    assert est.mean() == pytest.approx(mc, rel=0.05)


def test_one_phase_of_pure_sampling_noise_gives_k1_and_plain_bic_does_not():
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(12))
    seq = rng.choice([f"f{i}" for i in range(12)], size=60_000, p=p)
    tr = _sampled_trace(list(seq))
    assert phases(tr, interval_samples=300).k == 1
    assert phases(tr, interval_samples=300, noise_factor=None).k > 1  # why the cap exists


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 30_000_000), st.sampled_from("abc")), min_size=5,
                max_size=300), st.integers(1, 40))
@settings(max_examples=60, deadline=None)
def test_intervals_partition_each_threads_samples(samples, per_interval):
    """Every sample is in exactly one interval, of its own thread; a thread's intervals follow each other in time."""
    tids = np.array([s[0] for s in samples], dtype=np.int32)
    t = np.array([s[1] for s in samples], dtype=np.int64)
    order = np.argsort(t, kind="stable")
    tids, t = tids[order], t[order]
    sym = [samples[i][2] for i in order]
    present = sorted(set(tids.tolist()))
    end = int(t.max()) + 1
    n = len(t)
    tr = make_trace({"tid": present, "name": [str(x) for x in present], "start_ns": [0] * len(present),
                     "end_ns": [end] * len(present)},
                    {"tid": present, "start_ns": [0] * len(present), "end_ns": [end] * len(present),
                     "state": [State.RUNNING] * len(present)},
                    samples={"tid": tids, "time_ns": t, "cpu": np.zeros(n, np.int16), "ip": np.zeros(n, np.uint64),
                             "offset": np.arange(n, dtype=np.int64) * 16, "symbol": sym, "binary": ["app"] * n})
    for gran in ("symbol", "block"):
        res = phases(tr, interval_samples=per_interval, k_max=3, granularity=gran)
        iv = res.intervals
        assert iv["n_samples"].sum() == n
        rows = res.params["_sample_order"][0]
        covered = np.zeros(n, dtype=int)
        for f, la, tid in zip(iv["first"], iv["last"], iv["tid"], strict=True):
            covered[rows[f:la + 1]] += 1
            assert np.all(tr.samples.tid[rows[f:la + 1]] == tid)
        assert np.all(covered == 1)
        assert np.all(iv["n_samples"] <= per_interval)
        for tid in present:
            m = iv["tid"] == tid
            first_t = tr.samples.time_ns[rows[iv["first"][m]]]
            assert np.all(iv["t_end_ns"][m][:-1] <= first_t[1:])  # in time order, no overlap
            assert np.all(iv["t_end_ns"][m] == tr.samples.time_ns[rows[iv["last"][m]]])
            assert iv["index"][m].tolist() == list(range(int(m.sum())))
        assert abs(res.weights.sum() - 1) < 1e-9 and set(iv["phase"]) <= set(range(1, res.k + 1))
