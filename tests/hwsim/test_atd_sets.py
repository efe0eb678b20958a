"""Which LLC sets the sampled ATD watches (issue 9, set sampling).

Aligned sampling (set i x stride) puts every sampled set at the same low index bits, so a stream
with a power-of-two stride lands in all of them: the sampled sets see more of its accesses and
more contention than the average set, and the extrapolated inter-thread misses run high. Spread
sampling (set i x stride + i mod stride) keeps one sampled set per stride-block but varies the low
bits, so a strided stream lands in its fair share of them.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.hwsim import HwConfig, from_arrays, make_config
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import simulate

BASE = HwConfig(prefetch=False)


def sampled_accesses(lines: np.ndarray, cfg: HwConfig) -> float:
    """Sampled LLC accesses of one thread touching each given line once (every one an L1 miss)."""
    n = lines.size
    tr = from_arrays([(np.full(n, 50), lines.astype(np.int64) * cfg.line_bytes, np.zeros(n, np.uint8))],
                     separate=False)
    return simulate(tr, cfg)[0, E.C_SACC]


@pytest.mark.parametrize("sets", ["spread", "aligned"])
def test_every_sampled_set_watched_once(sets):
    cfg = BASE.replace(atd_sets=sets)
    # one access to each of the LLC's 4096 sets: exactly the 32 sampled ones are seen
    assert sampled_accesses(np.arange(cfg.llc_sets), cfg) == cfg.atd_sampled_sets


def test_strided_stream_gets_its_fair_share_only_when_spread():
    cfg = BASE.replace(atd_sets="spread")
    lines = np.arange(0, cfg.llc_sets, 4)  # stride 4 lines: a quarter of the sets
    # spread: sampled sets i*128 + i with i = 0 mod 4 -> 8 of 32, a quarter, as for the whole LLC
    assert sampled_accesses(lines, cfg) == cfg.atd_sampled_sets // 4
    # aligned: every sampled set (low bits 0) is a multiple of 4 -> all 32, four times its share
    assert sampled_accesses(lines, cfg.replace(atd_sets="aligned")) == cfg.atd_sampled_sets


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([1, 2, 8, 32, 256, 2048]), st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_spread_samples_each_stride_class_evenly(sampled, stride):
    """Over all sets, a stride-k subset sees sampled/k sampled sets (when k divides the stride)."""
    cfg = BASE.replace(atd_sampled_sets=sampled, atd_sets="spread")
    sstride = cfg.llc_sets // sampled
    lines = np.arange(0, cfg.llc_sets, stride)
    got = sampled_accesses(lines, cfg)
    if stride <= sstride:
        assert got == sampled // stride if sampled >= stride else got <= 1
    assert got <= sampled


def test_bad_choice_refused():
    with pytest.raises(UserError, match="atd_sets"):
        make_config({"atd_sets": "random"})


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4))
def test_inter_wait_to_memory_moves_cycles_between_terms_only(seed, k):
    """The extrapolated estimate scales both terms alike, so moving an inter-thread miss's DRAM
    waiting from the LLC term to the memory term leaves the isolated-time estimate as it was."""
    from scalestack.hwsim import account, generate

    rng = np.random.default_rng(seed)
    kinds = ("stream", "strided", "random", "chase")
    tr = from_arrays([generate(kinds[rng.integers(4)], 4000, int(rng.choice([64 << 10, 4 << 20])), gap=8, stride=256,
                               seed=seed + t) for t in range(k)])
    cfg = HwConfig(full_atd=True)
    a = account(tr, cfg, ground_truth=False)
    b = account(tr, cfg.replace(inter_wait_to_memory=True), ground_truth=False)
    for x, y in zip(a.threads, b.threads, strict=True):
        assert y.isolated_est == pytest.approx(x.isolated_est, rel=1e-9)
        assert y.inter_miss_penalty + y.memory_wait == pytest.approx(x.inter_miss_penalty + x.memory_wait, rel=1e-9)
        assert y.memory_wait >= x.memory_wait - 1e-9 and y.inter_miss_penalty <= x.inter_miss_penalty + 1e-9
