"""A recording's samples (read by perf script, which alone resolves symbols) put among the events
the direct reader decodes (`perf_data.with_samples`, `SampledWindows`): the rows a stable sort of
both gives, the samples after the events of their ns, strings joined into one table."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.ingest.perf_data import SampledWindows, with_samples
from scalestack.trace.events import Kind, RawEvents, concat_events

LO, HI = -(1 << 63), (1 << 63) - 1


def _events(times, kind, names, prefix):
    rows = [(t, i % 2, 100 + i % 3, 100, int(kind), i, 0, 0, i % len(names), (i + 1) % len(names) if i % 3 else -1)
            for i, t in enumerate(sorted(times))]
    return RawEvents.from_rows(rows, comms=[prefix + n for n in names])


def _by_sort(events, samples):
    both = concat_events([events, samples])
    return both.take(np.argsort(both.time, kind="stable"))


times = st.lists(st.integers(0, 50), max_size=40)


@settings(max_examples=200, deadline=None)
@given(times, times, st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
def test_the_merge_is_the_stable_sort(ev_times, s_times, names):
    events = _events(ev_times, Kind.SWITCH, names, "")
    samples = _events(s_times, Kind.SAMPLE, ["b", "main", "libc.so"], "")  # "b" may be in both tables
    got = with_samples(events, samples)
    assert got.equals(_by_sort(events, samples))
    assert got.comms.count("b") <= 1  # one string, one id


class _Windows:
    """Windows of `events` cut at `bounds`, as `PerfDataWindows` gives them: consecutive [lo, hi)
    from -2**63 to 2**63 - 1, empty ones skipped."""

    def __init__(self, events, bounds):
        self.ev, self.bounds = events, [LO, *bounds, HI]
        self.stats = {"lost_events": 0}
        self.events = len(events)

    def __iter__(self):
        for lo, hi in zip(self.bounds[:-1], self.bounds[1:], strict=True):
            w = self.ev.take(np.flatnonzero((self.ev.time >= lo) & (self.ev.time < hi)))
            w.stats = {**self.stats, "window_ns": [lo, hi]}
            if len(w):
                yield w


@settings(max_examples=200, deadline=None)
@given(times, times, st.lists(st.integers(0, 50), max_size=5, unique=True).map(sorted))
def test_windows_with_samples_concatenated_are_the_merge(ev_times, s_times, bounds):
    """Every sample comes once, in the window of its time or, after an empty window, in the next
    one (or in one of its own after the last): the windows concatenated are the whole merge."""
    events = _events(ev_times, Kind.SWITCH, ["a", "b"], "")
    samples = _events(s_times, Kind.SAMPLE, ["main"], "")
    sampled = SampledWindows(_Windows(events, bounds), samples)
    parts = list(sampled)
    assert sampled.events == len(events) + len(samples) and sampled.stats is sampled.windows.stats
    for a, b in zip(parts, parts[1:], strict=False):
        assert a.time[-1] <= b.time[0] and a.stats["window_ns"][1] <= b.stats["window_ns"][0]
    assert concat_events(parts, {}).equals(with_samples(events, samples)) if parts else not len(samples) + len(events)
