"""`record --collector ebpf` on real programs: every thread's RUNNING and RUNNABLE against what
the thread itself read from the kernel just before it ended (issue 14's bounds), and no lost
switch. Needs root, BTF and clang/libbpf/bpftool."""

from __future__ import annotations

import pytest

import scalestack
from scalestack.trace.kernel_accounting import compare, read_truth

from ..conftest import requires_recording
from ..top.conftest import requires_ebpf

pytestmark = [requires_recording, requires_ebpf]

PROGRAMS = [
    ("barrier_imbalance", ["8", "3000000", "3"]),
    ("mutex_counter", ["4", "3000", "500", "3000"]),
    ("prodcons", ["20000", "2", "2000"]),
    ("balanced", ["4", "5", "2000000"]),  # 4 threads on 2 cores
]


def _record(argv, tmp_path, monkeypatch):
    truth_file = tmp_path / "schedstat.txt"
    truth_file.unlink(missing_ok=True)
    monkeypatch.setenv("SCHEDSTAT_OUT", str(truth_file))
    trace = scalestack.record(argv, None, collector="ebpf")
    return trace, compare(trace, read_truth(truth_file))


@pytest.mark.parametrize("program,args", PROGRAMS)
def test_every_thread_agrees_with_the_kernel(c_programs, tmp_path, monkeypatch, program, args):
    """Measured (benchmarks/validation/collectors.py, two passes of 20 recordings each): every thread within
    bounds, RUNNABLE within 0.16 ms, 0-0.54 chain gaps per 1000 events. A second recording is allowed, once: the
    kernel here never reports switches out of this VM's agent threads (docs/top.md), and such a
    switch-in leaves one wait unsized by the kernel's figure and one chain gap (once 26 in 12 865 events
    of mutex_counter, in a full test run; 0 in the 13 recordings of it made next)."""
    for _attempt in range(2):
        trace, rows = _record([str(c_programs[program]), *args], tmp_path, monkeypatch)
        bad = [r for r in rows if not (r["running_ok"] and r["runnable_ok"])]
        # its gaps are switches the kernel reports to no one (out of the VM agent's threads; one CI run
        # had 5 in a producer/consumer recording): at most 1 per 1000 events, where perf and tracefs
        # lose 14-49
        gaps, n = trace.meta["chain_gaps_traced"], trace.meta["n_events"]
        if not bad and gaps <= max(2, n // 1000):
            break
    print([(r["tid"], round(r["running_err_pct"], 3), round(r["runnable_err_ns"] / 1e6, 3)) for r in rows])
    assert trace.meta["collector"] == "ebpf" and len(rows) >= 2
    assert not bad, bad
    assert gaps <= max(2, n // 1000), (gaps, n)
    assert trace.meta["runnable_reconciled_ns"], "the kernel's run delay sized no wait"


def test_java_application_threads(java_classes, tmp_path, monkeypatch):
    trace, rows = _record(["java", "-Xmx64m", "-XX:+UseParallelGC", "-XX:ParallelGCThreads=2", "-cp",
                           str(java_classes), "AllocHeavy", "2", "10"], tmp_path, monkeypatch)
    assert len(rows) == 2
    for r in rows:
        assert r["running_ok"] and r["runnable_ok"], r


def test_sampling_needs_perf_and_says_so(c_programs):
    with pytest.raises(scalestack.errors.UserError, match="--sample needs the perf collector"):
        scalestack.record([str(c_programs["barrier_imbalance"]), "2", "1000", "1"], None, collector="ebpf",
                          sample_hz=99)


def test_no_futex_records_no_futex_call_and_no_sync_wait(c_programs):
    import numpy as np

    from scalestack.collect.ebpf import collect as _collect_ebpf
    from scalestack.trace import State
    from scalestack.trace.events import Kind

    argv = [str(c_programs["mutex_counter"]), "2", "2000", "500", "3000"]
    futex_kinds = [Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV]
    assert np.isin(_collect_ebpf(argv, None, None, True).events.kind, futex_kinds).any()
    # the syscall programs are not attached at all: not one futex record, from any task
    assert not np.isin(_collect_ebpf(argv, None, None, False).events.kind, futex_kinds).any()
    sync = int(State.SYNC_WAIT)
    kw = {"collector": "ebpf", "exit_check": False}
    assert (scalestack.record(argv, None, **kw).states.state == sync).any()
    assert not (scalestack.record(argv, None, futex=False, **kw).states.state == sync).any()
