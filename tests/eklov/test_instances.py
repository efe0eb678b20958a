"""The multi-instance stack on the L1-resident kernel (cache ~0), the co-runner's timing, bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from scalestack.errors import UserError

from ..conftest import WORKLOADS

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or len(os.sched_getaffinity(0)) < 2
                                or not os.path.isdir("/sys/devices/system/cpu/cpu0/cache"),
                                reason="needs gcc, two CPUs and a sysfs cache description")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    out = tmp_path_factory.mktemp("eklov_kernels")
    built = {}
    for name in ("eklov_fit_l1", "eklov_fit_llc", "eklov_stream"):
        exe = out / name
        subprocess.run(["gcc", "-O2", "-Wall", "-pthread", str(WORKLOADS / "c" / f"{name}.c"), "-o", str(exe)],
                       check=True)
        built[name] = str(exe)
    return built


def test_kernels_run_threads_and_report(kernels):
    for exe in kernels.values():
        out = subprocess.run([exe, "2", "65536", "1000"], capture_output=True, text=True, check=True).stdout
        assert out.startswith("threads=2 bytes=65536 steps=1000 elapsed_ns=")
    bad = subprocess.run([kernels["eklov_fit_l1"], "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_co_run_times_each_copy_cpu_and_wall(kernels):
    from scalestack.eklov.instances import co_run

    argv = [kernels["eklov_fit_l1"], "1", "16384", "20000000"]
    cpu = co_run(argv, [0, 1])
    wall = co_run(argv, [0], clock="wall")
    assert len(cpu) == 2 and all(t > 1e6 for t in cpu) and wall[0] > 1e6


def test_co_run_failure_is_user_error(kernels):
    from scalestack.eklov.instances import co_run

    with pytest.raises(UserError, match="exited with status 2"):
        co_run([kernels["eklov_fit_l1"], "0"], [0])
    with pytest.raises(UserError, match="cannot run"):
        co_run(["/nonexistent/prog"], [0])


def test_instance_stack_l1_kernel_has_no_cache_component(kernels):
    from scalestack.eklov.instances import instance_stack

    ticks = []
    st = instance_stack([kernels["eklov_fit_l1"], "1", "16384", "60000000"], (1, 2), 3, progress=ticks.append)
    assert st.mode == "instances" and st.counts == (1, 2)
    row = {r["n"]: r for r in st.rows()}
    assert row[1]["cache"] == 0.0 and row[1]["memory"] == 0.0  # N = 1 is "alone" by construction
    # 16 KiB fits L1: a pirate of C/2 cannot slow it. Measured: |cache| <= 0.11 in 7 runs, 0.27 once in
    # a full suite run (the suite's own jobs on the two vCPUs)
    assert abs(row[2]["cache"]) < 0.4, row[2]
    # The memory component is what the two copies cost each other co-running, in CPU time. For an
    # L1 kernel that is shared-core contention this VM does not control (its 2 vCPUs may be one
    # host core's hyperthreads, and other tenants come and go): measured -0.21..+0.20 in the
    # benchmark, and +0.42 once in a fresh-clone CI run (copies 27% slower side by side). So the
    # test checks the stack adds up (cache + memory + measured = N) rather than its size.
    assert row[2]["cache"] + row[2]["memory"] + row[2]["s_meas"] == pytest.approx(2.0), row[2]
    assert len(ticks) == 3 * 3
    print(f"\nfit_l1 instances N=2: cache {row[2]['cache']:+.3f} [{row[2]['cache_min']:+.3f}, "
          f"{row[2]['cache_max']:+.3f}], memory {row[2]['memory']:+.3f}", file=sys.stderr)


def test_instance_stack_bad_input():
    from scalestack.eklov.instances import instance_stack
    from scalestack.eklov.pirate import llc_info

    with pytest.raises(UserError, match="positive"):
        instance_stack(["true"], (0, 2), 1)
    with pytest.raises(UserError, match="larger than the last-level cache"):
        instance_stack(["true"], (1, 2), 1, cache_bytes=2 * llc_info(0).size_bytes)

