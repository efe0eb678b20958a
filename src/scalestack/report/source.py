"""What a report's sections read: the analyses of a Trace held in memory (`WholeTrace`), or of a
stored trace too big to hold, read in time chunks (`StoredTrace`, `analysis.chunked`).

Sections ask a source for results, not for rows, so one set of section builders serves both: a
10^8-event trace's report holds one chunk at a time, and its numbers are the whole trace's
(criticality to the rounding of its float sums, the rest exactly).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from scalestack.trace import Trace

Progress = Callable[[int, int, str], None]  # (chunks done, chunks, what is being computed)


class WholeTrace:
    """The analyses of a Trace in memory; `trace` is there for sections that need its rows (code
    samples and call stacks)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.meta, self.threads = trace.meta, trace.threads

    @property
    def wall_ns(self) -> int:
        return self.trace.wall_ns

    @property
    def warnings(self) -> list[str]:
        return self.trace.warnings

    def time_in_states(self) -> np.ndarray:
        return self.trace.time_in_states()

    def criticality(self, active: str):
        from scalestack.analysis.criticality import criticality

        return criticality(self.trace, active=active)

    def bottle(self, group_by=None, active: str = "running", window=None):
        from scalestack.analysis.bottle import bottle

        return bottle(self.trace, group_by=group_by, active=active, window=window)

    def advise(self):
        from scalestack.analysis.advice import advise

        return advise(self.trace)

    def timeline(self, options: Any, marks: list[dict]) -> dict[str, Any]:
        from scalestack.report.timeline import timeline_data

        return timeline_data(self.trace, options, marks)


class StoredTrace:
    """The analyses of the trace stored at `path`, each read in time chunks of about `max_rows`
    rows; `progress(done, total, what)` follows each pass. It has no `trace`: the sections that
    need code samples are absent, so a trace with samples is reported whole (`needs_whole`)."""

    trace = None

    def __init__(self, path: str | os.PathLike, max_rows: int | None = None, progress: Progress | None = None):
        from scalestack.analysis.chunked import CHUNK_ROWS
        from scalestack.trace.store import load_threads

        self.path = path
        self.max_rows = CHUNK_ROWS if max_rows is None else max_rows
        self._progress = progress
        self.threads, self.meta = load_threads(path)
        self._crit: dict[str, tuple] = {}
        self._times: np.ndarray | None = None
        self._facts = None

    @property
    def wall_ns(self) -> int:
        return int(self.meta["end_ns"]) - int(self.meta["start_ns"])

    @property
    def warnings(self) -> list[str]:
        return list(self.meta.get("warnings", []))

    def progress(self, what: str):
        return None if self._progress is None else (lambda done, total: self._progress(done, total, what))

    def _first_pass(self) -> None:
        """One pass for three analyses: the criticality sums of "running" (the bottle graph's too),
        advice's first pass, and the time in states."""
        from scalestack.analysis.chunked import StateTimes, _sums
        from scalestack.analysis.chunked_advice import AdviceFacts

        facts, times = AdviceFacts(), StateTimes(self.threads, self.meta)

        def both(*chunk) -> None:
            facts(*chunk)
            times(*chunk)

        self._crit["running"] = _sums(self.path, "running", None, self.max_rows, self.progress("criticality"), also=both)
        self._facts, self._times = facts, times.out

    def time_in_states(self) -> np.ndarray:
        if self._times is None:
            self._first_pass()
        return self._times

    def _sums(self, active: str) -> tuple:
        from scalestack.analysis.chunked import _sums

        if active == "running" and active not in self._crit:
            self._first_pass()
        if active not in self._crit:  # the bottle graph is made of the same sums: one pass for both
            self._crit[active] = _sums(self.path, active, None, self.max_rows, self.progress("criticality"))
        return self._crit[active]

    def criticality(self, active: str):
        return self._sums(active)[0]

    def bottle(self, group_by=None, active: str = "running", window=None):
        from scalestack.analysis import chunked

        if window is None:
            return chunked.bottle_of(*self._sums(active), group_by)
        return chunked.bottle(self.path, group_by=group_by, active=active, window=window, max_rows=self.max_rows,
                              progress=self.progress("bottle windows"))

    def advise(self):
        from scalestack.analysis.chunked_advice import advise_from

        cr, th = self._sums("running")
        return advise_from(self.path, cr, th, self._facts, max_rows=self.max_rows, progress=self.progress("advice"))

    def timeline(self, options: Any, marks: list[dict]) -> dict[str, Any]:
        from scalestack.report.timeline_chunked import timeline_data_stored

        return timeline_data_stored(self.path, options, marks, max_rows=self.max_rows,
                                    progress=self.progress("timeline"))


def needs_whole(path: str | os.PathLike) -> bool:
    """Whether a stored trace's report needs its rows in memory: code samples (the phases, critical
    functions and locks sections are made from them and the states together)."""
    from scalestack.trace.store import group_ranges

    return int(group_ranges(path, "samples")[0].sum()) > 0
