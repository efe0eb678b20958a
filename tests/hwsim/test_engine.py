"""Hand-computed timelines of the compiled model (Table 6.2 defaults unless stated).

Default timing in core cycles (2 GHz core, DDR 667 MHz, bus 1333 MT/s x 8 B):
tRP = tRCD = CL = round(9 x 2.9985) = 27; one 64 B line on the bus = round(8 x 1.5004) = 12;
LLC lookup 10; dispatch width 4, so `gap` instructions take gap/4 cycles.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.hwsim import HwConfig, account, from_arrays, make_config
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import simulate

NOPF = HwConfig(prefetch=False)


def run(streams, cfg=NOPF):
    tr = from_arrays([(np.array(g), np.array(a), np.zeros(len(g), np.uint8)) for g, a in streams], separate=False)
    return simulate(tr, cfg)


def test_cold_miss_opens_row():
    # dispatch at 0.25, LLC miss at 10.25, activate + CAS 54 -> 64.25, bus 12 -> 76.25
    c = run([([1], [0])])
    assert c[0, E.C_CYC] == pytest.approx(76.25)
    assert c[0, E.C_LLCM] == 1


def test_l1_hit_costs_nothing():
    c = run([([1, 200], [0, 8])])
    # second access is the same line: an L1 hit; the first miss blocks once the ROB is full:
    # instruction 201 waits until 76.25 + (201 - 1 - 128) / 4 = 94.25
    assert c[0, E.C_CYC] == pytest.approx(94.25)
    assert c[0, E.C_L1M] == 1


@pytest.mark.parametrize(
    ("addr", "expect"),
    [
        (64, 94.25 + 10 + 27 + 12),  # same row: row-buffer hit, CL only
        (4096, 94.25 + 10 + 54 + 12),  # other bank, closed: tRCD + CL
        (8 * 4096, 94.25 + 10 + 81 + 12),  # same bank, other row: tRP + tRCD + CL
    ],
)
def test_row_buffer(addr, expect):
    c = run([([1, 200], [0, addr])])
    assert c[0, E.C_CYC] == pytest.approx(expect)


def test_bank_conflict_between_cores():
    # core 0 opens bank 0 row 0 (ready 64.25); core 1 wants bank 0 row 8 at 10.25: waits 54 for
    # the bank, then a row conflict (81) -> 145.25, bus -> 157.25
    c = run([([1], [0]), ([1], [8 * 4096])])
    assert c[0, E.C_CYC] == pytest.approx(76.25)
    assert c[1, E.C_CYC] == pytest.approx(157.25)
    assert c[1, E.C_BANKW] == pytest.approx(54)


def test_bus_conflict_counted_and_removed():
    # core 1, bank 2 (line 129: the sampled ATD set 1 x 128 + 1), ready 64.25, bus busy by core 0 until 76.25
    r = account(from_arrays([([1], [0], [0]), ([1], [129 * 64], [0])], separate=False), NOPF)
    c1 = r.threads[1]
    assert c1.cycles == pytest.approx(88.25)
    assert r.counters["bus_wait"][1] == pytest.approx(12)
    assert c1.memory_wait == pytest.approx(12)
    assert c1.isolated_measured == pytest.approx(76.25)
    assert c1.isolated_est == pytest.approx(76.25)
    assert c1.error == pytest.approx(0.0)


TINY = make_config({"llc_bytes": 128, "llc_ways": 2, "l1_bytes": 64, "l1_ways": 1, "atd_sampled_sets": 1,
                    "fixed_latency": True, "prefetch": False})
A, D, B, C, S = 0, 64 * 2, 64 * 4, 64 * 6, 64 * 8


def test_inter_thread_miss_caught_by_atd():
    # 1-set, 2-way LLC. Alone, thread 0's second A hits (A, D fit). Thread 1's B, C (at cycles 3, 3.25, after D) evict A:
    # LLC miss + ATD hit = inter-thread miss; its full-ROB stall is the whole interference.
    tr = from_arrays([([4, 4, 2000], [A, D, A], [0, 0, 0]), ([12, 1], [B, C], [0, 0])], separate=False)
    r = account(tr, TINY)
    assert r.counters["sampled_inter_misses"] == (1.0, 0.0)
    t0 = r.threads[0]
    assert t0.cycles > t0.isolated_measured
    assert t0.inter_miss_penalty == pytest.approx(t0.cycles - t0.isolated_measured)
    assert t0.isolated_est == pytest.approx(t0.isolated_measured)


def test_positive_interference_hit():
    # thread 1 brings S into the LLC; thread 0's later load of S hits there but misses its ATD
    tr = from_arrays([([400, 4], [A, S], [0, 0]), ([1], [S], [0])], separate=False)
    r = account(tr, TINY)
    assert r.counters["sampled_inter_hits"] == (1.0, 0.0)
    t0 = r.threads[0]
    avg = r.counters["llc_load_miss_stall"][0] / r.counters["llc_load_misses"][0]
    assert t0.positive == pytest.approx(avg)
    assert t0.cycles < t0.isolated_measured


def test_fixed_latency_mode():
    c = run([([1], [0])], HwConfig(fixed_latency=True, prefetch=False))
    assert c[0, E.C_CYC] == pytest.approx(0.25 + 10 + 200)


def test_mlp_overlaps_misses_within_rob():
    # eight misses to other banks, 4 instructions apart, all in one ROB window: they overlap,
    # so the run takes far less than eight serial misses
    addrs = [k * 4096 for k in range(8)]
    c = run([([4] * 8, addrs)], HwConfig(fixed_latency=True, prefetch=False))
    assert c[0, E.C_CYC] == pytest.approx(8 + 10 + 200)


def test_stride_prefetcher_hides_stream():
    g = [8] * 400
    a = [k * 64 for k in range(400)]
    on = run([(g, a)], HwConfig())
    off = run([(g, a)], NOPF)
    assert on[0, E.C_PF] > 300
    assert on[0, E.C_CYC] < off[0, E.C_CYC]


def test_impossible_geometry_refused():
    with pytest.raises(UserError, match="impossible geometry"):
        make_config({"llc_bytes": 3 * 1024 * 1024 + 7})
    with pytest.raises(UserError, match="unknown hwsim parameter"):
        make_config({"llc_size": 1})


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(0, 1 << 22)), min_size=1, max_size=200),
    st.booleans(), st.booleans(),
)
def test_alone_no_interference(acc, fixed, pf):
    """A thread alone sees no inter-thread misses or waits: its estimate is exact (error 0)."""
    g = np.array([x[0] for x in acc])
    a = np.array([x[1] for x in acc])
    cfg = HwConfig(fixed_latency=fixed, prefetch=pf)
    r = account(from_arrays([(g, a, np.zeros(len(g), np.uint8))]), cfg)
    t = r.threads[0]
    assert t.error == 0.0
    assert t.cycles >= g.sum() / cfg.dispatch_width


def test_rule_d_charges_whole_late_prefetch_wait():
    # two streams sharing the bus: with rule (d) taken literally a load waiting for its own late
    # prefetch charges all of that wait, never less than the prefetch's own bus/bank waiting
    from scalestack.hwsim import generate

    tr = from_arrays([generate("stream", 4000, 8 << 20, gap=2, seed=s) for s in range(2)])
    a = simulate(tr, HwConfig(full_atd=True))
    b = simulate(tr, HwConfig(full_atd=True, wait_model="rule-d"))
    assert np.array_equal(a[:, E.C_CYC], b[:, E.C_CYC])  # accounting only: timing is unchanged
    assert np.all(b[:, E.C_SINTRAWAIT] >= a[:, E.C_SINTRAWAIT])
    assert b[:, E.C_SINTRAWAIT].sum() > a[:, E.C_SINTRAWAIT].sum()


def test_inter_thread_miss_queueing_to_memory_term():
    # TINY's LLC on realistic DRAM: thread 1's B, C evict A and its E closes A's row (bank 0). Thread
    # 0's re-access of A is an inter-thread miss (ATD hit) that also meets an inter-thread row
    # conflict: stall 103 = uncontended open-row miss (CAS 27 + bus 12 + LLC 10 = 49) + tRP + tRCD (54).
    # Alone it is an LLC hit hidden by the ROB, so all 103 cycles are interference either way; the
    # thesis charges them all to the LLC term, inter_wait_to_memory moves the 54 to the memory term.
    cfg = TINY.replace(fixed_latency=False)
    tr = from_arrays([([4, 4, 2000], [A, D, A], [0, 0, 0]), ([12, 1, 100], [B, C, 8 * 4096 + S], [0, 0, 0])],
                     separate=False)
    thesis, split = account(tr, cfg).threads[0], account(tr, cfg.replace(inter_wait_to_memory=True)).threads[0]
    assert thesis.cycles - thesis.isolated_measured == pytest.approx(103)
    assert (thesis.inter_miss_penalty, thesis.memory_wait) == pytest.approx((103, 0))
    assert (split.inter_miss_penalty, split.memory_wait) == pytest.approx((49, 54))
    assert split.isolated_est == pytest.approx(thesis.isolated_est) == pytest.approx(thesis.isolated_measured)
