"""The direct perf.data reader gives the same events and the same Trace as perf script's text,
on real recordings of the kinds of program users record: a barrier, a contended mutex, Java with
its GC and JIT threads, and `sort --parallel=2`."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from scalestack.ingest.perf_data import read_events
from scalestack.trace.builder import build_trace
from scalestack.trace.events import RECORD_TRACEPOINTS, Kind

from ..conftest import requires_recording

pytestmark = requires_recording


def _record(tmp_path, argv, *extra):
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-m", "16M", *extra, "-o", str(data),
                    "-e", ",".join(RECORD_TRACEPOINTS), "--", *argv],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(data)


def _programs(c_programs, java_classes, tmp_path):
    words = tmp_path / "words.txt"
    rng = np.random.default_rng(1)
    words.write_text("\n".join(map(str, rng.integers(0, 10**12, 1_000_000))) + "\n")
    return {
        "barrier": [str(c_programs["barrier_imbalance"]), "4", "20000000", "3"],
        "mutex": [str(c_programs["mutex_counter"]), "4", "20000", "500", "3000"],
        "java": ["java", "-Xmx64m", "-XX:+UseParallelGC", "-XX:ParallelGCThreads=2", "-cp", str(java_classes),
                 "AllocHeavy", "2", "4"],
        "sort": ["sort", "--parallel=2", "-S", "100M", "-o", os.devnull, str(words)],
    }


@pytest.mark.parametrize("name", ["barrier", "mutex", "java", "sort"])
def test_binary_reader_equals_perf_script(name, c_programs, java_classes, tmp_path):
    argv = _programs(c_programs, java_classes, tmp_path)[name]
    data = _record(tmp_path, argv, *(["-z"] if name == "sort" else []))
    direct = read_events(data, "perf", reader="perf-data")
    text = read_events(data, "perf", reader="perf-script")
    assert len(direct) > 100  # a real recording (200-700 events for the barrier here)
    assert direct.equals(text)
    assert direct.stats["lost_events"] == text.stats["lost_events"]
    root = int(direct.arg0[np.flatnonzero(direct.kind == Kind.EXEC)[0]])
    a = build_trace(direct, root_pids=[root])
    b = build_trace(text, root_pids=[root])
    a.validate()
    assert a.equals(b, meta_keys=("chain_gaps", "lost_events", "repairs"))
    assert len(a.threads) >= 2
