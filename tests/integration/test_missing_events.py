"""Delete events from a real recording: the gaps are counted exactly and the repairs stay within
the bounds they claim."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from scalestack.ingest.perf_data import read_events
from scalestack.trace import State
from scalestack.trace.builder import build_trace
from scalestack.trace.events import RECORD_TRACEPOINTS, Kind

from ..conftest import requires_recording

pytestmark = requires_recording


@pytest.fixture(scope="module")
def recording(c_programs, tmp_path_factory):
    data = tmp_path_factory.mktemp("rec") / "perf.data"
    subprocess.run(["perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-m", "16M", "-o", str(data), "-e",
                    ",".join(RECORD_TRACEPOINTS), "--", str(c_programs["mutex_counter"]), "4", "8000", "500", "3000"],
                   check=True, capture_output=True)
    events = read_events(str(data), "perf", "perf-script")
    execs = np.flatnonzero(events.kind == Kind.EXEC)
    root = int(events.arg0[execs[0]])
    return events, root, int(events.time[execs[0]])


def running(trace):
    times = trace.time_in_states()
    return {int(t): int(times[i, State.RUNNING]) for i, t in enumerate(trace.threads.tid)}


def test_deleted_switch_ins_are_counted_and_bounded(recording):
    events, root, start = recording
    base = build_trace(events, root_pids=[root], start_ns=start)
    base_run = running(base)
    tids = set(base_run)
    rng = np.random.default_rng(7)
    sw = np.flatnonzero((events.kind == Kind.SWITCH) & np.isin(events.arg1, list(tids)) & (events.time > start))
    # delete switches into traced threads where the CPU's chain is intact on both sides (the
    # event before is by the task switched out, the event after by the task switched in), at
    # most one in any run of three switches on a CPU: then every deletion breaks the chain on
    # its own, exactly once (a deletion next to a gap the kernel already left would merge)
    ctx = np.where(events.kind == Kind.SWITCH, events.arg0, events.tid)
    sideband = np.isin(events.kind, [Kind.TASK_COMM, Kind.TASK_FORK, Kind.TASK_EXIT])
    chosen = []
    for i in rng.permutation(sw):  # all candidates: a loaded machine leaves fewer clean ones
        c = int(events.cpu[i])
        on_cpu = np.flatnonzero((events.cpu == c) & ~sideband)
        k = int(np.searchsorted(on_cpu, i))
        if k == 0 or k + 1 >= len(on_cpu):
            continue
        before, after = on_cpu[k - 1], on_cpu[k + 1]
        came = events.arg1[before] if events.kind[before] == Kind.SWITCH else ctx[before]
        if came != events.arg0[i] or ctx[after] != events.arg1[i]:
            continue
        same_cpu = np.flatnonzero((events.kind == Kind.SWITCH) & (events.cpu == c))
        pos = int(np.searchsorted(same_cpu, i))
        neighbours = set(same_cpu[max(pos - 2, 0):pos + 3].tolist())
        if any(j in neighbours for j in chosen):
            continue
        chosen.append(int(i))
        if len(chosen) == 25:
            break
    keep = np.ones(len(events), bool)
    keep[chosen] = False
    broken = build_trace(events.take(np.flatnonzero(keep)), root_pids=[root], start_ns=start)
    broken.validate()
    assert len(chosen) >= 10  # a loaded machine leaves fewer clean places; each is still counted exactly
    assert broken.meta["chain_gaps"] == base.meta["chain_gaps"] + len(chosen)
    unc = broken.meta["repair_uncertainty_ns"]
    for tid, run in running(broken).items():
        # each repair claims its own error bound; their sum bounds the error of the total
        assert abs(run - base_run[tid]) <= unc.get(str(tid), 0) + 1_000, (tid, run, base_run[tid], unc)


def test_deleted_wakeups_leave_valid_states(recording):
    events, root, start = recording
    wake = np.flatnonzero((events.kind == Kind.WAKEUP) & (events.time > start))
    rng = np.random.default_rng(3)
    drop = rng.choice(wake, size=min(40, len(wake)), replace=False)
    keep = np.ones(len(events), bool)
    keep[drop] = False
    base = build_trace(events, root_pids=[root], start_ns=start)
    broken = build_trace(events.take(np.flatnonzero(keep)), root_pids=[root], start_ns=start)
    broken.validate()
    assert broken.meta["missing_wakeups"] >= base.meta["missing_wakeups"]
    # a lost wakeup only moves time between waiting states: running time is unchanged
    assert running(broken) == running(base)
