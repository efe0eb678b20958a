"""The shim log's arithmetic on hand-made logs: phase bounds, t_i - t_{l+b,i}, whole-run scope."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalestack.eklov.shim import ShimLog, parse_log

MS = 1_000_000


def thread(idx, start, end, lock=0, barrier=0, join=0, wake=0, ended=1, cpu=0, wait_cpu=0):
    return {"idx": idx, "tid": 100 + idx, "start_ns": start, "end_ns": end, "ended": ended, "cpu_ns": cpu,
            "lock_wait_ns": lock, "spin_wait_ns": 0, "barrier_wait_ns": barrier, "join_wait_ns": join,
            "wake_ns": wake, "wait_cpu_ns": wait_cpu, "lock_calls": 0, "lock_waits": 0, "barrier_calls": 0,
            "join_calls": 0}


def log(threads, created=2, proc=(0, 1000 * MS), first_create=100 * MS, last_join=900 * MS, last_exit=890 * MS,
        unsupported=None):
    return ShimLog(pid=1, mode="timing", proc_start_ns=proc[0], proc_end_ns=proc[1], first_create_ns=first_create,
                   last_join_ns=last_join, last_exit_ns=last_exit, created=created, threads=tuple(threads),
                   unsupported=unsupported or {})


def test_paper_rule_max_of_t_minus_waits():
    # two workers in a 800 ms phase: 0 waits 300 ms on the lock and 100 at barriers, 1 ends 90 ms early
    lg = log([thread(-1, 0, 1000 * MS, join=790 * MS), thread(0, 101 * MS, 890 * MS, lock=300 * MS, barrier=100 * MS),
              thread(1, 102 * MS, 800 * MS, lock=50 * MS, wake=10 * MS)])
    assert lg.phase_bounds == (100 * MS, 900 * MS) and lg.phase_ns == 800 * MS
    assert lg.serial_ns == 200 * MS
    assert lg.busy_ns().tolist() == [10 * MS, 389 * MS, 638 * MS]
    assert lg.nosync_ns() == 638 * MS


def test_no_thread_created_is_the_whole_process():
    lg = log([thread(-1, 0, 1000 * MS, cpu=900 * MS)], created=0, first_create=0, last_join=0, last_exit=0)
    assert lg.phase_bounds == (0, 1000 * MS) and lg.serial_ns == 0
    assert lg.nosync_ns() == 1000 * MS and lg.max_thread_cpu_ns() == 900 * MS


def test_thread_alive_at_exit_extends_the_phase():
    lg = log([thread(-1, 0, 1000 * MS), thread(0, 150 * MS, 1000 * MS, ended=0)], created=1, last_join=0)
    assert lg.phase_bounds == (100 * MS, 1000 * MS)


def test_cpu_estimate_and_warning():
    lg = log([thread(-1, 0, 1000 * MS, cpu=300 * MS), thread(0, 0, 900 * MS, cpu=500 * MS, wait_cpu=40 * MS),
              thread(1, 0, 900 * MS, cpu=400 * MS)], unsupported={"condition variable": 3, "semaphore": 0})
    assert lg.nosync_cpu_ns() == 460 * MS  # created threads only: main's serial work is not phase work
    assert "condition variables (3 calls)" in lg.unsupported_warning() and "semaphore" not in lg.unsupported_warning()


def test_parse_log_roundtrip(tmp_path):
    d = {"version": 1, "pid": 7, "owner": 1, "mode": "isolate", "proc_start_ns": 0, "proc_end_ns": 10,
         "first_create_ns": 1, "last_join_ns": 9, "last_exit_ns": 8, "created": 1, "thread_overflow": 0,
         "unsupported": {"condition variable": 0, "rwlock": 0, "semaphore": 0},
         "threads": [thread(-1, 0, 10), thread(0, 1, 8)],
         "isolation": {"profiled": 0, "profile_cpu": 0, "broken": 0, "broken_why": "", "pirate": 1, "pirate_lost": 0,
                       "segment_overflow": 0, "segments": [[3, 4, 100, 50], [2, 2, 80, 40]]}}
    p = tmp_path / "shim.json"
    p.write_text(json.dumps(d))
    lg = parse_log(str(p))
    assert lg.isolation.cpu_ns == 5 and lg.isolation.mono_ns == 6 and lg.isolation.segments.shape == (2, 4)
    assert lg.unsupported_warning() is None


@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400), st.integers(0, 300), st.integers(0, 300)),
                min_size=1, max_size=6))
def test_busy_is_bounded_by_the_phase(rows):
    ths = [thread(-1, 0, 1000, join=200)]
    for i, (a, b, lock, bar) in enumerate(rows):
        start, end = 100 + min(a, b), 100 + max(a, b) + 1
        ths.append(thread(i, start, end, lock=lock, barrier=bar))
    lg = log(ths, created=len(rows), first_create=100, last_join=900, last_exit=max(t["end_ns"] for t in ths[1:]))
    busy = lg.busy_ns()
    assert (busy >= 0).all() and busy.max() <= lg.phase_ns
    assert lg.nosync_ns() == busy.max()


@pytest.mark.parametrize("size,expect", [("32M", 32 << 20), ("512K", 512 << 10), ("1G", 1 << 30), ("4096", 4096),
                                         ("32MiB", 32 << 20)])
def test_parse_size(size, expect):
    from scalestack.units import parse_size_bytes

    assert parse_size_bytes(size) == expect
