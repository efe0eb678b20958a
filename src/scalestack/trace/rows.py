"""State rows as the compiled passes of the state builder write them: a column each, of the
state table's widths (36 bytes a row), so that a pass's output becomes a `StateTable` with no copy.
Rows are written with `emit_row`, or with `put_row`, which joins a row to the one before it where
it continues it, so that no pass needs a second table to join its rows (`builder._merge_adjacent`)."""

from __future__ import annotations

import ctypes

import numba
import numpy as np
from numba import types

from scalestack.trace.model import StateTable

# madvise(2), resolved in the running process's C library when a compiled pass is loaded
_madvise = types.ExternalFunction("madvise", types.intc(types.uintp, types.uintp, types.intc))
_MADV_DONTNEED = 4  # Linux and the BSDs
_PAGE = 4096
RELEASE_EVERY = 1 << 20  # rows a pass reads between two `give_back` calls: a few ms of work, 4-36 MB


def trim_heap() -> None:
    """Hand the C heap's free memory back to the system (glibc's malloc_trim): NumPy's arrays
    under 32 MB live in that heap, and its free pages stay counted in the process's memory (240 MB
    between two batches of a 10^8-event import). Nothing where the C library has no such call."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (AttributeError, OSError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


@numba.njit(cache=True)
def give_back(a, lo, hi):
    """Return to the system the memory pages of a[:hi] (rows of a C-contiguous array) not given
    back by an earlier call that ended at lo: a pass that has read a prefix of its source and
    reads it no more copies the source with no second copy alive (the source and its copy were
    2x the table at the peak). Only whole pages of a[:hi] go. Only for arrays the caller owns and
    drops afterwards: what is read there afterwards is zeros."""
    give_back_pages(a, lo, hi, False)


@numba.njit(cache=True)
def give_back_within(a, lo, hi):
    """`give_back` of the pages wholly within rows lo..hi of `a`: where other threads read the rows
    either side meanwhile (a page shared with them stays)."""
    give_back_pages(a, lo, hi, True)


@numba.njit(cache=True)
def give_back_pages(a, lo, hi, within):
    """`give_back` (`within`: `give_back_within`)."""
    if hi > lo:
        row = a.nbytes // a.shape[0]
        base = a.ctypes.data
        first = base + lo * row
        if within:
            p0 = (first + _PAGE - 1) // _PAGE * _PAGE
        else:
            p0 = max((base + _PAGE - 1) // _PAGE * _PAGE, first // _PAGE * _PAGE)
        p1 = (base + hi * row) // _PAGE * _PAGE
        if p1 > p0:
            _madvise(p0, p1 - p0, _MADV_DONTNEED)


@numba.njit(cache=True, inline="always")
def emit_row(out, m, slot, start, end, state, cpu, addr, waker, rep):
    """Write row m of `new_rows` columns; the next row's position."""
    out[0][m] = slot
    out[1][m] = start
    out[2][m] = end
    out[3][m] = state
    out[4][m] = cpu
    out[5][m] = addr
    out[6][m] = waker
    out[7][m] = rep
    return m + 1


@numba.njit(cache=True, inline="always")
def put_row(out, m, tid, start, end, state, cpu, addr, waker, rep):
    """`emit_row`, or join the row to row m - 1 where it continues it: same thread and state, no waker
    between (what a dropped event split; the rule of `builder._merge_adjacent`, applied as rows are
    written so that no second table is needed to join them)."""
    if (m > 0 and out[0][m - 1] == tid and out[3][m - 1] == state and out[4][m - 1] == cpu and out[5][m - 1] == addr
            and out[7][m - 1] == rep and out[6][m - 1] == -1 and out[2][m - 1] == start):
        out[2][m - 1] = end
        out[6][m - 1] = waker
        return m
    return emit_row(out, m, tid, start, end, state, cpu, addr, waker, rep)


@numba.njit(cache=True)
def new_rows(n):
    """Room for n state rows, a column each of the state table's width (36 bytes a row): tid (or
    the walk's thread slot), start, end, state, cpu, addr (uint64 bits), waker, repaired. The
    columns are views of one block: the allocator maps a block this large (over 32 MB from ~0.9 M
    rows) and unmaps it when the table is freed, where it kept 8 separate columns of up to 32 MB
    in its heap, freed but still counted in the process's memory."""
    buf = np.empty(36 * n, np.uint8)
    return (buf[24 * n: 28 * n].view(np.int32), buf[: 8 * n].view(np.int64), buf[8 * n: 16 * n].view(np.int64),
            buf[34 * n: 35 * n], buf[32 * n: 34 * n].view(np.int16), buf[16 * n: 24 * n].view(np.int64),
            buf[28 * n: 32 * n].view(np.int32), buf[35 * n:].view(np.bool_))


@numba.njit(cache=True)
def rows_cut(out, a, b):
    """Rows a..b of `new_rows` (views)."""
    return (out[0][a:b], out[1][a:b], out[2][a:b], out[3][a:b], out[4][a:b], out[5][a:b], out[6][a:b], out[7][a:b])


@numba.njit(cache=True)
def rows_copy(rows):
    """`new_rows` columns holding a copy of `rows` (views of a bigger block, which may then go)."""
    n = rows[0].shape[0]
    out = new_rows(n)
    for k in range(n):
        emit_row(out, k, rows[0][k], rows[1][k], rows[2][k], rows[3][k], rows[4][k], rows[5][k], rows[6][k], rows[7][k])
    return out


@numba.njit(cache=True)
def rows_grown(out, m, n):
    """The first m rows of `new_rows` in room for n."""
    grown = new_rows(n)
    grown[0][:m] = out[0][:m]
    grown[1][:m] = out[1][:m]
    grown[2][:m] = out[2][:m]
    grown[3][:m] = out[3][:m]
    grown[4][:m] = out[4][:m]
    grown[5][:m] = out[5][:m]
    grown[6][:m] = out[6][:m]
    grown[7][:m] = out[7][:m]
    return grown


def state_table(rows) -> StateTable:
    """The StateTable of `new_rows` columns (no copy)."""
    tid, start, end, state, cpu, addr, waker, rep = rows
    return StateTable(tid=tid, start_ns=start, end_ns=end, state=state, cpu=cpu, addr=addr.view(np.uint64), waker=waker,
                      repaired=rep)
