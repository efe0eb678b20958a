"""Acceptance: an allocation-heavy Java program shows a GC component; GC threads carry the gc role;
the GC term agrees with the JVM's own -Xlog:gc pause times."""

import pytest

from scalestack.analysis.sweep import gc_checks, stacks
from scalestack.collect.sweep import load_gc_logs, load_sweep, run_sweep
from tests.conftest import requires_recording


def _log_agrees(checks: dict) -> bool:
    # the GC threads' box height is the pause time the JVM logged plus what they run outside the logged
    # pauses (waking, time to safepoint, parking): an offset per pause, not a ratio. Measured here over
    # 6 sweeps 0.04-0.12 ms per pause (29.6 vs 21.9 ms with 79 pauses failed a relative 35% bound in CI,
    # and comparing the GC terms, N x height - height_1, amplified it past a relative 25% once)
    per_pause = [(c["gc_height_ms"] - c["log_pause_ms"]) / c["pauses"] for c in checks.values()]
    return all(-0.05 <= x <= 0.3 for x in per_pause) and checks[4]["gc_term_log"] > 0.05


@requires_recording
def test_java_alloc_heavy_has_gc_component(java_classes, tmp_path):
    # The JVM's logged pauses are wall time, stretched by whatever else runs on the machine: with two busy
    # loops on the 2 CPUs, 8 of 8 sweeps failed, every pause logged 1-3 ms longer than the GC threads ran
    # (the trace's own RUNNABLE figures show them queued for a CPU meanwhile: the log fell between the GC
    # height from RUNNING and from RUNNING+RUNNABLE), and a stretched 1-thread log made gc_term_log
    # negative. So the comparison with the log (only it) is made again on a new sweep up to 3 times; the
    # trace's own GC component, roles and pause counts are asserted on every sweep, and a trace whose GC
    # height disagrees with a quiet machine's log fails all three.
    for attempt in range(3):
        d = tmp_path / f"java{attempt}"
        run_sweep(["java", "-XX:+UseParallelGC", "-Xmx64m", "-cp", str(java_classes), "AllocHeavy",
                   "{threads}"], [1, 2, 4], str(d), gc_log=True)
        traces = load_sweep(str(d))
        assert "gc" in set(traces[2].threads.role)
        by_n = {s.n: s for s in stacks(traces)}
        assert by_n[4].gc > 0.03  # 0.049 in a fresh-clone CI run on a 2-vCPU AMD EPYC host (2026-12-01)
        assert by_n[4].total() == pytest.approx(4.0)
        checks = {c["n"]: c for c in gc_checks(traces, load_gc_logs(str(d)))}
        assert set(checks) == {1, 2, 4} and all(c["pauses"] > 0 for c in checks.values())
        if _log_agrees(checks):
            break
    for c in checks.values():
        per_pause = (c["gc_height_ms"] - c["log_pause_ms"]) / c["pauses"]
        assert -0.05 <= per_pause <= 0.3, c
    assert checks[4]["gc_term_log"] > 0.05  # the JVM's own log confirms a GC component
