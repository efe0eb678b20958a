"""A part of a recording (`import --between T0 T1`): its bounds, its events, and its Trace.

Shared by the perf.data reader (which decodes only the part's events) and the perf script text
parser (which cuts the parsed events).
"""

from __future__ import annotations

import numpy as np

from scalestack.errors import UserError
from scalestack.trace import Trace
from scalestack.trace.events import RawEvents
from scalestack.units import format_ns, parse_time_ns

# A part is read from this long before its start: each thread's last events there tell the state it
# is in at the start (a futex call it entered just before, a switch-out that left it blocked or
# queued), as the whole recording's walk knows it. A thread with no event in it is UNKNOWN until
# its first one, as after an attach.
PART_CONTEXT_NS = 100_000_000


def part_read_from(lo: int) -> int:
    """The first instant read for a part starting at `lo`."""
    return max(lo - PART_CONTEXT_NS, -(1 << 63))


def part_bounds(between: tuple, first: int) -> tuple[int, int]:
    """`between` (T0, T1) as absolute ns [lo, hi): T0 and T1 count from `first` (the recording's
    first event) unless they are absolute ns."""
    lo = parse_time_ns(between[0], first, what="--between start")
    hi = parse_time_ns(between[1], first, what="--between end")
    if hi <= lo:
        raise UserError(f"--between: the end ({between[1]}) is not after the start ({between[0]})")
    return lo, hi


def part_stats(between: tuple, lo: int, hi: int, first: int, last: int, n: int, path: str) -> dict:
    """What the state builder needs to know of a part; one clear error when it holds no event."""
    if first > last:
        raise UserError(f"{path} holds no scheduler events")
    if n == 0:
        raise UserError(f"--between {between[0]} {between[1]} holds no events: the recording runs "
                        f"{format_ns(last - first)} from its first event")
    return {"between_ns": [lo, hi], "time_range_ns": [first, last]}


def events_between(events: RawEvents, between: tuple | None, path: str) -> RawEvents:
    """The events of a part of the recording (all when `between` is None) and of the context
    before it (`PART_CONTEXT_NS`), for readers that hold the whole recording anyway (perf script
    text). Relative times count from the first event."""
    if between is None:
        return events
    first, last = (int(events.time.min()), int(events.time.max())) if len(events) else (1, 0)
    lo, hi = part_bounds(between, first)
    out = events.take(np.flatnonzero((events.time >= part_read_from(lo)) & (events.time < hi)))
    out.stats.update(part_stats(between, lo, hi, first, last, int(np.count_nonzero(out.time >= lo)), path))
    return out


def part_only(events: RawEvents) -> RawEvents:
    """The events of the part itself, without the context read before it (all when they are
    not a part)."""
    lo = (events.stats.get("between_ns") or (None, None))[0]
    if lo is None or not len(events) or int(events.time.min()) >= lo:
        return events
    return events.take(np.flatnonzero(events.time >= lo))


def build_part(events: RawEvents, *, pid: int | None, comm: str | None, meta: dict) -> Trace:
    """The Trace of the chosen processes from `events`; when they are a part of a recording
    (`events.stats["between_ns"]`, the events from `PART_CONTEXT_NS` before it on), the trace spans
    exactly that part, and each thread is in an unknown state until its first event, as after an
    attach."""
    from scalestack.trace.builder import build_trace

    lo, hi = events.stats.get("between_ns") or (None, None)
    first, last = events.stats.get("time_range_ns") or (None, None)
    start = lo if lo is not None and lo > first else None  # else the whole recording's bounds hold
    end = hi if hi is not None and hi <= last else None
    if start is not None or end is not None:
        meta = {**meta, "imported_between_ns": [lo, hi]}
    return build_trace(events, root_pids=[pid] if pid else None, comm=comm, start_ns=start, end_ns=end, meta=meta)
