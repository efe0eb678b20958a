"""Set membership, distinct values and ordering of integer event columns (tids, CPUs, kinds) in one
compiled pass over a table, where NumPy would sort every event: the state builder's helpers for
recordings of 10^7 events and more."""

from __future__ import annotations

import numba
import numpy as np


def member(x: np.ndarray, values) -> np.ndarray:
    """`np.isin(x, values)` for integer columns and a set of small non-negative integers (tids,
    kinds, futex operations): one lookup table and one compiled pass instead of a sort of `x`."""
    v = np.asarray(values, dtype=np.int64).ravel()
    if len(v) == 0:
        return np.zeros(len(x), bool)
    if int(v.min()) < 0 or int(v.max()) > 1 << 24 or x.dtype.kind not in "iu":
        return np.isin(x, v)
    table = np.zeros(int(v.max()) + 1, np.bool_)
    table[v] = True
    return _member(x.astype(np.int64, copy=False), table)  # one compiled signature


@numba.njit(cache=True)
def _member(x, table):
    out = np.zeros(x.shape[0], np.bool_)
    n = table.shape[0]
    for i in range(x.shape[0]):
        v = x[i]
        if v >= 0 and v < n:
            out[i] = table[v]
    return out


def stable_order_by(key: np.ndarray, n_keys: int) -> np.ndarray:
    """`np.argsort(key, kind="stable")` for keys in [0, n_keys): a counting sort, one pass."""
    return _counting_order(np.ascontiguousarray(key, dtype=np.int64), n_keys)


@numba.njit(cache=True)
def _counting_order(key, n_keys):
    off = np.zeros(n_keys + 1, np.int64)
    for i in range(key.shape[0]):
        off[key[i] + 1] += 1
    for k in range(n_keys):
        off[k + 1] += off[k]
    out = np.empty(key.shape[0], np.int64)
    for i in range(key.shape[0]):
        out[off[key[i]]] = i
        off[key[i]] += 1
    return out


def unique_first(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(x, return_index=True)` (sorted distinct values, index of each one's first
    occurrence) for integer columns of small non-negative values such as tids: one compiled pass
    over a table instead of a stable sort of `x`."""
    if len(x) == 0 or x.dtype.kind not in "iu" or int(x.min()) < 0 or int(x.max()) > 1 << 24:
        return np.unique(x, return_index=True)
    first = _first_index(x.astype(np.int64, copy=False), int(x.max()) + 1)
    values = np.flatnonzero(first >= 0)
    return values.astype(x.dtype), first[values]


@numba.njit(cache=True)
def _first_index(x, n):
    first = np.full(n, -1, np.int64)
    for i in range(x.shape[0]):
        if first[x[i]] < 0:
            first[x[i]] = i
    return first
