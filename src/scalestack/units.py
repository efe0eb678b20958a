"""Durations, times and sizes as users (and sysfs) write them: "500ms", "2s", "250us" or plain ns;
"32M", "512K", "32MiB" or plain bytes."""

from __future__ import annotations

import re

from scalestack.errors import UserError

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|m)?\s*$")


def parse_duration_ns(value: int | float | str, *, what: str = "duration") -> int:
    """A positive duration in ns; bare numbers are ns."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ns = int(value)
    else:
        m = _RE.match(str(value))
        if not m:
            raise UserError(f"{what} {value!r} is not a duration; write e.g. 500ms, 2s, 250us or 1000000 (ns)")
        ns = int(round(float(m.group(1)) * _UNITS[m.group(2) or "ns"]))
    if ns <= 0:
        raise UserError(f"{what} must be positive, not {value!r}")
    return ns


def parse_time_ns(value: int | float | str, start_ns: int, *, what: str = "time") -> int:
    """A time in the trace: a duration from its start ("1.5s"), or an absolute ns value
    (a bare integer larger than the start)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and int(value) >= start_ns > 0:
        return int(value)
    if isinstance(value, int) and value >= start_ns > 0:
        return value
    if str(value).strip() in ("0", "0s", "0ns"):
        return start_ns
    return start_ns + parse_duration_ns(value, what=what)


def parse_counts(text: str, option: str) -> list[int]:
    """A comma-separated list of counts (threads, instances), each at least 1."""
    try:
        counts = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option} {text!r} is not a comma-separated list of integers; write e.g. 1,2,4") from None
    if not counts or min(counts) < 1:
        raise UserError(f"{option} {text!r}: give counts of 1 or more, e.g. 1,2,4")
    return counts


def parse_size_bytes(text: str) -> int:
    """A size in bytes from '32M', '512K', '1G', '32MiB', '1.5M' or a plain number."""
    t = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("KMG")) * mult)
    except ValueError:
        raise UserError(f"cannot read the size {text!r} (use e.g. 32M, 512K)") from None


def format_ns(ns: float) -> str:
    """Readable duration: 1.23 s, 45.6 ms, 789 µs, 12 ns."""
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.0f} ns"
