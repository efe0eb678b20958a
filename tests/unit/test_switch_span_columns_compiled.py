"""The compiled finish of the switch-span pass (clip to the window, drop the empty, order by thread)
against the NumPy statements it replaces, on random span rows; given back as it reads them or not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.trace.lookup import order_by_key_then
from scalestack.trace.switch_spans import _clipped_by_thread


def reference(out, t0, t1, tids):
    """What `switch_spans` did with `_spans`' rows (a table of slot, start, end, repaired), and
    then the table its tids (int32)."""
    a, b = np.maximum(out[:, 1], t0), np.minimum(out[:, 2], t1)
    ok = b > a
    slot, a, b = out[ok, 0], a[ok], b[ok]
    order = order_by_key_then(slot, len(tids), a)
    return tids[slot[order]].astype(np.int32), a[order], b[order], out[ok, 3][order].astype(bool)


def finished(out, t0, t1, tids, release):
    cols = (out[:, 0].astype(np.int32), out[:, 1].copy(), out[:, 2].copy(), out[:, 3].astype(bool))
    tid, a, b, rep, in_order = _clipped_by_thread(cols, t0, t1, tids, release)
    if not in_order:
        order = np.lexsort((a, tid))
        tid, a, b, rep = tid[order], a[order], b[order], rep[order]
    return tid, a, b, rep


def rows(rng, n, n_slots, spread):
    start = rng.integers(0, spread, n)
    return np.stack([rng.integers(0, n_slots, n), start, start + rng.integers(0, 9, n), rng.integers(0, 2, n)],
                    axis=1).astype(np.int64)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 40), st.integers(0, 40), st.integers(1, 40), st.booleans())
def test_compiled_finish_is_the_numpy_statements(seed, n, t0, width, sorted_starts):
    rng = np.random.default_rng(seed)
    out = rows(rng, n, 3, 50)
    if sorted_starts:  # the usual case: each thread's spans written in start order
        out = out[np.argsort(out[:, 1], kind="stable")]
    tids = np.array([100, 101, 250], np.int64)
    want = reference(out, t0, t0 + width, tids)
    got = finished(out, t0, t0 + width, tids, 0)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3000), st.booleans())
def test_giving_the_rows_back_changes_nothing(seed, release, sorted_starts):
    """Given back every `release` rows as they are read (`switch_spans` drops them afterwards): the
    same columns, so no row is read after its memory went back (it would read zeros)."""
    rng = np.random.default_rng(seed)
    out = rows(rng, 30_000, 4, 10**6)
    if sorted_starts:
        out = out[np.argsort(out[:, 1], kind="stable")]
    tids = np.array([7, 8, 9, 12], np.int64)
    want = reference(out, 1000, 10**6 - 1000, tids)
    got = finished(out, 1000, 10**6 - 1000, tids, release)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
