"""The bandwidth co-runner: probe the memory component directly with a streaming neighbour.

Without LLC-miss counters a program's bandwidth demand cannot be read (spec §3); what can be done is
to run it beside `c/streamer.c`, which streams a buffer much larger than the LLC at a chosen rate, and
see how much the program slows down. The streamer reports the bandwidth it achieved.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess

from scalestack.errors import UserError


class Streamer:
    """A streaming co-runner pinned to `cpu` at `rate_mb_s` (0 = as fast as it can); a context manager.

    After exit, `bytes_moved`, `elapsed_ns` and `achieved_mb_s` tell what it actually streamed.
    """

    def __init__(self, cpu: int | None = None, rate_mb_s: float = 0.0, size_bytes: int | None = None):
        if rate_mb_s < 0:
            raise UserError(f"streamer rate {rate_mb_s} MB/s is negative; give 0 (as fast as possible) or more")
        if size_bytes is None:
            from scalestack.eklov.pirate import llc_info

            size_bytes = 4 * llc_info(0 if cpu is None else cpu).size_bytes
        self.cpu, self.rate_mb_s, self.size_bytes = cpu, float(rate_mb_s), int(size_bytes)
        self.bytes_moved = 0
        self.elapsed_ns = 0
        self._proc: subprocess.Popen | None = None

    @property
    def achieved_mb_s(self) -> float:
        return self.bytes_moved / self.elapsed_ns * 1e3 if self.elapsed_ns > 0 else float("nan")

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def __enter__(self) -> Streamer:
        from scalestack.eklov.build import build

        argv = [build("streamer"), "--size", str(self.size_bytes), "--rate", str(self.rate_mb_s)]
        if self.cpu is not None:
            argv += ["--cpu", str(self.cpu)]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._proc.stdout.readline().strip()
        if line != "ready":
            err = self._proc.stderr.read().strip()
            self._proc.wait()
            self._proc = None
            raise UserError(f"the streaming co-runner failed to start: {err or line or 'no output'}")
        return self

    def __exit__(self, *exc) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        parts = out.split()
        if len(parts) == 2:
            self.bytes_moved, self.elapsed_ns = int(parts[0]), int(parts[1])


def stream_bandwidth(seconds: float = 0.5, cpu: int | None = None, rate_mb_s: float = 0.0,
                     size_bytes: int | None = None) -> float:
    """MB/s the streamer achieves alone for `seconds` (the machine's single-core streaming bandwidth)."""
    import time

    with Streamer(cpu, rate_mb_s, size_bytes) as s:
        time.sleep(seconds)
    return s.achieved_mb_s


def probe_memory(argv: list[str], rates_mb_s: list[float], repeat: int = 3, *, cpu: int = 0,
                 streamer_cpu: int = 1, timeout: float = 600.0) -> list[dict]:
    """The program's time (CPU time, pinned to `cpu`) alone and beside a streamer at each rate.

    One row per rate (None = alone): the median time, its slowdown against alone and the bandwidth
    the streamer achieved. A program that slows when bandwidth is taken from it is memory bound,
    the direct probe of the memory component the spec's counter-free table asks for.
    """
    import numpy as np

    from scalestack.eklov.instances import co_run

    rows: dict = {None: [], **{r: [] for r in rates_mb_s}}
    achieved: dict = {r: [] for r in rates_mb_s}
    for _ in range(repeat):  # round the rates each repeat, so the machine's slow spells touch all
        rows[None].append(co_run(argv, [cpu], timeout)[0])
        for r in rates_mb_s:
            with Streamer(streamer_cpu, r) as s:
                rows[r].append(co_run(argv, [cpu], timeout)[0])
            achieved[r].append(s.achieved_mb_s)
    base = float(np.median(rows[None]))
    out = [{"rate_mb_s": None, "achieved_mb_s": 0.0, "time_ns": base, "slowdown": 1.0}]
    for r in rates_mb_s:
        t = float(np.median(rows[r]))
        out.append({"rate_mb_s": r, "achieved_mb_s": float(np.median(achieved[r])), "time_ns": t, "slowdown": t / base})
    return out
