"""The event counter the one-run pirate curve reads its work from (perf_event_open, no perf binary)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from scalestack.errors import UserError

BUSY_THREADS = """
import sys, threading
sys.stdin.readline()  # start when told: after the counter is open, however late the test gets to it
def spin():
    y = 0
    for i in range(3 * 10**6):
        y += i
ts = [threading.Thread(target=spin) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


def test_software_counter_counts_a_program_and_the_threads_it_creates():
    """task-clock exists on every machine, VMs included: the same code path as instructions."""
    from scalestack.eklov.counter import EventCounter

    proc = subprocess.Popen([sys.executable, "-c", BUSY_THREADS], stdin=subprocess.PIPE)
    with EventCounter(proc.pid, "task-clock") as c:
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        first = c.read()
        time.sleep(0.1)
        mid = c.read()
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
        end = c.read()  # still readable once the program has ended
    assert first <= mid <= end and end > 50e6  # ns of CPU: the interpreter and both threads
    # user-mode only, counted from the open (not the interpreter's start): within the program's own user time
    assert end <= (usage.ru_utime + usage.ru_stime) * 1e9 * 1.05


def test_instructions_count_or_one_line_saying_why_not():
    from scalestack.eklov.counter import EventCounter

    proc = subprocess.Popen([sys.executable, "-c", BUSY_THREADS], stdin=subprocess.PIPE)
    try:
        with EventCounter(proc.pid, "instructions") as c:
            proc.stdin.close()  # EOF: start
            proc.wait()
            assert c.read() > 10**7
    except UserError as err:  # this VM: no hardware counters
        assert "cannot count instructions" in str(err) and "--progress io" in str(err) and "\n" not in str(err)
        proc.stdin.close()
        proc.wait()
    with pytest.raises(ValueError):
        EventCounter(proc.pid, "cycles-of-doom")


def test_one_run_curve_counts_work_from_the_programs_first_thread_on(tmp_path):
    """--progress instructions, run with task-clock (a software event every machine has) as the work:
    CPU time per CPU time, so every size's point is the run's CPU time and the curve is flat. It runs
    the counter path end to end: the launcher that holds the program until the counter is open, and
    the inheritance into both threads (without it the work would be a sliver of the time)."""
    from scalestack.eklov.curve import one_run_curve
    from scalestack.eklov.pirate import llc_info

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    prog = tmp_path / "spin.py"
    prog.write_text("import threading, time\n"
                    "def spin():\n"
                    "    end = time.thread_time() + 1.2\n"
                    "    while time.thread_time() < end:\n"
                    "        pass\n"
                    "ts = [threading.Thread(target=spin) for _ in range(2)]\n"
                    "[t.start() for t in ts]\n"
                    "[t.join() for t in ts]\n")
    res = one_run_curve([sys.executable, str(prog)], [0, 1 << 20], hold=0.1, settle=0.02,
                        progress_by="instructions", counter_event="task-clock", pirate_cpu=llc_info(0).cpus[-1])
    rows = res.rows()
    assert all(r["runs"] >= 3 for r in rows), rows
    assert all(r["time_min_ns"] > 0 for r in rows), rows
    # user-mode task-clock against scheduler CPU time: equal but for system time and the clock reads
    assert all(0.9 < r["slowdown"] < 1.1 for r in rows), rows
    assert all(2.0e9 < r["time_ns"] < 3.5e9 for r in rows), rows  # ~2.4 s of CPU: both threads counted


def test_the_programs_cpu_time_keeps_the_threads_that_ended():
    """A window's CPU time is the program's: a thread that ends inside it does not take its time away
    (a sum over live threads fell by the ended thread's time, and a window measured a negative time)."""
    from scalestack.eklov.curve import _proc_cpu_ns

    prog = ("import sys, threading, time\n"
            "def spin(d):\n"
            "    end = time.thread_time() + d\n"
            "    while time.thread_time() < end:\n"
            "        pass\n"
            "t = threading.Thread(target=spin, args=(0.15,))\n"
            "t.start(); t.join()\n"
            "print('joined', flush=True)\n"
            "sys.stdin.readline()\n")
    proc = subprocess.Popen([sys.executable, "-c", prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        before = _proc_cpu_ns(proc.pid)
        assert proc.stdout.readline() == b"joined\n"
        # join() returns when the thread says it is done, a moment before the kernel reaps it
        deadline = time.monotonic() + 5
        while len(os.listdir(f"/proc/{proc.pid}/task")) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(os.listdir(f"/proc/{proc.pid}/task")) == 1  # the spinning thread has ended
        after = _proc_cpu_ns(proc.pid)
        assert after - before >= 0.14e9
    finally:
        proc.stdin.close()
        proc.wait()
