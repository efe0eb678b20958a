"""Reading a big recording a window at a time, on every core, into rows in time order.

The readers of perf.data files and of the eBPF collector's record file share the plan: a first
pass notes each event's time, one stable sort gives every event its row (`rank_by_time`), and a
second pass decodes the windows straight into those rows on several threads
(`trace.parallel.on_threads`), each interning strings in its own `Strings` table, merged at the
end (`shared_strings`). Memory holds the events and one window per thread: never the file, never
a sorted copy of a column (on a VM, freshly touched memory costs about a second per GB, as much
as the decoding).
"""

from __future__ import annotations

import mmap
import os

import numba
import numpy as np

from scalestack.ingest.tracepoint import Strings

# events a window of a recording too big to hold has (~55 MB of events, ~40 MB of the walk's rows);
# a recording of more than STREAM_EVENTS (~0.9 GB of events held whole) is read in such windows
# and its trace built pass by pass (`trace.streaming`)
WINDOW_EVENTS = 1 << 20
STREAM_EVENTS = 1 << 24


def streamed(events: int, chunk_rows: int | None) -> int | None:
    """The window size to read a recording of `events` events in, or None to read it whole:
    windows of `chunk_rows` above 4 `chunk_rows` (0: never), by default WINDOW_EVENTS above
    STREAM_EVENTS."""
    rows = WINDOW_EVENTS if chunk_rows is None else int(chunk_rows)
    above = STREAM_EVENTS if chunk_rows is None else 4 * rows
    return rows if rows > 0 and events > above else None


@numba.njit(cache=True, nogil=True)
def _rank_of(order, rank):
    for i in range(order.shape[0]):
        rank[order[i]] = i


def rank_by_time(t: np.ndarray) -> np.ndarray:
    """Each event's row in time order (ties keep input order), written over `t`; an empty array
    when `t` is already in order (row j is event j)."""
    if len(t) < 2 or bool(np.all(t[1:] >= t[:-1])):
        return np.empty(0, np.int64)
    order = np.argsort(t, kind="stable")
    _rank_of(order, t)
    return t


MAP_BYTES = 1 << 20  # the fewest bytes worth a mapping (below, a copy costs less)


def readonly(buf: np.ndarray) -> np.ndarray:
    """`buf` as a read-only array (a view if it was writable). numba compiles a decoder apart for
    writable and read-only bytes (~45 s each for perf.data's on a slow core): a mapping and
    `bytes` are read-only, a scratch buffer is not; the decoders get one kind."""
    if buf.flags.writeable:
        buf = buf.view()
        buf.flags.writeable = False
    return buf


def mapped(fd: int, pos: int, n: int) -> np.ndarray:
    """Bytes pos .. pos + n - 1 of the open file `fd`, mapped read-only: page-cache pages, never
    copied nor freshly allocated. The caller makes sure the file holds them (past its end, a
    mapping faults when read)."""
    base = pos - pos % mmap.ALLOCATIONGRANULARITY
    return np.frombuffer(mmap.mmap(fd, pos + n - base, prot=mmap.PROT_READ, offset=base), np.uint8)[pos - base:]


def thread_count(windows: int, threads: int | None) -> int:
    """One thread per CPU this process may use (or `threads`), no more than there are windows."""
    return max(1, min(threads or len(os.sched_getaffinity(0)), windows, 16))


@numba.njit(cache=True, nogil=True)
def _relabel(col, lut):
    for r in range(col.shape[0]):
        c = col[r]
        if c >= 0:
            col[r] = lut[c]


def shared_strings(tables: list[Strings], *cols: np.ndarray) -> list[str]:
    """One string table from the threads' own. Thread k of n wrote its string i as i * n + k;
    the ids in `cols` are mapped in place to the shared table's."""
    if len(tables) == 1:
        return tables[0].decoded()
    shared: dict[str, int] = {}
    own = [table.decoded() for table in tables]
    lut = np.full(max(1, max(len(s) for s in own)) * len(tables), -1, np.int32)
    for k, strings in enumerate(own):
        for i, s in enumerate(strings):
            lut[i * len(tables) + k] = shared.setdefault(s, len(shared))
    for col in cols:
        _relabel(col, lut)
    return list(shared)
