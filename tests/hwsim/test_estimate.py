"""The estimators of Sec. 6.2.1 on hand-made counter vectors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import estimate


def vec(**kw):
    c = np.zeros(E.NC)
    for k, v in kw.items():
        c[E.COUNTERS.index(k)] = v
    return c


def test_worked_example():
    # 1,000 LLC accesses, 10 of them in sampled sets: scale 100.
    # sampled inter-miss penalty 30 -> 3,000; sampled intra wait 5 -> 500;
    # 1 sampled inter hit x 100 x isolated average load-miss penalty: the load-miss stall minus the
    # interference estimated in it, (5,500 - 3,000 - 500) / 40 = 50 -> 5,000.
    c = vec(cycles=100_000, llc_accesses=1000, sampled_accesses=10, sampled_inter_penalty=30,
            sampled_intra_wait=5, sampled_inter_hits=1, llc_load_miss_stall=5500, llc_load_misses=40,
            sampled_inter_misses=2, sampled_intra_misses=3, all_miss_penalty=2000)
    e = estimate(c)
    assert e["inter"] == pytest.approx(3000)
    assert e["wait"] == pytest.approx(500)
    assert e["positive"] == pytest.approx(5000)
    assert e["isolated"] == pytest.approx(100_000 - 3000 - 500 + 5000)
    # interpolation: all-miss penalty x sampled inter misses / sampled misses = 2000 x 2/5
    assert e["interp"] == pytest.approx(800)


@given(st.floats(1, 1e9), st.integers(1, 10**6), st.floats(0, 1), st.floats(0, 1e6), st.floats(0, 1e6))
def test_no_sampled_interference_means_exact(cyc, acc, frac, pen, wait):
    """Without sampled inter misses, waits or inter hits the estimate is the measured time."""
    c = vec(cycles=cyc, llc_accesses=acc, sampled_accesses=int(acc * frac), all_miss_penalty=pen,
            llc_load_miss_stall=pen, llc_load_misses=10, sampled_intra_misses=3)
    e = estimate(c)
    assert e["isolated"] == cyc
    assert e["isolated_interp"] == cyc


@given(st.floats(1, 1e6), st.floats(0, 1e5), st.floats(0, 1e5))
def test_monotone(cyc, pen, hits):
    """More inter-miss penalty lowers the estimate; more inter hits raise it."""
    base = dict(cycles=cyc, llc_accesses=100, sampled_accesses=10, llc_load_miss_stall=500, llc_load_misses=5)
    e0 = estimate(vec(**base))["isolated"]
    assert estimate(vec(**base, sampled_inter_penalty=pen))["isolated"] <= e0
    assert estimate(vec(**base, sampled_inter_hits=hits))["isolated"] >= e0
