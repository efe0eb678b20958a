"""advice's per-futex and per-state sums in compiled passes equal the NumPy statements they
replace (np.unique of the waits' addresses with bincounts; masked duration sums)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis import advice
from scalestack.trace import StateTable

rows_st = st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**9), st.integers(0, 5),
                             st.sampled_from([0, 0x1000, 0x2040, 2**63 + 8, 2**64 - 8] + list(range(8, 200, 8))),
                             st.booleans()), max_size=80)


def _table(rows):
    n = len(rows)
    start = np.array([a for a, *_ in rows], np.int64)
    return StateTable(tid=np.ones(n, np.int32), start_ns=start, end_ns=start + np.array([d for _, d, *_ in rows], np.int64),
                      state=[s for *_, s, _, _ in rows], cpu=np.full(n, -1), addr=np.array([a for *_, a, _ in rows], np.uint64),
                      waker=np.full(n, -1), repaired=np.zeros(n, bool))


@settings(max_examples=200, deadline=None)
@given(rows_st)
def test_wait_sums_per_futex_are_unique_and_bincounts(rows):
    """WaitSums.by_addr of all groups equals np.unique of the SYNC_WAIT rows' futexes with bincounts."""
    t = _table(rows)
    mask = t.state == 2
    addrs, inv = np.unique(t.addr[mask], return_inverse=True)
    sums = advice.WaitSums.of(t, np.array([1]))
    got_addrs, got_n, got_ns = sums.by_addr(np.ones(len(sums.tid), bool))
    assert np.array_equal(got_addrs, addrs.astype(np.uint64))
    assert np.array_equal(got_n, np.bincount(inv, minlength=len(addrs)))
    assert np.array_equal(got_ns, np.bincount(inv, weights=(t.end_ns[mask] - t.start_ns[mask]), minlength=len(addrs)))


@settings(max_examples=100, deadline=None)
@given(rows_st, st.integers(0, 5))
def test_state_ns_is_the_masked_sum(rows, state):
    t = _table(rows)
    m = t.state == state
    assert advice.state_ns(t, state) == int((t.end_ns[m] - t.start_ns[m]).sum())
