"""Acceptance: an allocation-heavy Java program shows a GC component; GC threads carry the gc role."""

import pytest

from scalestack.sweep import load_sweep, run_sweep, stacks
from tests.conftest import requires_recording


@requires_recording
def test_java_alloc_heavy_has_gc_component(java_classes, tmp_path):
    d = tmp_path / "java"
    run_sweep(["java", "-XX:+UseParallelGC", "-Xmx64m", "-cp", str(java_classes), "AllocHeavy",
               "{threads}"], [1, 2, 4], str(d))
    traces = load_sweep(str(d))
    assert "gc" in set(traces[2].threads.role)
    by_n = {s.n: s for s in stacks(traces)}
    assert by_n[4].gc > 0.05
    assert by_n[4].total() == pytest.approx(4.0)
