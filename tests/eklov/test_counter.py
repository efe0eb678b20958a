"""The event counter the one-run pirate curve reads its work from (perf_event_open, no perf binary)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from scalestack.errors import UserError

BUSY_THREADS = """
import threading
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

    proc = subprocess.Popen([sys.executable, "-c", BUSY_THREADS])
    with EventCounter(proc.pid, "task-clock") as c:
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

    proc = subprocess.Popen([sys.executable, "-c", BUSY_THREADS])
    try:
        with EventCounter(proc.pid, "instructions") as c:
            proc.wait()
            assert c.read() > 10**7
    except UserError as err:  # this VM: no hardware counters
        assert "cannot count instructions" in str(err) and "--progress io" in str(err) and "\n" not in str(err)
        proc.wait()
    with pytest.raises(ValueError):
        EventCounter(proc.pid, "cycles-of-doom")
