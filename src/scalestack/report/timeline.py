"""The interactive timeline of report.html: its data, packed small, and the page fragment.

One lane per thread, grouped by role and pool (the thread name without its trailing number:
``worker-1`` and ``worker-2`` are pool ``worker``), each lane the thread's state intervals; above
them the criticality strip: at each instant the thread that ran alone (the one the program waited
for, Du Bois et al.'s criticality undivided) or how many shared the CPUs.

The intervals travel as typed arrays (durations, state, CPU, wait object, waker), gzip-compressed
and base64-encoded inside the page, so 10^6 intervals take a few MB and nothing is fetched; the
page's script (`timeline.js`, inlined) unpacks them with the browser's DecompressionStream and
draws on a canvas, aggregating the intervals under each pixel column when zoomed out.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from importlib import resources
from typing import Any

import numba
import numpy as np

from scalestack.analysis.criticality import _point, merge_heap
from scalestack.report.deflate import ParallelGzip
from scalestack.trace import STATE_NAMES, Trace
from scalestack.trace.lookup import find_sorted, sift_runs
from scalestack.units import format_ns

ROLE_ORDER = {"main": 0, "app": 1, "": 2, "runtime": 3, "jit": 4, "gc": 5}
MAX_MARKS = 20000


def pool_name(name: str) -> str:
    """A thread's pool: its name without a trailing number (``GC Thread#3`` -> ``GC Thread``)."""
    base = re.sub(r"[\s#_\-.:/]*\d+$", "", str(name))
    return base or str(name)


def lane_order(trace: Trace, group_by=None) -> tuple[np.ndarray, list[str]]:
    """Thread rows in lane order and each lane's group label: role and pool (``app · worker``; threads
    alone in their pool are grouped by role only), or `group_by`'s groups. Groups go main, app, other
    roles, runtime, JIT, GC, each by its first thread's start."""
    th = trace.threads
    n = len(th)
    if group_by is not None:
        from scalestack.analysis.bottle import group_labels

        gidx, labels, _ = group_labels(trace, group_by)
        group = [labels[g] for g in gidx]
    else:  # a pool of one joins its role's other lone threads
        pools = [(str(th.role[i]) or "thread", pool_name(th.name[i])) for i in range(n)]
        size: dict[tuple[str, str], int] = {}
        for p in pools:
            size[p] = size.get(p, 0) + 1
        group = [f"{r} · {p}" if size[(r, p)] > 1 else r for r, p in pools]
    first_start: dict[str, int] = {}
    for i in range(n):
        g = group[i]
        first_start[g] = min(first_start.get(g, int(th.start_ns[i])), int(th.start_ns[i]))
    roles = {group[i]: ROLE_ORDER.get(str(th.role[i]), 2) for i in range(n)}
    order = sorted(range(n), key=lambda i: (roles[group[i]], first_start[group[i]], group[i],
                                            int(th.start_ns[i]), int(th.tid[i])))
    return np.asarray(order, dtype=np.int64), [group[i] for i in order]


def _durations(d: np.ndarray) -> tuple[np.ndarray, str]:
    """Durations as uint32 ns when they fit (they compress well), else float64."""
    if len(d) == 0 or int(d.max()) < 2**32:
        return d.astype("<u4"), "u32"
    return d.astype("<f8"), "f64"


MAX_DETAIL = 4_000_000  # intervals and strip segments a page carries one by one (about 30 MB); beyond, summarised


@numba.njit(cache=True)
def _coarsen(starts, ends, keys, lo, width, out_s, out_e, out_k, n_out):
    """One lane's segments (sorted, not overlapping) summarised per bucket [lo + b * width, ...):
    each bucket shows the key that covered most of it; runs of buckets wholly inside one segment
    stay one segment, and equal neighbours merge. Appends to out_* from n_out; returns the new
    count. Up to 64 distinct keys per bucket are weighed (a lane has at most 8 states). Never
    merges into the rows before n_out (the previous lane's: a lane starting where the one before
    it ended, in the same state, lost its rows to it)."""
    first = n_out
    acc_k, acc_d, state = coarse_state()
    n_out = _coarsen_more(starts, ends, keys, lo, width, out_s, out_e, out_k, n_out, first, acc_k, acc_d, state)
    return _coarsen_end(out_s, out_e, out_k, n_out, first, acc_k, acc_d, state)


@numba.njit(cache=True)
def coarse_state():
    """A fresh `_coarse_step` state: the keys weighed in the open bucket, their ns, and (keys
    weighed, open bucket, the stretch they covered)."""
    return np.empty(64, np.int64), np.zeros(64, np.int64), np.array([0, -1, 0, 0], np.int64)


@numba.njit(cache=True)
def _coarsen_more(starts, ends, keys, lo, width, out_s, out_e, out_k, n_out, first, acc_k, acc_d, state):
    """`_coarsen` of more of a lane's segments, its state carried in (acc_k, acc_d, state): a lane
    read in time chunks is summarised as if whole. Returns the new count; the last row may still
    grow."""
    n_acc, cur, cov_s, cov_e = state[0], state[1], state[2], state[3]
    for i in range(starts.shape[0]):
        n_out, n_acc, cur, cov_s, cov_e = _coarse_step(starts[i], ends[i], keys[i], lo, width, out_s, out_e, out_k,
                                                       n_out, first, acc_k, acc_d, n_acc, cur, cov_s, cov_e)
    state[0], state[1], state[2], state[3] = n_acc, cur, cov_s, cov_e
    return n_out


@numba.njit(cache=True)
def _coarsen_end(out_s, out_e, out_k, n_out, first, acc_k, acc_d, state):
    """The lane's open bucket, once no segment follows."""
    if state[0] > 0:
        n_out = _emit(out_s, out_e, out_k, n_out, state[2], state[3], acc_k, acc_d, state[0], first)
        state[0] = 0
    return n_out


@numba.njit(cache=True, inline="always")
def _coarse_step(s, e, k, lo, width, out_s, out_e, out_k, n_out, first, acc_k, acc_d, n_acc, cur, cov_s, cov_e):
    """`_coarsen` of one more segment [s, e) with key k, after the lane's earlier ones (its state:
    the keys weighed in the open bucket `cur`, their ns, and the stretch they covered); one exit."""
    while s < e:
        b = (s - lo) // width
        bs = lo + b * width
        be = bs + width
        if b != cur and n_acc > 0:  # a gap since the last bucket: close it
            n_out = _emit(out_s, out_e, out_k, n_out, cov_s, cov_e, acc_k, acc_d, n_acc, first)
            n_acc = 0
        cur = b
        if s == bs and e >= be and n_acc == 0:  # whole buckets in this one segment
            full = (e - bs) // width
            n_out = _put(out_s, out_e, out_k, n_out, bs, bs + full * width, k, first)
            s = bs + full * width
            continue
        stop = min(e, be)
        if n_acc == 0:
            cov_s = s
        cov_e = stop
        j = 0
        while j < n_acc and acc_k[j] != k:
            j += 1
        if j == n_acc and n_acc < 64:
            acc_k[j] = k
            acc_d[j] = 0
            n_acc += 1
        if j < n_acc:
            acc_d[j] += stop - s
        s = stop
        if s == be:
            n_out = _emit(out_s, out_e, out_k, n_out, cov_s, cov_e, acc_k, acc_d, n_acc, first)
            n_acc = 0
    return n_out, n_acc, cur, cov_s, cov_e


@numba.njit(cache=True, inline="always")
def _emit(out_s, out_e, out_k, n_out, s, e, acc_k, acc_d, n_acc, first):
    best = 0
    for j in range(1, n_acc):
        if acc_d[j] > acc_d[best]:
            best = j
    return _put(out_s, out_e, out_k, n_out, s, e, acc_k[best], first)


@numba.njit(cache=True, inline="always")
def _put(out_s, out_e, out_k, n_out, s, e, k, first):
    if n_out > first and out_k[n_out - 1] == k and out_e[n_out - 1] == s:
        out_e[n_out - 1] = e
        return n_out
    out_s[n_out] = s
    out_e[n_out] = e
    out_k[n_out] = k
    return n_out + 1


def coarsen(lane_off: np.ndarray, starts: np.ndarray, ends: np.ndarray, keys: np.ndarray, lo: int, width: int,
            rows_lo: np.ndarray | None = None, rows_hi: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every lane (rows lane_off[k]:lane_off[k + 1], or rows_lo[k]:rows_hi[k] of the columns when
    given: no reordered copy of them) summarised by `_coarsen` with buckets of `width` ns from
    `lo`: (lane_off, starts, ends, keys) of the summary."""
    if rows_lo is None:
        rows_lo, rows_hi = lane_off[:-1], lane_off[1:]
    n_buckets = int((int(ends.max(initial=lo)) - lo) // width) + 2
    cap = min(len(starts), (len(lane_off) - 1) * n_buckets) + len(lane_off) + 2
    out_s, out_e, out_k = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    off = np.zeros(len(lane_off), np.int64)
    n = 0
    for k in range(len(lane_off) - 1):
        a, b = int(rows_lo[k]), int(rows_hi[k])
        n = _coarsen(starts[a:b], ends[a:b], keys[a:b], lo, width, out_s, out_e, out_k, n)
        off[k + 1] = n
    return off, out_s[:n], out_e[:n], out_k[:n]


def detail_width(span_ns: int, intervals: int, lanes: int, limit: int = MAX_DETAIL) -> int:
    """0 when the page can carry every interval, else the bucket width (a 1-2-5 step of ns) that
    keeps the summary within `limit` intervals."""
    if intervals <= limit or span_ns <= 0:
        return 0
    raw = span_ns * max(lanes, 1) / limit
    mag = 10 ** int(np.floor(np.log10(max(raw, 1))))
    return int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))


def critical_segments(trace: Trace, lane_of_row: np.ndarray, active: str = "running") -> tuple[np.ndarray, ...]:
    """The criticality strip: maximal segments of the run with the same running set's size r and,
    when r == 1, the same lone thread. Returns (start_ns, end_ns, r, lane) arrays, times absolute,
    lane -1 unless exactly one thread ran (`CriticalStrip.segments`)."""
    return CriticalStrip(trace, lane_of_row, active).segments()


class CriticalStrip:
    """The strip of `critical_segments`, from the same intervals as `criticality` (the
    switch-instant spans of recordings, else RUNNING): their shared sorted timeline where another
    analysis made it, else merged from their sorted runs as they go (`_merged_strip`: the same
    segments without the timeline's 56 bytes an interval). The intervals are looked up once for
    the count, the segments and their summary."""

    def __init__(self, trace: Trace, lane_of_row: np.ndarray, active: str = "running"):
        from scalestack.analysis.criticality import critical_intervals, has_shared

        self.trace, self.active = trace, active
        self.t0, self.t1 = trace.start_ns, trace.end_ns
        self.lanes = lane_of_row.astype(np.int64, copy=False)
        key, intervals = critical_intervals(trace, active, self.t0, self.t1)
        self.merged = self.lane_at = None
        if not has_shared(trace, key):  # no timeline made yet
            self.merged = strip_inputs(intervals, self.lanes, self.t0, self.t1)

    def _shared(self, out: tuple, fill: bool) -> int:
        from scalestack.analysis.criticality import critical_sweep

        rows, _, _, tl, where = critical_sweep(self.trace, self.active, self.t0, self.t1)
        if self.lane_at is None:
            self.lane_at = _lane_at(where, rows, self.lanes, len(tl.u))
        return _strip(tl.u, tl.r, self.lane_at, *out, fill)

    def count(self) -> int:
        """How many segments `segments` gives, without them."""
        empty = tuple(np.empty(0, np.int64) for _ in range(4))
        if self.merged is None:
            return int(self._shared(empty, False))
        return int(_merged_strip(*self.merged, *empty, False, strip_carry()))

    def segments(self, n_segments: int | None = None) -> tuple[np.ndarray, ...]:
        """(start_ns, end_ns, r, lone lane) of each segment (`n_segments`: what `count` gave)."""
        n = self.count() if n_segments is None else n_segments
        out = tuple(np.empty(n, np.int64) for _ in range(4))
        if self.merged is None:
            self._shared(out, True)
        else:
            _merged_strip(*self.merged, *out, True, strip_carry())
        return out

    def coarse(self, lo: int, width: int, n_segments: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`coarsen` of the segments, keyed (lone lane + 1) * 256 + min(r, 255): (starts, ends,
        keys); merged, each segment goes into the summary as it is complete (no segments first:
        32 bytes each, 0.8 GB for a 10^8-event trace). `n_segments`: what `count` gave."""
        if self.merged is None:
            cs, ce, cr, cl = self.segments(n_segments)
            return coarsen(np.array([0, len(cs)]), cs, ce, (cl + 1) * 256 + np.minimum(cr, 255), lo, width)[1:]
        cap = min(n_segments, int((self.t1 - lo) // width) + 2) + 4  # as `coarsen` sizes one lane's summary
        out = tuple(np.empty(cap, np.int64) for _ in range(3))
        n = _merged_strip_coarse(*self.merged, lo, width, *out, *strip_coarse_carry(), True)
        return tuple(x[:n] for x in out)


def strip_inputs(intervals, lanes: np.ndarray, t0: int, t1: int) -> tuple:
    """What `_merged_strip` reads of the intervals `intervals()` gives (thread rows, starts, ends,
    clipped to [t0, t1]): the same for a whole trace and for each time chunk of a stored one."""
    from scalestack.analysis.criticality import _point_runs

    rows, a, b = intervals()
    return a, b, t0, t1, _point_runs(a, b, t0, t1), lanes[rows]


def strip_carry() -> np.ndarray:
    """`_merged_strip`'s state before any point: (segments so far, the last one's r, lone lane, end)."""
    return np.array([0, -1, -1, -1], np.int64)


def strip_coarse_carry() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`_merged_strip_coarse`'s state before any point: (summary rows so far, the pending segment:
    whether there is one, its r, lone lane, start, end) and `_coarse_step`'s state."""
    acc_k, acc_d, state = coarse_state()
    return np.array([0, 0, -1, -1, -1, -1], np.int64), acc_k, acc_d, state


@numba.njit(cache=True)
def _merged_strip(a, b, t0, t1, firsts, lane, start, end, rr, lone, fill, carry):
    """`_strip` over the endpoints of the intervals [a, b) and of [t0, t1], merged from their sorted
    runs (`criticality._merge_sweep`'s order) as they are visited: no timeline (56 bytes an
    interval: 1.05 GB for the 12.5 M spans of a 10^8-event trace), the same segments. `carry`
    (`strip_carry`) holds the segments so far and the last one, so that the strips of consecutive
    windows [t0, t1) join as one: a segment ending at t0 grows on when it continues. Returns the
    segment count."""
    n_iv = a.shape[0]
    m = 2 * n_iv + 2
    heap, cur, stop, head_t = merge_heap(a, b, t0, t1, firsts)
    size = firsts.shape[0]
    n, rr_prev, lone_prev, end_prev = carry[0], carry[1], carry[2], carry[3]
    count = 0
    total = 0
    prev_t = 0
    for k in range(m):
        run = heap[0]
        e = cur[run]
        t = head_t[run]
        if k > 0 and t > prev_t:  # the segment since the previous point, as `_strip` writes it
            who = total if count == 1 else -1
            if n > 0 and rr_prev == count and lone_prev == who and end_prev == prev_t:
                end_prev = t
                if fill:
                    end[n - 1] = end_prev
            else:
                rr_prev, lone_prev, end_prev = count, who, t
                if fill:
                    start[n], end[n], rr[n], lone[n] = prev_t, t, count, who
                n += 1
        if e < 2 * n_iv:
            if e % 2 == 0:
                count += 1
                total += lane[e >> 1]
            else:
                count -= 1
                total -= lane[e >> 1]
        prev_t = t
        if e + 1 < stop[run]:
            cur[run] = e + 1
            head_t[run] = _point(a, b, t0, t1, e + 1)
        else:
            size -= 1
            heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, cur)
    carry[0], carry[1], carry[2], carry[3] = n, rr_prev, lone_prev, end_prev
    return n


@numba.njit(cache=True)
def _lane_at(where, rows, lane_of_row, n_points):
    """At each point of the sorted timeline, the lane its interval starts (+) or ends (-) there."""
    out = np.zeros(n_points, np.int64)
    for i in range(rows.shape[0]):
        lane = lane_of_row[rows[i]]
        out[where[2 * i]] = lane
        out[where[2 * i + 1]] = -lane
    return out


@numba.njit(cache=True)
def _strip(u, r, lane_at, start, end, rr, lone, fill):
    """The strip's segments between the timeline's points, equal neighbours merged: how many, and
    with `fill` the segments themselves. Between u[k] and u[k + 1] run r[k] threads whose lanes
    add up to the sum of lane_at up to k; points at one instant leave no segment between them,
    so their order does not matter."""
    n = 0
    total = 0
    rr_prev, lone_prev, end_prev = -1, -1, -1
    for k in range(u.shape[0] - 1):
        total += lane_at[k]
        if u[k + 1] <= u[k]:
            continue
        who = total if r[k] == 1 else -1
        if n > 0 and rr_prev == r[k] and lone_prev == who and end_prev == u[k]:
            end_prev = u[k + 1]
            if fill:
                end[n - 1] = end_prev
            continue
        rr_prev, lone_prev, end_prev = r[k], who, u[k + 1]
        if fill:
            start[n], end[n], rr[n], lone[n] = u[k], u[k + 1], r[k], who
        n += 1
    return n


@numba.njit(cache=True)
def _merged_strip_coarse(a, b, t0, t1, firsts, lane, lo, width, out_s, out_e, out_k, carry, acc_k, acc_d, state,
                         final):
    """`_merged_strip`'s segments summarised as `_coarsen` summarises them (key: (lone lane + 1) *
    256 + min(r, 255)), each fed to the summary as it is complete: the strip of a trace too big
    to draw interval by interval without its segments (32 bytes each: 0.8 GB for a 10^8-event
    trace). The pending segment and the summary's state are carried (`strip_coarse_carry`) from
    the window before, as in `_merged_strip`; `final`: no window follows, so both are written out.
    Returns the summary's row count."""
    n_iv = a.shape[0]
    m = 2 * n_iv + 2
    heap, cur, stop, head_t = merge_heap(a, b, t0, t1, firsts)
    size = firsts.shape[0]
    n_acc, bucket, cov_s, cov_e = state[0], state[1], state[2], state[3]
    n_out = carry[0]
    have = carry[1] != 0
    rr_prev, lone_prev, s_prev, end_prev = carry[2], carry[3], carry[4], carry[5]
    count = 0
    total = 0
    prev_t = 0
    for k in range(m):
        run = heap[0]
        e = cur[run]
        t = head_t[run]
        if k > 0 and t > prev_t:  # the segment since the previous point, as `_strip` writes it
            who = total if count == 1 else -1
            if have and rr_prev == count and lone_prev == who and end_prev == prev_t:
                end_prev = t
            else:
                if have:
                    n_out, n_acc, bucket, cov_s, cov_e = _coarse_step(
                        s_prev, end_prev, (lone_prev + 1) * 256 + min(rr_prev, 255), lo, width, out_s, out_e, out_k,
                        n_out, 0, acc_k, acc_d, n_acc, bucket, cov_s, cov_e)
                rr_prev, lone_prev, s_prev, end_prev = count, who, prev_t, t
                have = True
        if e < 2 * n_iv:
            if e % 2 == 0:
                count += 1
                total += lane[e >> 1]
            else:
                count -= 1
                total -= lane[e >> 1]
        prev_t = t
        if e + 1 < stop[run]:
            cur[run] = e + 1
            head_t[run] = _point(a, b, t0, t1, e + 1)
        else:
            size -= 1
            heap[0] = heap[size]
        sift_runs(heap, size, 0, head_t, cur)
    if final:
        if have:
            n_out, n_acc, bucket, cov_s, cov_e = _coarse_step(
                s_prev, end_prev, (lone_prev + 1) * 256 + min(rr_prev, 255), lo, width, out_s, out_e, out_k, n_out,
                0, acc_k, acc_d, n_acc, bucket, cov_s, cov_e)
            have = False
        if n_acc > 0:
            n_out = _emit(out_s, out_e, out_k, n_out, cov_s, cov_e, acc_k, acc_d, n_acc, 0)
            n_acc = 0
    state[0], state[1], state[2], state[3] = n_acc, bucket, cov_s, cov_e
    carry[0], carry[1] = n_out, 1 if have else 0
    carry[2], carry[3], carry[4], carry[5] = rr_prev, lone_prev, s_prev, end_prev
    return n_out


def _thread_blocks(trace: Trace) -> tuple[Any, np.ndarray, np.ndarray]:
    """The states with each thread's rows together and in time order (the table itself when they
    are, as in every trace the builder makes; else sorted so, stably), and each thread row's rows
    [lo, hi) there. The lane-order copies of all columns took 113 MB for 2.9 M states."""
    from scalestack.analysis.criticality import thread_lookup

    st = trace.states
    tids, rows = thread_lookup(trace)
    lo, hi, bad, ok = _blocks(st.tid, st.start_ns, tids, rows)
    if bad >= 0:
        trace.thread_index(st.tid[bad])  # raises KeyError, as thread_index over the column does
    if not ok:
        st = st.take(np.lexsort((st.start_ns, trace.thread_index(st.tid))))
        lo, hi, _, _ = _blocks(st.tid, st.start_ns, tids, rows)
    return st, lo, hi


@numba.njit(cache=True)
def _blocks(tid, start, tids, rows):
    """Each thread row's first and end row; the first row whose tid is not a thread (-1: none);
    whether every thread's rows are one block in time order."""
    lo = np.zeros(rows.shape[0], np.int64)
    hi = np.zeros(rows.shape[0], np.int64)
    seen = np.zeros(rows.shape[0], np.bool_)
    ok = True
    k = 0
    for i in range(tid.shape[0]):
        if i == 0 or tid[i] != tid[i - 1]:
            p = find_sorted(tids, tid[i])
            if p < 0:
                return lo, hi, i, False
            k = rows[p]
            ok = ok and not seen[k]
            seen[k] = True
            lo[k] = i
        elif start[i] < start[i - 1]:
            ok = False
        hi[k] = i + 1
    return lo, hi, -1, ok


PIECE = 1 << 18  # rows converted at a time when the page's arrays are written


def _pieces(lo: np.ndarray, hi: np.ndarray):
    """(first row, end row, position in lane order) of every lane's rows, at most PIECE at a time."""
    at = 0
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        for x in range(a, b, PIECE):
            y = min(x + PIECE, b)
            yield x, y, at
            at += y - x


@numba.njit(cache=True)
def _gaps(starts, ends, lo, hi):
    """Positions (in lane order) and starts of the intervals that do not begin where the previous
    one of their lane ended."""
    n = 0
    for k in range(lo.shape[0]):
        for i in range(lo[k] + 1, hi[k]):
            n += starts[i] != ends[i - 1]
    rows = np.empty(n, np.int64)
    at = np.empty(n, np.int64)
    n = 0
    pos = 0
    for k in range(lo.shape[0]):
        for i in range(lo[k] + 1, hi[k]):
            if starts[i] != ends[i - 1]:
                rows[n] = pos + i - lo[k]
                at[n] = starts[i]
                n += 1
        pos += hi[k] - lo[k]
    return rows, at


def _pack(sections) -> tuple[str, dict[str, list]]:
    """The page's arrays one after the other (each at a multiple of 8 bytes), gzip-compressed on
    every core (`deflate.ParallelGzip`, level 4), base64: each array goes to the compressor as it
    is converted, piece by piece (`data` is an array or a function giving its pieces), so the whole
    buffer (53 MB for the 2.45 M intervals of a 10^7-event recording) is never held. Level 4 on 2
    cores: 0.28 s and 9.5 MB for those 53 MB, where one gzip stream at level 6 took 1.7 s and 8.6 MB
    (2-vCPU VM, 2026-11-26)."""
    layout, end = {}, 0
    z = ParallelGzip(PACK_LEVEL, block=PACK_BLOCK)
    for name, n, dtype, data in sections:
        pad = -end % 8
        z.write(bytes(pad))
        end += pad
        layout[name] = [end, n, np.dtype(dtype).str.lstrip("<|=")]
        for piece in (data() if callable(data) else [data]):
            z.write(np.ascontiguousarray(piece, dtype=dtype))
        end += n * np.dtype(dtype).itemsize
    return base64.b64encode(z.finish()).decode("ascii"), layout


PACK_LEVEL = 4
PACK_BLOCK = 1 << 20  # bytes compressed on their own (primed with the 32 KiB before)


def _nice_window(span_ns: int, n: int = 8) -> int:
    """A round window length (1, 2 or 5 times a power of ten ns) nearest span / n."""
    raw = max(span_ns / n, 1)
    mag = 10 ** int(np.floor(np.log10(raw)))
    return int(min((m * mag for m in (1, 2, 5, 10)), key=lambda w: abs(np.log(w / raw))))


def timeline_data(trace: Trace, options: Any = None, marks: list[dict] | None = None) -> dict[str, Any]:
    """Everything the page's timeline draws: lanes, packed intervals, criticality strip, marks.

    Times in the page are ns relative to the trace's start. Returns a dict with ``payload`` (the
    JSON the page embeds) and ``summary`` (a small description kept in report.json).
    """
    group_by = getattr(options, "group_by", None)
    active = getattr(options, "active", "running")
    t0 = trace.start_ns
    order, groups = lane_order(trace, group_by)
    n_lanes = len(order)
    lane_of_row = lanes_of_rows(order)

    # each lane's intervals in time order: a block of rows of the states (sorted by tid, then time)
    st, lo, hi = _thread_blocks(trace)
    lo, hi = lo[order], hi[order]
    cols = [st.start_ns, st.end_ns, st.state, st.cpu, st.addr, st.waker]
    strip = CriticalStrip(trace, lane_of_row, active)
    n_segments = strip.count()
    width = detail_width(trace.wall_ns, len(st) + n_segments, n_lanes, MAX_DETAIL)
    if width:  # too many to carry one by one: each lane's dominant state per `width` ns
        lane_off, starts, ends, state = coarsen(np.r_[0, np.cumsum(hi - lo)], st.start_ns, st.end_ns, st.state, t0,
                                                width, lo, hi)
        lo, hi = lane_off[:-1], lane_off[1:]
        cols = summary_columns(starts, ends, state)
        cs, ce, cr, cl = strip_of_keys(*strip.coarse(t0, width, n_segments))
    else:
        cs, ce, cr, cl = strip.segments(n_segments)
    del strip
    return timeline_payload(trace.threads, order, groups, t0, trace.wall_ns, cols, lo, hi, (cs, ce, cr, cl), width,
                            len(st), marks)


def lanes_of_rows(order: np.ndarray) -> np.ndarray:
    """Each thread row's lane, from `lane_order`'s rows."""
    lane_of_row = np.empty(len(order), dtype=np.int64)
    lane_of_row[order] = np.arange(len(order))
    return lane_of_row


def summary_columns(starts: np.ndarray, ends: np.ndarray, state: np.ndarray) -> list[np.ndarray]:
    """The page's columns of a summary (`coarsen`'s rows): no CPU, wait object or waker."""
    return [starts, ends, state, np.full(len(starts), -1), np.zeros(len(starts), np.uint64),
            np.full(len(starts), -1, "<i4")]


def strip_of_keys(cs: np.ndarray, ce: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, ...]:
    """The summarised strip's (start, end, r, lone lane): its key holds lone lane and count together."""
    return cs, ce, key % 256, key // 256 - 1


def timeline_payload(th, order: np.ndarray, groups: list[str], t0: int, span: int, cols: list[np.ndarray],
                     lo: np.ndarray, hi: np.ndarray, strip: tuple[np.ndarray, ...], width: int, n_states: int,
                     marks: list[dict] | None) -> dict[str, Any]:
    """`timeline_data`'s result from its parts: the thread table `th` and its lanes (`lane_order`),
    the trace's start and length, the page's columns with each lane's rows [lo, hi) there (in lane
    order), the strip's (start, end, r, lone lane), the summary's bucket (0: none) and the trace's
    state rows: the same whether they were computed from a whole trace or in time chunks."""
    from scalestack.report.figures import STATE_COLOURS, colours_for

    cs, ce, cr, cl = strip
    n_lanes = len(order)
    labels = [f"{th.name[i]} ({th.tid[i]})" for i in range(len(th))]
    colour = colours_for(labels, [str(r) for r in th.role])
    counts = hi - lo
    lane_off = np.r_[0, np.cumsum(counts)].astype("<u4")
    n_rows = int(counts.sum())
    lane_start = np.zeros(n_lanes)
    lane_start[counts > 0] = cols[0][lo[counts > 0]] - t0
    # intervals tile each lifetime, so a lane is its start plus durations; a gap (none in a
    # validated trace) is kept exact by folding it into the previous duration's successor's start
    pieces = list(_pieces(lo, hi))
    gap_rows, gap_starts = _gaps(cols[0], cols[1], lo, hi)
    longest = max((int((cols[1][a:b] - cols[0][a:b]).max()) for a, b, _ in pieces), default=0)
    dur_kind, dur_dtype = ("u32", "<u4") if longest < 2**32 else ("f64", "<f8")
    addrs = np.unique(np.concatenate([np.zeros(0, np.uint64)] + [np.unique(cols[4][a:b]) for a, b, _ in pieces]))
    shift = 0 if len(addrs) and addrs[0] == 0 else 1
    names_addr = [""] * shift + [f"0x{int(x):x}" for x in addrs]
    if shift == 0:
        names_addr[0] = ""
    cdur, cdur_kind = _durations(ce - cs)
    crit_start = float(cs[0] - t0) if len(cs) else 0.0

    def per_row(fn):  # an array of every interval, in lane order, from the columns piece by piece
        return lambda: (fn(a, b) for a, b, _ in pieces)

    sections: list[tuple[str, int, str, Any]] = [
        ("lane_off", len(lane_off), "<u4", lane_off), ("lane_start", n_lanes, "<f8", lane_start),
        ("dur", n_rows, dur_dtype, per_row(lambda a, b: cols[1][a:b] - cols[0][a:b])),
        ("state", n_rows, "u1", per_row(lambda a, b: cols[2][a:b])),
        ("cpu", n_rows, "<i2", per_row(lambda a, b: cols[3][a:b])),
        ("obj", n_rows, "<u4", per_row(lambda a, b: np.searchsorted(addrs, cols[4][a:b]) + shift)),
        ("waker", n_rows, "<i4", per_row(lambda a, b: cols[5][a:b])),
        ("gap_row", len(gap_rows), "<u4", gap_rows), ("gap_start", len(gap_rows), "<f8", gap_starts - t0),
        ("crit_dur", len(cdur), cdur.dtype.str, cdur), ("crit_r", len(cr), "u1", np.minimum(cr, 255)),
        ("crit_lane", len(cl), "<i4", cl),
    ]
    packed, layout = _pack(sections)

    lanes = [{"tid": int(th.tid[i]), "name": str(th.name[i]), "role": str(th.role[i]), "group": groups[k],
              "colour": colour[labels[i]], "intervals": int(counts[k])} for k, i in enumerate(order)]
    tid_lane = {int(th.tid[i]): k for k, i in enumerate(order)}
    page_marks = []
    for m in (marks or [])[:MAX_MARKS]:
        pm = {"kind": m["kind"], "label": m["label"], "t0": int(m["t0_ns"]) - t0, "t1": int(m["t1_ns"]) - t0}
        if m.get("tid") is not None:
            pm["lane"] = tid_lane.get(int(m["tid"]), -1)
        page_marks.append(pm)
    if not any(m["kind"] == "window" for m in page_marks) and span > 0:
        w = _nice_window(span)
        page_marks += [{"kind": "window", "label": f"window {k + 1}", "t0": a, "t1": min(a + w, span)}
                       for k, a in enumerate(range(0, span, w))]
    payload = {
        "span": span, "lanes": lanes,
        "states": [{"name": n, "colour": STATE_COLOURS[n]} for n in STATE_NAMES],
        "addrs": names_addr, "marks": page_marks, "durKind": dur_kind, "critDurKind": cdur_kind,
        "critStart": crit_start, "intervals": n_rows, "critSegments": int(len(cs)), "summaryNs": width,
        "traceIntervals": int(n_states),
        "layout": layout, "blob": packed,
    }
    summary = {"lanes": [{k: v for k, v in ln.items() if k != "colour"} for ln in lanes],
               "intervals": n_rows, "critical_segments": int(len(cs)), "marks": len(page_marks),
               "trace_intervals": int(n_states), "summary_ns": width,
               "packed_bytes": len(packed)}
    return {"payload": payload, "summary": summary}


def unpack(payload: dict[str, Any]) -> dict[str, np.ndarray]:
    """The page's arrays from a payload, as timeline.js decodes them, plus each interval's
    ``start``/``end`` and each criticality segment's ``crit_start``/``crit_end`` (ns from the
    trace's start), rebuilt from the durations as the page does."""
    raw = gzip.decompress(base64.b64decode(payload["blob"]))
    out = {k: np.frombuffer(raw, dtype="<" + kind if kind != "u1" else "u1", count=n, offset=off)
           for k, (off, n, kind) in payload["layout"].items()}
    off = out["lane_off"]
    start = np.empty(len(out["dur"]))
    gap = dict(zip(out["gap_row"].tolist(), out["gap_start"].tolist(), strict=True))
    for lane in range(len(off) - 1):
        t = out["lane_start"][lane]
        for i in range(off[lane], off[lane + 1]):
            t = gap.get(i, t)
            start[i] = t
            t += float(out["dur"][i])
    out["start"], out["end"] = start, start + out["dur"]
    cdur = out["crit_dur"].astype(np.float64)
    out["crit_start"] = payload["critStart"] + np.r_[0.0, np.cumsum(cdur)[:-1]]
    out["crit_end"] = out["crit_start"] + cdur
    return out


def timeline_html(data: dict[str, Any]) -> str:
    """The timeline's section of report.html: toolbar, canvas, the packed data and the script."""
    p = data["payload"]
    js = resources.files("scalestack.report").joinpath("timeline.js").read_text(encoding="utf-8")
    payload = json.dumps(p, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    legend = "".join(f"<span class='sst-key'><i style='background:{s['colour']}'></i>{html.escape(s['name'].replace('_', ' '))}</span>"
                     for s in p["states"])
    kinds = sorted({m["kind"] for m in p["marks"]})
    return (
        "<section id='timeline'><h2>Timeline</h2>"
        "<p class='help'>One lane per thread, grouped by role and pool; colour = the thread's state. The strip on "
        "top shows, at each instant, the thread that ran alone (the one the program waited for, in its colour) "
        "or, grey, how many shared the CPUs (the lower, the more). Wheel: zoom at the pointer; drag: pan; "
        "shift+wheel: scroll the lanes; double-click: the whole run; hover: the interval; click a wait: jump to "
        "the thread that ended it.</p>"
        + (f"<p class='help'>This run has {p['traceIntervals']:,} intervals, too many to carry one by one: each lane "
           f"shows the state that covered most of every {format_ns(p['summaryNs'])} (waits are not linked to their "
           "wakers here). <code>scalestack report TRACE --between T0 T1</code> shows every interval of a part.</p>"
           if p.get("summaryNs") else "")
        +
        f"<div class='sst-tl' id='sst-tl' data-lanes='{len(p['lanes'])}' data-intervals='{p['intervals']}' "
        f"data-mark-kinds='{html.escape(' '.join(kinds))}'>"
        "<div class='sst-bar'><label>show <select class='sst-sel'><option value=''>whole run</option></select></label>"
        "<button type='button' class='sst-reset'>whole run</button>"
        f"<span class='sst-range'></span><span class='sst-legend'>{legend}</span></div>"
        "<div class='sst-scroll'><canvas class='sst-canvas'></canvas><div class='sst-spacer'></div></div>"
        "<div class='sst-tip' hidden></div>"
        "<noscript>The timeline needs JavaScript.</noscript></div>"
        f"<script type='application/json' id='sst-tl-data'>{payload}</script>"
        f"<script>{js}</script></section>"
    )


TIMELINE_STYLE = """
.sst-tl{position:relative;border:1px solid #ddd;margin:.6em 0;user-select:none}
.sst-bar{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;padding:.3em .5em;background:#f6f6f6;font-size:12px}
.sst-range{color:#555;font-variant-numeric:tabular-nums} .sst-legend{margin-left:auto}
.sst-key{margin-left:.8em;white-space:nowrap} .sst-key i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-1px;border:1px solid #bbb}
.sst-scroll{position:relative;overflow-y:auto;overflow-x:hidden}
.sst-canvas{position:sticky;top:0;display:block;width:100%;cursor:grab}
.sst-tip{position:absolute;pointer-events:none;background:#fffffff0;border:1px solid #aaa;padding:.3em .5em;font-size:12px;box-shadow:0 1px 4px #0003;white-space:nowrap;z-index:2}
p.help{color:#555;font-size:13px}
"""
