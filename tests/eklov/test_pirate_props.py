"""Invariants of the pirate's Python side: sysfs parsing, the self-check, the curve's table."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.eklov.curve import PirateCurve, default_sizes
from scalestack.eklov.pirate import Pirate, _cpu_list
from scalestack.units import parse_size_bytes


@given(st.sets(st.integers(0, 300), min_size=1))
def test_cpu_list_round_trip(cpus):
    """Any set of CPUs written as sysfs does (ranges joined by commas) reads back as itself."""
    xs, parts, i = sorted(cpus), [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    assert _cpu_list(",".join(parts) + "\n") == tuple(xs)


@given(st.integers(1, 1 << 20), st.sampled_from(["", "K", "M", "G"]))
def test_size_units(n, unit):
    assert parse_size_bytes(f"{n}{unit}\n") == n * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit]


@given(st.floats(0.1, 100), st.floats(1.0, 3.0), st.integers(1, 10**9), st.integers(0, 10**11), st.integers(0, 10**9))
def test_segment_ok_monotone_in_time(calib, threshold, lines, ns, extra):
    """A segment that took longer for the same lines never passes when the faster one failed."""
    pir = Pirate.__new__(Pirate)
    pir.threshold, pir._map = threshold, None
    pir.calib_ns_per_line = calib
    if not pir.segment_ok(lines, ns):
        assert not pir.segment_ok(lines, ns + extra)
    assert pir.segment_ok(lines, ns) == (ns / lines <= threshold * calib)


@settings(max_examples=50)
@given(st.integers(1 << 20, 1 << 30), st.lists(st.floats(1e6, 1e10), min_size=1, max_size=5))
def test_curve_rows_share_out_the_cache(c, times):
    sizes = tuple(sorted(set(default_sizes(c))))
    curve = PirateCurve(("x",), c, "sysfs", 64, sizes, {w: tuple(times) for w in sizes}, {w: 0 for w in sizes})
    rows = curve.rows()
    assert [r["pirate_bytes"] for r in rows] == list(sizes) and sizes[0] == 0 and sizes[-1] <= c
    assert all(r["pirate_bytes"] + r["cache_bytes"] == c for r in rows)
    assert all(r["time_min_ns"] <= r["time_ns"] <= r["time_max_ns"] for r in rows)
    assert rows[0]["slowdown"] == 1.0
