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
    return _member(x, table)


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
    return _buckets(np.ascontiguousarray(key, dtype=np.int64), n_keys, np.int64)[1]


def order_by_key_then(key: np.ndarray, n_keys: int, t: np.ndarray) -> np.ndarray:
    """The order of `np.lexsort((t, key))` for keys in [0, n_keys): a counting sort by key is
    enough when each key's rows come in `t` order (the walks emit them so, almost always); the full
    sort otherwise."""
    order = stable_order_by(key, n_keys)
    if _in_order_within(key, t, order):
        return order
    return np.lexsort((t, key))


@numba.njit(cache=True)
def _in_order_within(key, t, order):
    for i in range(1, order.shape[0]):
        if key[order[i]] == key[order[i - 1]] and t[order[i]] < t[order[i - 1]]:
            return False
    return True


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


def row_dtype(n: int):
    """The width of row numbers into n rows: int32 where they fit (half the memory), else int64.
    Passes given rows from several places get this one width, so numba compiles each once."""
    return np.int32 if n < 2**31 - 1 else np.int64


class EventIndex:
    """Time-sorted events' rows by kind and by CPU: what every pass of the state builder asks of all
    the events, computed once per build (each pass used to mask, sort or bucket all of them again).
    Only the rows of rare kinds (each under 1/64 of the events: forks, side-band records) are kept,
    where the rows of every event took 4 bytes an event for the whole build; a common kind's rows
    are found by one compiled pass when asked for. By-CPU buckets are built on first use. An
    event's context task is not kept either: compiled passes read `events.context_of`."""

    def __init__(self, events):
        self.events = events
        n = len(events)
        self.idx_dtype = row_dtype(n)
        self._counts = _kind_counts(events.kind)
        self._rare = np.zeros(256, np.bool_)
        self._rare[64 * self._counts < n] = True
        self._rare_rows = _rows_of(events.kind, self._rare, int(self._counts[self._rare].sum()),
                                   np.zeros(0, self.idx_dtype))

    def count(self, *kinds) -> int:
        """How many events are of these kinds."""
        return int(sum(self._counts[k] for k in set(kinds)))

    def rows(self, *kinds) -> np.ndarray:
        """The rows of the events of these kinds, in time order."""
        if all(self._rare[k] for k in kinds):
            return self._rare_rows[member(self.events.kind[self._rare_rows], [int(k) for k in kinds])]
        table = np.zeros(256, np.bool_)
        table[list(kinds)] = True
        return _rows_of(self.events.kind, table, self.count(*kinds), np.zeros(0, self.idx_dtype))


@numba.njit(cache=True)
def _kind_counts(kind):
    """Events of each kind (`np.bincount(kind, minlength=256)` with no wider copy of the column)."""
    out = np.zeros(256, np.int64)
    for i in range(kind.shape[0]):
        out[kind[i]] += 1
    return out


@numba.njit(cache=True)
def _rows_of(kind, table, n, like):
    """The rows whose kind is in `table`, in order: one pass (n of them)."""
    out = np.empty(n, like.dtype)
    m = 0
    for i in range(kind.shape[0]):
        if table[kind[i]]:
            out[m] = i
            m += 1
    return out


def _buckets(key: np.ndarray, n_keys: int, idx_dtype) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by key in [0, n_keys), in row order within a key: (offsets, rows)."""
    return _bucket_compiled(key, n_keys, np.zeros(0, idx_dtype))


@numba.njit(cache=True)
def _bucket_compiled(key, n_keys, like):
    off = np.zeros(n_keys + 1, np.int64)
    for i in range(key.shape[0]):
        off[key[i] + 1] += 1
    for k in range(n_keys):
        off[k + 1] += off[k]
    rows = np.empty(key.shape[0], like.dtype)
    fill = off[:-1].copy()
    for i in range(key.shape[0]):
        rows[fill[key[i]]] = i
        fill[key[i]] += 1
    return off, rows


@numba.njit(cache=True, inline="always")
def find_sorted(sorted_values, v):
    """The position of v in sorted_values, or -1 (compiled code's set membership)."""
    lo, hi = 0, sorted_values.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_values[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < sorted_values.shape[0] and sorted_values[lo] == v else -1


@numba.njit(cache=True, inline="always")
def _run_before(a, b, head_t, head_k):
    if head_t[a] != head_t[b]:
        return head_t[a] < head_t[b]
    if head_k[a] != head_k[b]:
        return head_k[a] < head_k[b]
    return a < b


@numba.njit(cache=True, inline="always")
def sift_runs(heap, size, at, head_t, head_k):
    """Move heap[at] down to its place in a min-heap of sorted runs (ids, numbered in row order)
    keyed by their next event: (head_t, head_k, id), i.e. time, then kind, then row order. Merging
    a table's per-thread runs so gives its events in time order without sorting (or storing) them."""
    while True:
        c = 2 * at + 1
        if c >= size:
            return
        if c + 1 < size and _run_before(heap[c + 1], heap[c], head_t, head_k):
            c += 1
        if not _run_before(heap[c], heap[at], head_t, head_k):
            return
        heap[at], heap[c] = heap[c], heap[at]
        at = c


def state_sums(tid, start, end, state, sorted_tids, rows, n_states) -> np.ndarray | None:
    """`np.bincount(row * n_states + state, weights=end - start)` over a state table (row: each tid's
    row, from sorted_tids and rows), the same float sums in the same order, without its four
    per-interval temporaries (+88 MB for 2.9 M states); None where a tid is not in sorted_tids or
    a state is n_states or more (the NumPy statement then says what is wrong)."""
    sums, ok = _state_sums(tid, start, end, state, sorted_tids, rows, n_states)
    return sums if ok else None


@numba.njit(cache=True)
def _state_sums(tid, start, end, state, sorted_tids, rows, n_states):
    sums = np.zeros(rows.shape[0] * n_states)
    k = -1
    for i in range(tid.shape[0]):
        if i == 0 or tid[i] != tid[i - 1]:
            p = find_sorted(sorted_tids, tid[i])
            if p < 0:
                return sums, False
            k = rows[p]
        if state[i] >= n_states:
            return sums, False
        sums[k * n_states + state[i]] += float(end[i] - start[i])
    return sums, True


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values. np.unique's hash path (NumPy >= 2.3) is 10-20x slower than a sort
    on int64 timestamps (20 s for 75 M phase starts); tids (small, non-negative) need no sort."""
    if len(x) and x.dtype.kind in "iu" and int(x.min()) >= 0 and int(x.max()) <= 1 << 24:
        return unique_first(x)[0]
    s = np.sort(x)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s
