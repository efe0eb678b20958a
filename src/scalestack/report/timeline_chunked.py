"""The report's interactive timeline (`timeline.timeline_data`) of a stored trace, read one time
chunk at a time: its page data is bounded, the whole trace is not (10^8 events: 2.1 GB peak
whole, 0.45 GB in chunks of `CHUNK_ROWS`, and 7.9 s instead of 10.3 s).

The windows [a, b) of `chunked.plan` tile the trace's [start, end). Each part of the output is
made so that it equals the whole trace's:

- The criticality strip at an instant depends only on the intervals there, so the strip of the
  intervals clipped to [a, b) is the whole strip's restriction to [a, b); the kernels carry the
  last segment across the edge, where it grows on if the next window starts with the same r and
  lone lane (as `_strip` merges equal neighbours), and the summary's open bucket with it.
- Each state row belongs to one window, where it starts (`_owned`), so each lane's rows come in
  time order, window after window: gathered as they are (≤ `MAX_DETAIL` rows), or fed to the
  lane's own `_coarsen` state carried across windows.

A first pass counts the strip's segments, when the choice between the two depends on them (a
trace with no more state rows than `MAX_DETAIL`).
"""

from __future__ import annotations

import os
from typing import Any

import numba
import numpy as np

from scalestack.analysis.chunked import CHUNK_ROWS, Progress, _chunks, _stored_range, plan
from scalestack.analysis.criticality import critical_intervals
from scalestack.errors import UserError
from scalestack.report import timeline
from scalestack.report.timeline import (
    _coarsen_end,
    _coarsen_more,
    _merged_strip,
    _merged_strip_coarse,
    _thread_blocks,
    coarse_state,
    detail_width,
    lane_order,
    lanes_of_rows,
    strip_carry,
    strip_coarse_carry,
    strip_inputs,
    strip_of_keys,
    summary_columns,
    timeline_payload,
)
from scalestack.trace import NameTable, StateTable, Trace
from scalestack.trace.store import group_ranges, load_threads

_LOWEST, _HIGHEST = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def timeline_data_stored(path: str | os.PathLike, options: Any = None, marks: list[dict] | None = None, *,
                         max_rows: int = CHUNK_ROWS, progress: Progress | None = None) -> dict[str, Any]:
    """`timeline_data(scalestack.load(path), options, marks)`, the same payload and summary, holding
    one chunk of about `max_rows` rows at a time besides the page's arrays. `progress(done, total)`
    after each chunk read (twice as many when the segments are counted first)."""
    group_by = getattr(options, "group_by", None)
    active = getattr(options, "active", "running")
    threads, meta = load_threads(path)
    t0, t1 = _stored_range(path, meta)
    order, groups = lane_order(Trace(threads, StateTable.empty(), NameTable.empty(), meta), group_by)
    lane_of_row = lanes_of_rows(order)
    n_states = int(group_ranges(path, "states")[0].sum())
    spans = int(group_ranges(path, "switch_spans")[0].sum()) > 0  # as the whole trace's `critical_intervals`
    windows = plan(path, t0, t1, max_rows) or [(t0, t1)]
    limit = timeline.MAX_DETAIL
    # beyond `limit` state rows the summary's width follows from the span and lanes alone
    counting = n_states <= limit
    total = len(windows) * (2 if counting else 1)
    n_segments = 0
    if counting:
        carry = strip_carry()
        empty = tuple(np.empty(0, np.int64) for _ in range(4))
        for _, a, b, part in _parts(path, windows, progress, 0, total):
            n_segments = int(_merged_strip(*_strip_of(part, active, a, b, spans, lane_of_row), *empty, False, carry))
            del part
    width = detail_width(t1 - t0, n_states + n_segments, len(order), limit)
    if width:
        strip: Any = _CoarseStrip(t0, t1, width)
        lanes: Any = _CoarseLanes(len(order), t0, width)
    else:
        strip, lanes = _Segments(n_segments), _GatheredLanes(len(order))
    done = total - len(windows)
    for k, a, b, part in _parts(path, windows, progress, done, total):
        strip.add(_strip_of(part, active, a, b, spans, lane_of_row), k == len(windows) - 1)
        st, lo, hi = _thread_blocks(part)
        a_own = _LOWEST if k == 0 else a  # rows outside the trace's range (none in a valid one) count once too
        b_own = _HIGHEST if k == len(windows) - 1 else b
        lo, hi = _owned_rows(st.start_ns, st.end_ns, lo[order], hi[order], a_own, b_own)
        lanes.add(st, lo, hi)
        del part, st
    cols, lo, hi = lanes.result()
    return timeline_payload(threads, order, groups, t0, t1 - t0, cols, lo, hi, strip.result(), width, n_states, marks)


def _parts(path, windows: list[tuple[int, int]], progress: Progress | None, done: int, total: int):
    """`chunked._chunks`, counted on from `done` of `total` (the first pass, if any, counted first)."""
    return _chunks(path, windows, None if progress is None else lambda k, _n: progress(done + k, total))


def _strip_of(part: Trace, active: str, a: int, b: int, spans: bool, lane_of_row: np.ndarray) -> tuple:
    """The strip kernels' input for window [a, b): the part's intervals clipped to it."""
    return strip_inputs(critical_intervals(part, active, a, b, spans)[1], lane_of_row, a, b)


@numba.njit(cache=True)
def _owned(start, end, lo, hi, a, b, out_lo, out_hi):
    """Each lane's rows [lo, hi) (time order) narrowed to those the window [a, b) keeps: the rows
    starting in it, but an empty row (start == end) belongs to the window before its start, which
    reads it for sure (its row group may end at the window's start and not be read by this one).
    Returns the first lane whose kept rows are not one run (-1: none)."""
    for k in range(lo.shape[0]):
        first, last, n = hi[k], hi[k], 0
        for i in range(lo[k], hi[k]):
            key = start[i] - 1 if end[i] <= start[i] else start[i]
            if a <= key < b:
                if n == 0:
                    first = i
                last = i + 1
                n += 1
        if n > 0 and last - first != n:
            return k
        out_lo[k], out_hi[k] = first, first + n
    return -1


def _owned_rows(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray, a: int, b: int
                ) -> tuple[np.ndarray, np.ndarray]:
    out_lo, out_hi = np.empty(len(lo), np.int64), np.empty(len(lo), np.int64)
    if _owned(start, end, lo.astype(np.int64), hi.astype(np.int64), a, b, out_lo, out_hi) >= 0:
        # an empty row after a longer one starting at the same time: whole, they would stay in that order
        raise UserError("a thread's state rows are out of order (an empty interval after a longer one at the same "
                        "start); read the trace whole (scalestack.load)")
    return out_lo, out_hi


class _Segments:
    """The strip's segments one by one, filled window after window (`n`: their count, from the first pass)."""

    def __init__(self, n: int):
        self.out = tuple(np.empty(n, np.int64) for _ in range(4))
        self.carry = strip_carry()

    def add(self, inputs: tuple, last: bool) -> None:
        _merged_strip(*inputs, *self.out, True, self.carry)

    def result(self) -> tuple[np.ndarray, ...]:
        return self.out


class _CoarseStrip:
    """The strip summarised per `width` ns, as `CriticalStrip.coarse` does, window after window."""

    def __init__(self, t0: int, t1: int, width: int):
        self.lo, self.width = t0, width
        cap = max(int((t1 - t0) // width), 0) + 6  # one summary row at most begins in each bucket
        self.out = tuple(np.empty(cap, np.int64) for _ in range(3))
        self.carry = strip_coarse_carry()
        self.n = 0

    def add(self, inputs: tuple, last: bool) -> None:
        self.n = int(_merged_strip_coarse(*inputs, self.lo, self.width, *self.out, *self.carry, last))

    def result(self) -> tuple[np.ndarray, ...]:
        return strip_of_keys(*(x[:self.n] for x in self.out))


class _GatheredLanes:
    """Every lane's rows as they are: copies of each window's, joined in lane order at the end
    (the page's columns, as `timeline_data` reads them from the states)."""

    def __init__(self, n_lanes: int):
        self.parts: list[list[list[np.ndarray]]] = [[] for _ in range(n_lanes)]

    def add(self, st, lo: np.ndarray, hi: np.ndarray) -> None:
        cols = [st.start_ns, st.end_ns, st.state, st.cpu, st.addr, st.waker]
        for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            if b > a:
                self.parts[k].append([c[a:b].copy() for c in cols])

    def result(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        empty = StateTable.empty()
        cols = [np.concatenate([c] + [p[j] for lane in self.parts for p in lane])
                for j, c in enumerate([empty.start_ns, empty.end_ns, empty.state, empty.cpu, empty.addr, empty.waker])]
        off = np.r_[0, np.cumsum([sum(len(p[0]) for p in lane) for lane in self.parts])].astype(np.int64)
        return cols, off[:-1], off[1:]


class _CoarseLanes:
    """Every lane summarised by `_coarsen` as in `timeline.coarsen`, its state carried from window to
    window, each lane's summary in its own buffer (grown as needed), joined in lane order at the end."""

    def __init__(self, n_lanes: int, t0: int, width: int):
        self.lo, self.width = t0, width
        self.out = [tuple(np.empty(0, np.int64) for _ in range(3)) for _ in range(n_lanes)]
        self.n = [0] * n_lanes
        self.state = [coarse_state() for _ in range(n_lanes)]

    def add(self, st, lo: np.ndarray, hi: np.ndarray) -> None:
        for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            if b <= a:
                continue
            s, e = st.start_ns[a:b], st.end_ns[a:b]
            # rows a call may add: one a bucket its rows touch, but at most three a row, and the open one
            buckets = max(int(e.max()) - int(s.min()), 0) // self.width + 2
            need = self.n[k] + min(3 * (b - a), buckets) + 2
            if need > len(self.out[k][0]):
                self.out[k] = tuple(np.r_[x[:self.n[k]], np.empty(max(need, 2 * len(x)) - self.n[k], np.int64)]
                                    for x in self.out[k])
            self.n[k] = int(_coarsen_more(s, e, st.state[a:b], self.lo, self.width, *self.out[k], self.n[k], 0,
                                          *self.state[k]))

    def result(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        for k in range(len(self.out)):
            if self.state[k][2][0] > 0 and self.n[k] + 1 > len(self.out[k][0]):
                self.out[k] = tuple(np.r_[x[:self.n[k]], np.empty(1, np.int64)] for x in self.out[k])
            self.n[k] = int(_coarsen_end(*self.out[k], self.n[k], 0, *self.state[k]))
        counts = np.asarray(self.n, np.int64)
        off = np.r_[0, np.cumsum(counts)].astype(np.int64)
        joined = [np.empty(int(off[-1]), np.int64) for _ in range(3)]
        for k in range(len(self.out)):
            for j in range(3):
                joined[j][off[k]:off[k + 1]] = self.out[k][j][:self.n[k]]
            self.out[k] = ()  # each lane's buffers go as they are copied
        return summary_columns(*joined), off[:-1], off[1:]
