"""Eklov's protocol in the simulator: the pirate, the isolation mode and the exact truth switches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.hwsim import HwConfig, from_arrays
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import simulate
from scalestack.hwsim.eklov_sim import (
    COMPONENTS,
    Workload,
    isolated_run,
    measured_run,
    pirate_stream,
    truth_times,
    validate,
)
from scalestack.hwsim.traces import parallel_kernel

ROOT = Path(__file__).resolve().parents[2]
# a small machine so the exact cases run in milliseconds: 4 KB L1, 64 KB 8-way LLC (128 sets)
SMALL = HwConfig(l1_bytes=4096, l1_ways=4, llc_bytes=64 << 10, llc_ways=8, prefetch=False, atd_sampled_sets=8)


def loop(ws_bytes: int, passes: int, gap: int = 20, base: int = 0):
    """A thread looping sequentially over ws_bytes, one access per line."""
    lines = ws_bytes // 64
    addrs = base + (np.arange(lines * passes) % lines) * 64
    return np.full(addrs.size, gap, np.int64), addrs.astype(np.int64), np.zeros(addrs.size, np.uint8)


@pytest.mark.parametrize("ws", [24 << 10, 32 << 10, 48 << 10])
def test_pirate_equals_private_partition(ws):
    # a thread alone next to a pirate of W = C/2 sees the LLC hits and misses of a private C - W
    tr = from_arrays([loop(ws, 6)])
    alone = simulate(tr, SMALL.replace(llc_bytes=32 << 10))[0]
    r = isolated_run(tr, 0, 32 << 10, SMALL, pirate_gap=1)
    both = from_arrays([loop(ws, 6), loop(ws, 6, base=1 << 30)], separate=False)
    part = simulate(both, SMALL.replace(llc_partition=True))[0]
    # the engine's pirate mode directly, to read the target's own LLC counters
    p = SMALL.params()
    p[E.P_PIRATE] = 1
    pair = from_arrays([loop(ws, 6), pirate_stream(32 << 10, 64, 1)], separate=False)
    out = E.simulate(p, pair.offsets, pair.gaps, pair.addrs, pair.stores, np.array([0, 1]), np.zeros(3, np.int64))
    assert out[0, E.C_LLCA] == alone[E.C_LLCA] == part[E.C_LLCA]
    assert out[0, E.C_LLCM] == alone[E.C_LLCM] == part[E.C_LLCM]
    assert r.fetch_ratio == 0.0 and r.lost_share == 0.0
    # the three cases really differ: fits (cold misses only), exactly full, thrashing LRU loop
    lines = ws // 64
    assert alone[E.C_LLCM] == (lines if ws <= 32 << 10 else 6 * lines)


def test_pirate_that_loses_lines_is_flagged():
    # a target touching many lines quickly against a slow pirate steals part of W: the check sees it
    g, a, s = loop(48 << 10, 20, gap=1)
    tr = from_arrays([(g, a, s)])
    slow = isolated_run(tr, 0, 32 << 10, SMALL, pirate_gap=64)
    fast = isolated_run(tr, 0, 32 << 10, SMALL, pirate_gap=1)
    assert slow.lost_share > 0.01 and not slow.valid(0.01)
    assert fast.lost_share < slow.lost_share


def test_held_time_is_left_out():
    # fixed-latency memory: the pirate's traffic cannot delay the target, so T_prof is its time alone
    cfg = SMALL.replace(fixed_latency=True)
    tr = parallel_kernel("random", 1, 4000, 8 << 10, shared=0.0, barriers=3, seed=1)
    alone = simulate(tr, cfg)[0, E.C_CYC]
    r = isolated_run(tr, 0, 32 << 10, cfg, pirate_gap=1)
    assert r.held_cycles > 0  # four warm-ups (start + 3 barriers) were waited for
    assert r.t_prof_cycles == pytest.approx(alone, rel=1e-12)
    assert r.segments == 4


def test_sync_free_removes_every_wait():
    tr = parallel_kernel("random", 4, 3000, 64 << 10, shared=0.0, locks=1, lock_every=8, barriers=3,
                         imbalance=0.5, seed=2)
    real = simulate(tr, SMALL)
    free = simulate(tr, SMALL.replace(sync_free=True))
    assert (real[:, E.C_SPIN] + real[:, E.C_YIELD]).sum() > 0
    assert (free[:, E.C_SPIN] + free[:, E.C_YIELD]).sum() == 0
    # the real run's T_nosync estimate is the subtraction of exactly those waits
    m = measured_run(tr, SMALL)
    assert m["nosync"] == pytest.approx((real[:, E.C_CYC] - real[:, E.C_SPIN] - real[:, E.C_YIELD]).max())
    assert m["meas"] == real[:, E.C_CYC].max()


def test_private_memory_has_no_memory_waits():
    tr = parallel_kernel("stream", 4, 4000, 1 << 20, shared=0.0, seed=3)
    shared = simulate(tr, SMALL)
    priv = simulate(tr, SMALL.replace(private_memory=True))
    assert shared[:, [E.C_BUSW, E.C_BANKW]].sum() > 0
    assert priv[:, [E.C_BUSW, E.C_BANKW, E.C_ROWW]].sum() == 0
    assert priv[:, E.C_CYC].max() < shared[:, E.C_CYC].max()
    # one thread alone: its own DRAM is the shared DRAM
    one = tr.thread(0)
    assert simulate(one, SMALL.replace(private_memory=True))[0, E.C_CYC] == simulate(one, SMALL)[0, E.C_CYC]


@settings(max_examples=15, deadline=None)
@given(kind=st.sampled_from(["stream", "random", "chase", "strided"]), n=st.sampled_from([2, 4, 8]),
       ws=st.integers(4 << 10, 256 << 10), seed=st.integers(0, 10**6), locks=st.booleans(), pf=st.booleans())
def test_truth_switches_equal_threads_alone(kind, n, ws, seed, locks, pf):
    # partitioned LLC + private DRAM + no waits, all threads together == each thread alone on a C/N LLC
    cfg = SMALL.replace(prefetch=pf)
    tr = parallel_kernel(kind, n, 1500, ws, shared=0.1, locks=int(locks), lock_every=10, barriers=2, seed=seed)
    together = simulate(tr, cfg.replace(llc_partition=True, private_memory=True, sync_free=True))
    small = cfg.replace(llc_bytes=cfg.llc_bytes // n, sync_free=True)
    for t in range(n):
        alone = simulate(tr.thread(t), small)[0]
        assert together[t, E.C_CYC] == pytest.approx(alone[E.C_CYC], rel=1e-12)
        assert together[t, E.C_LLCM] == alone[E.C_LLCM]
    assert truth_times(tr, cfg)["pirate"] == pytest.approx(together[:, E.C_CYC].max())
    # the partition alone (shared DRAM) already gives every thread its C/N hits and misses
    part = simulate(tr, cfg.replace(llc_partition=True))
    for t in range(n):
        assert part[t, E.C_LLCM] == simulate(tr.thread(t), small)[0, E.C_LLCM]


def test_validation_stacks_add_up_and_match_on_contention_free_kernel():
    # an L1-sized kernel without locks: nothing for the protocol to get wrong beyond noise-free arithmetic
    w = Workload("l1", lambda n: parallel_kernel("random", n, 40000 // n, (8 << 10) * n, shared=0.0, barriers=2,
                                                 seed=4))
    v = validate(w, [2, 4], HwConfig(llc_ways=16))
    for n in (2, 4):
        for s in (v.truth, v.protocol):
            assert s.cache(n) + s.memory(n) + s.sync(n) + s.s_meas(n) == pytest.approx(n)
        for c in COMPONENTS:
            assert abs(v.error(c, n)) < 0.01
    rows = v.rows()
    assert {r["n"] for r in rows} == {2, 4} and all(r["flagged"] == 0 for r in rows)
    assert '"hwsim-eklov-validation"' in v.to_json()


def test_bad_input():
    tr = from_arrays([loop(8 << 10, 2)])
    with pytest.raises(UserError, match="pirate size"):
        isolated_run(tr, 0, SMALL.llc_bytes * 2, SMALL)
    with pytest.raises(UserError, match="pirate order"):
        pirate_stream(4096, order="zigzag")
    three = parallel_kernel("random", 3, 100, 8 << 10, shared=0.0)
    with pytest.raises(UserError, match="evenly"):
        truth_times(three, SMALL)


def test_benchmark_quick():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/validation/validate_eklov_sim.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "within 5% of N" in res.stdout
    assert res.stdout.count("ub-rnd") == 2 and "summary" in res.stdout
