"""DEP+BURST predictors: the spec's worked example, identities, invariants, exactness on the simulator."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis import dvfs
from scalestack.errors import TraceFormatError
from scalestack.sim.dvfs_workloads import MIXES, java_like
from scalestack.sim.engine import simulate


def hand_epochs(length, active, N, stall, f_base=1.0, B=None, gc=None) -> dvfs.Epochs:
    """Epochs from per-epoch lengths (ns), an active matrix and N (B) matrices."""
    length = np.asarray(length, float)
    active = np.asarray(active, bool)
    t1 = np.cumsum(length)
    t0 = t1 - length
    a = np.where(active, (t1 - t0)[:, None], 0.0)
    T = active.shape[1]
    return dvfs.Epochs(t0, t1, np.arange(T) + 1, ("app",) * T, active, a, {"crit": np.asarray(N, float)},
                       np.zeros_like(a) if B is None else np.asarray(B, float), np.asarray(stall, bool),
                       np.zeros(len(length), bool) if gc is None else np.asarray(gc, bool),
                       np.array([[0.0, t1[-1]]] * T), f_base)


def fig1(b_prime: float) -> dvfs.Epochs:
    """Spec §1.5 Fig. 1 at 1 -> 4 GHz (r = 1/4, alpha = length/4 + 3N/4).

    Epoch 1 (length=8): t0 N=0 -> a'=2, t1 N=4 -> x'=5; t1 then blocks on the lock t0 holds.
    Epoch 2 (t0 alone): length = 4 b', N=0 -> b'.  Epoch 3 (length=12): t0 N=0 -> c'=3, t1 N=4 -> z'=6.
    """
    return hand_epochs([8, 4 * b_prime, 12], [[1, 1], [1, 0], [1, 1]], [[0, 4], [0, 0], [0, 4]],
                       [[0, 1], [0, 0], [1, 1]])


def test_fig1_totals_across_12_per_epoch_15():
    ep = fig1(4)
    assert dvfs.dep(ep, 4.0)[0].sum() == pytest.approx(12)
    assert dvfs.dep(ep, 4.0, across=False)[0].sum() == pytest.approx(15)
    assert dvfs.dep(ep, 4.0, clamp=True)[0].sum() == pytest.approx(12)
    lengths, crit = dvfs.dep(ep, 4.0)
    assert lengths.tolist() == pytest.approx([5, 1, 6])  # x', b' - (x' - a'), max(c', z')
    assert crit.tolist() == [1, 0, 1]


def test_fig1_negative_epoch_literal_9_clamped_11():
    ep = fig1(1)
    assert dvfs.dep(ep, 4.0)[0].sum() == pytest.approx(9)
    assert dvfs.dep(ep, 4.0, clamp=True)[0].sum() == pytest.approx(11)


def test_alpha_formulas():
    ep = hand_epochs([10], [[1]], [[3]], [[1]], f_base=2.0, B=[[2]])
    assert dvfs.alpha(ep, 0.5, burst=False)[0, 0] == pytest.approx((10 - 3) * 0.5 + 3)
    assert dvfs.alpha(ep, 0.5, burst=True)[0, 0] == pytest.approx((10 - 3 - 2) * 0.5 + 3 + 2)


def test_mcrit_counts_blocked_time_as_scaling():
    # t1 runs 2 of 10 ns with N=2 (all memory); lifetime 10 -> (10-2) r + 2
    ep = hand_epochs([2, 8], [[1, 1], [1, 0]], [[0, 2], [0, 0]], [[0, 1], [1, 0]])
    r = 0.25
    assert dvfs.mcrit(ep, 4.0) == pytest.approx(max(10 * r, 8 * r + 2))


def test_coop_sums_phases():
    ep = hand_epochs([4, 6], [[1, 0], [0, 1]], [[0, 0], [6, 0]], [[1, 0], [0, 1]], gc=[False, True])
    ep = dataclasses.replace(ep, n_ns={"crit": np.array([[0.0, 0.0], [0.0, 6.0]])})
    # mutator phase: only thread 1 ran: 4 r; GC phase: only thread 2 ran, all memory: 6
    assert dvfs.coop(ep, 4.0) == pytest.approx(1 + 6)


@st.composite
def random_epochs(draw):
    K = draw(st.integers(1, 25))
    T = draw(st.integers(1, 5))
    act = np.array(draw(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=K, max_size=K)))
    length = np.array(draw(st.lists(st.floats(1, 1e6), min_size=K, max_size=K)))
    fn = np.array(draw(st.lists(st.floats(0, 1), min_size=K * T, max_size=K * T))).reshape(K, T)
    fb = np.array(draw(st.lists(st.floats(0, 1), min_size=K * T, max_size=K * T))).reshape(K, T)
    N = fn * length[:, None] * act
    B = (1 - fn) * fb * length[:, None] * act
    stall = act & np.array(draw(st.lists(st.lists(st.booleans(), min_size=T, max_size=T), min_size=K, max_size=K)))
    fbase = draw(st.sampled_from([1.0, 2.0, 4.0]))
    return hand_epochs(length, act, N, stall, f_base=fbase, B=B)


@settings(max_examples=60, deadline=None)
@given(random_epochs(), st.sampled_from([1.0, 1.5, 2.5, 4.0]), st.booleans())
def test_leads_invariants(ep, ft, clamp):
    """After each epoch the critical thread has delta 0, sleepers have 0, and active threads >= 0.

    (With clamping, an epoch clamped to 0 leaves its critical thread the lead it still had.)
    """
    d = dvfs.leads(ep, ft, clamp=clamp)
    lengths, crit = dvfs.dep(ep, ft, clamp=clamp)
    for k in range(len(ep.t0_ns)):
        if crit[k] >= 0 and (not clamp or lengths[k] > 0):
            assert d[k, crit[k]] == pytest.approx(0, abs=1e-6)
        assert np.all(d[k][ep.active[k]] >= -1e-6)
        assert np.all(d[k][ep.stall[k]] == 0)


@settings(max_examples=60, deadline=None)
@given(random_epochs())
def test_identity_at_base_frequency(ep):
    f = ep.f_base_ghz
    res = dvfs.predict(ep, f)
    for m, v in res.predicted_ns.items():
        if m not in ("M+CRIT", "COOP"):  # these take thread lifetimes, not epochs (see test below)
            assert v == pytest.approx(ep.measured_ns, rel=1e-12), m
    assert np.all(dvfs.leads(ep, f) == 0)


@pytest.mark.parametrize("mix", MIXES)
@pytest.mark.parametrize("f", [1.0, 4.0])
def test_identity_on_simulated_runs_every_model(mix, f):
    sim = simulate(java_like(mix, 3), cores=4, freq_ghz=f)
    res = dvfs.predict(dvfs.from_sim(sim), f)
    for m, v in res.predicted_ns.items():
        assert v == pytest.approx(sim.runtime_ns, rel=1e-12), m


def test_single_thread_all_models_agree():
    wl = {"threads": [{"name": "main", "ops": [["compute", 300_000, 50_000, 20_000], ["compute", 100_000, 0, 0],
                                               ["compute", 50_000, 80_000, 0]]}]}
    sim = simulate(wl, cores=1, freq_ghz=1.0)
    res = dvfs.predict(dvfs.from_sim(sim), 4.0, true_ns=simulate(wl, cores=1, freq_ghz=4.0).runtime_ns)
    p = res.predicted_ns
    assert p["DEP+BURST"] == pytest.approx(p["DEP+BURST per-epoch"])
    assert p["DEP"] == pytest.approx(p["M+CRIT"]) and p["DEP"] == pytest.approx(p["COOP"])
    assert p["DEP+BURST"] == pytest.approx(res.true_ns, abs=3)  # ns rounding per op
    assert p["DEP"] < res.true_ns  # the store burst taken as scaling


def lock_fig1() -> dict:
    """Fig. 1 in the simulator: memory-bound t1 blocks on the lock compute-bound t0 holds."""
    return {"threads": [
        {"name": "main", "start": True, "ops": [["spawn", 1], ["spawn", 2], ["join", 1], ["join", 2]]},
        {"name": "t0", "start": False, "ops": [["lock", 0], ["compute", 3_000_000, 0, 0], ["unlock", 0],
                                               ["compute", 300_000]]},
        {"name": "t1", "start": False, "ops": [["compute", 100_000, 500_000, 0], ["lock", 0],
                                               ["compute", 100_000, 200_000, 300_000], ["unlock", 0]]}]}


@pytest.mark.parametrize("wl", [lock_fig1(), java_like("store", 5), java_like("mem", 2)],
                         ids=["fig1-lock", "store", "mem"])
@pytest.mark.parametrize("fb,ft", [(1.0, 4.0), (4.0, 1.0), (2.0, 3.0)])
def test_across_epoch_dep_burst_exact_when_order_holds(wl, fb, ft):
    base, true = simulate(wl, cores=8, freq_ghz=fb), simulate(wl, cores=8, freq_ghz=ft)
    order = [[w[0] for w in sorted(s.truth["waits"], key=lambda w: w[1]) if w[3] == "lock"]
             for s in (base, true)]
    assert order[0] == order[1]  # the premise: the same threads wait for locks, in the same order
    ep = dvfs.from_sim(base)
    pred = dvfs.dep(ep, ft)[0].sum()
    assert pred == pytest.approx(true.runtime_ns, rel=1e-6)
    per_epoch = dvfs.dep(ep, ft, across=False)[0].sum()
    assert per_epoch >= pred - 1e-6


def test_fig1_lock_per_epoch_overpredicts_across_exact():
    wl = lock_fig1()
    base, true = simulate(wl, cores=4, freq_ghz=1.0), simulate(wl, cores=4, freq_ghz=4.0)
    ep = dvfs.from_sim(base)
    assert dvfs.dep(ep, 4.0)[0].sum() == pytest.approx(true.runtime_ns, rel=1e-5)
    assert dvfs.dep(ep, 4.0, across=False)[0].sum() > true.runtime_ns * 1.05


def test_burst_needed_for_store_bursts():
    wl = java_like("store", 1)
    base, true = simulate(wl, cores=8, freq_ghz=1.0), simulate(wl, cores=8, freq_ghz=4.0)
    res = dvfs.predict(dvfs.from_sim(base), 4.0, true_ns=true.runtime_ns)
    err = {r["model"]: abs(r["error_pct"]) for r in res.rows()}
    assert err["DEP"] > 10 > err["DEP+BURST"] * 3


def test_sim_segments_account_for_all_compute():
    wl = java_like("lock", 4)
    for ts in (0, 50_000):
        sim = simulate(wl, cores=2, freq_ghz=2.0, timeslice_ns=ts)
        seg = sim.truth["segments"]
        for i in range(len(wl["threads"])):
            p = seg[seg[:, 0] == 1000 + i]
            assert p[:, 3].sum() == sim.truth["compute_ns"][i]
            assert p[:, 4].sum() == sim.truth["memory_ns"][i]
            assert p[:, 5].sum() == sim.truth["store_ns"][i]
            assert np.all(p[:, 2] - p[:, 1] == p[:, 3:].sum(axis=1))


def test_epochs_have_constant_running_sets_and_stalls():
    sim = simulate(java_like("lock", 7), cores=8, freq_ghz=2.0)
    ep = dvfs.from_sim(sim)
    assert np.all(ep.length_ns > 0)
    assert np.all(np.any(ep.active[1:] != ep.active[:-1], axis=1))  # merged when unchanged
    assert np.all((ep.n_ns["crit"] + ep.b_ns <= ep.a_ns + 1e-6)[ep.active])
    assert np.all(ep.stall[:-1] == (ep.active[:-1] & ~ep.active[1:]))


def test_jsonl_round_trip(tmp_path):
    sim = simulate(java_like("mem", 2), cores=4, freq_ghz=1.0)
    ep = dvfs.from_sim(sim)
    path = str(tmp_path / "c.jsonl")
    dvfs.write_jsonl(ep, path)
    back = dvfs.read_jsonl(path)
    a, b = dvfs.predict(ep, 4.0), dvfs.predict(back, 4.0)
    for m in a.predicted_ns:
        assert b.predicted_ns[m] == pytest.approx(a.predicted_ns[m], rel=1e-9), m


def test_jsonl_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"v":1,"kind":"meta","f_base_hz":1e9}\n{"v":1,"kind":"epoch","t0":0}\n')
    with pytest.raises(TraceFormatError, match=":2:"):
        dvfs.read_jsonl(str(p))


def test_jsonl_leadload_only_is_used_and_missing_estimator_rejected(tmp_path):
    p = tmp_path / "ll.jsonl"
    p.write_text('{"v":1,"kind":"meta","f_base_hz":1e9}\n'
                 '{"v":1,"kind":"epoch","id":0,"t0":0,"t1":1e-3,"stall":[7],'
                 '"threads":[{"tid":7,"active":1e-3,"N":{"leadload":5e-4},"B":1e-4}]}\n')
    ep = dvfs.read_jsonl(str(p))
    res = dvfs.predict(ep, 2.0)
    assert res.estimator == "leadload"
    assert res.predicted_ns["DEP+BURST"] == pytest.approx(0.4e6 * 0.5 + 0.6e6)
    with pytest.raises(Exception, match="crit"):
        dvfs.predict(ep, 2.0, estimator="crit")


def test_trace_without_counters_gives_bounds_only():
    sim = simulate(java_like("mem", 1), cores=4, freq_ghz=2.0)
    ep = dvfs.from_trace(sim.trace, 2.0)
    res = dvfs.predict(ep, 4.0)
    assert "impossible" in res.unavailable
    lo, hi = res.predicted_ns["all on-CPU time scales"], res.predicted_ns["nothing scales"]
    true = simulate(java_like("mem", 1), cores=4, freq_ghz=4.0).runtime_ns
    assert lo <= true <= hi


def sim_events(sim, f_ghz: float) -> list[dict]:
    """A simulated run as the raw `ev` records a counter collector would write (exact counters)."""
    st = sim.trace.states
    seg = sim.truth["segments"]
    out = []
    for tid in sim.trace.threads.tid:
        m = (st.tid == tid) & (st.state == 0)
        s, e = st.start_ns[m], st.end_ns[m]
        p = seg[seg[:, 0] == tid]
        p = p[np.argsort(p[:, 1])]
        m0 = p[:, 1] + p[:, 3]
        s0 = m0 + p[:, 4]
        for t, typ in [(x, "switch_in") for x in s] + [(x, "switch_out") for x in e]:
            mem = dvfs._cumulative(np.array([t], float), m0, s0)[0]
            sto = dvfs._cumulative(np.array([t], float), s0, s0 + p[:, 5])[0]
            out.append({"v": 1, "kind": "ev", "ts": t / 1e9, "type": typ, "tid": int(tid),
                        "ctr": {"leadload": mem * f_ghz, "sqfull": sto * f_ghz}})
    return sorted(out, key=lambda r: (r["ts"], r["type"] == "switch_in"))


def test_event_stream_epochizer_matches_exact_epochs(tmp_path):
    wl = java_like("store", 6)
    base, true = simulate(wl, cores=8, freq_ghz=2.0), simulate(wl, cores=8, freq_ghz=1.0)
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps({"v": 1, "kind": "meta", "f_base_hz": 2e9}) + "\n"
                    + "".join(json.dumps(r) + "\n" for r in sim_events(base, 2.0)))
    ev = dvfs.read_jsonl(str(path))
    ex = dvfs.from_sim(base)
    assert ev.source == "events" and ev.estimator() == "leadload"
    ran = ex.active.any(axis=0)  # the main thread only spawns and joins: it never runs
    assert np.array_equal(ev.tids, ex.tids[ran]) and np.array_equal(ev.t0_ns, ex.t0_ns)
    assert np.array_equal(ev.active, ex.active[:, ran]) and np.array_equal(ev.stall, ex.stall[:, ran])
    assert ev.n_ns["leadload"].sum() == pytest.approx(ex.n_ns["crit"].sum(), rel=1e-6)
    assert ev.b_ns.sum() == pytest.approx(ex.b_ns.sum(), rel=1e-6)
    assert dvfs.dep(ev, 2.0)[0].sum() == pytest.approx(base.runtime_ns)
    # counters spread evenly over each running stretch: close to, not exactly, the exact split
    err = abs(dvfs.dep(ev, 1.0)[0].sum() - true.runtime_ns) / true.runtime_ns
    assert err < 0.06


def test_event_stream_missing_counters_is_an_error(tmp_path):
    path = tmp_path / "ev.jsonl"
    recs = [{"v": 1, "kind": "meta", "f_base_hz": 1e9},
            {"v": 1, "kind": "ev", "ts": 0.0, "type": "switch_in", "tid": 5, "ctr": {"leadload": 0}},
            {"v": 1, "kind": "ev", "ts": 1.0, "type": "sleep", "tid": 5}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(TraceFormatError, match=":3:"):
        dvfs.read_jsonl(str(path))


def test_s6_lock_free_at_target_literal_underpredicts_clamp_exact():
    """Spec S6: at 4 GHz the lock is free before t1 arrives (b' < x' - a'): a negative epoch."""
    wl = {"threads": [
        {"name": "main", "start": True, "ops": [["spawn", 1], ["spawn", 2], ["join", 1], ["join", 2]]},
        {"name": "t0", "start": False, "ops": [["lock", 0], ["compute", 3_000_000], ["unlock", 0],
                                               ["compute", 400_000]]},
        {"name": "t1", "start": False, "ops": [["compute", 100_000, 1_000_000, 0], ["lock", 0],
                                               ["compute", 200_000, 100_000, 0], ["unlock", 0]]}]}
    base, true = simulate(wl, cores=4, freq_ghz=1.0), simulate(wl, cores=4, freq_ghz=4.0)
    assert any(w[3] == "lock" for w in base.truth["waits"]) and not any(w[3] == "lock" for w in true.truth["waits"])
    ep = dvfs.from_sim(base)
    lengths, _ = dvfs.dep(ep, 4.0)
    assert lengths.min() < 0 and lengths.sum() < true.runtime_ns * 0.95
    assert dvfs.dep(ep, 4.0, clamp=True)[0].sum() == pytest.approx(true.runtime_ns, rel=1e-6)
