"""A real C program with two alternating kernels per thread: the phases found match the kernels."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import scalestack
from scalestack.analysis.phases import phases

from ..conftest import WORKLOADS, requires_recording

pytestmark = requires_recording


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("phases")
    exe = d / "two_kernels"
    subprocess.run(["gcc", "-O2", "-g", "-pthread", str(WORKLOADS / "c" / "two_kernels.c"), "-o", str(exe)], check=True)
    # 2 threads x 3 rounds x (500 ms fp + 500 ms hash) of CPU time each, sampled at 2 kHz
    return scalestack.record([str(exe), "2", "3", "500"], str(d / "tk.trace"), sample_hz=2000)


def kernel_of_intervals(trace, res):
    """Majority kernel (fp / hash / other) of each interval, from the samples' symbols."""
    order = res.params["_sample_order"][0]
    sym = trace.samples.symbol[order].astype(str)
    kind = np.where(np.char.startswith(sym, "fp_kernel"), 0, np.where(np.char.startswith(sym, "hash_kernel"), 1, 2))
    onehot = np.zeros((len(kind) + 1, 3))
    onehot[np.arange(len(kind)) + 1, kind] = 1
    cum = np.cumsum(onehot, axis=0)
    iv = res.intervals
    counts = cum[iv["last"] + 1] - cum[iv["first"]]
    return counts.argmax(axis=1), counts.max(axis=1) / counts.sum(axis=1)


def test_two_kernels_are_two_phases(recording):
    tr = recording
    workers = [t for t in np.unique(tr.samples.tid) if t != tr.meta["root_tid"]]
    assert len(workers) == 2
    res = phases(tr, interval_samples=50)
    kernel, purity = kernel_of_intervals(tr, res)
    iv = res.intervals
    assert set(np.unique(iv["tid"])) >= set(workers)
    # each kernel's intervals mostly go to one phase (its most common), the two kernels to different ones
    main_phase = {k: int(np.bincount(iv["phase"][kernel == k]).argmax()) for k in (0, 1)}
    assert main_phase[0] != main_phase[1]
    # labelled consistently: every phase stands for one kernel (the majority kernel of its intervals),
    # and >= 90% of the intervals are in a phase standing for their own kernel. Intervals that
    # straddle a kernel switch can form small extra phases of their own (k > 2): allowed here.
    phase_kernel = {int(c): int(np.bincount(kernel[iv["phase"] == c]).argmax()) for c in np.unique(iv["phase"])}
    consistent = np.mean([phase_kernel[int(p)] == int(k) for p, k in zip(iv["phase"], kernel, strict=True)])
    assert consistent >= 0.9, (consistent, res.k)
    strict = np.mean([iv["phase"][i] == main_phase.get(int(kernel[i]), -1) for i in range(len(kernel))])
    assert strict >= 0.8, (strict, res.k)
    print(f"k={res.k} consistent={consistent:.3f} in-main-phase={strict:.3f} intervals={len(kernel)}")
    # the two kernel phases hold almost all the time; each kernel gets about half the CPU time
    # (the program gives both the same CPU time; wall-time shares depend on other load)
    share = {r["phase"]: r["share_pct"] for r in res.phases}
    assert share[main_phase[0]] + share[main_phase[1]] >= 85
    cpu = {r["phase"]: r["running_ns"] for r in res.phases}
    total_cpu = sum(cpu.values())
    assert abs(cpu[main_phase[0]] - cpu[main_phase[1]]) / total_cpu <= 0.15
    # the top code of each kernel phase is that kernel
    assert res.top_regions[main_phase[0] - 1][0][0].split(":")[1].startswith("fp_kernel")
    assert res.top_regions[main_phase[1] - 1][0][0].split(":")[1].startswith("hash_kernel")
    # two threads on 2 cores (shared with other load): parallelism between 1 and 2 in both phases,
    # and the phases' times add up to the time the sampled threads ran, split by criticality
    par = {r["phase"]: r["parallelism"] for r in res.phases}
    assert 1.0 <= par[main_phase[0]] <= 2.0 + 1e-9 and 1.0 <= par[main_phase[1]] <= 2.0 + 1e-9
    crit = scalestack.criticality(tr)
    assert sum(r["time_ns"] for r in res.phases) <= crit.criticality_ns.sum() * 1.001
