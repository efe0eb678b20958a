"""The shared state builder on hand-made event streams with hand-computed states."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.trace import State
from scalestack.trace.builder import build_trace
from scalestack.trace.events import Kind, RawEvents, concat_events

R, RN, SY, IO, SL, UN = (int(s) for s in State)
S_BIT, D_BIT, X_BIT = 1, 2, 16
COMMS = ["main", "worker", "swapper/0", "other"]


def ev(rows):
    """rows: (time, cpu, ctx_tid, kind, a0, a1, a2) with pid 100 for tids >= 100."""
    full = []
    for t, cpu, tid, kind, a0, a1, a2 in rows:
        pid = 100 if tid >= 100 else (0 if tid == 0 else tid)
        c0 = c1 = -1
        if kind == Kind.SWITCH:
            c0 = 0 if a0 == 100 else 1 if a0 >= 100 else 2 if a0 == 0 else 3
            c1 = 0 if a1 == 100 else 1 if a1 >= 100 else 2 if a1 == 0 else 3
        elif kind == Kind.FORK:
            c0, c1 = 1, 0
        full.append((t, cpu, tid, pid, int(kind), a0, a1, a2, c0, c1))
    return RawEvents.from_rows(full, comms=COMMS)


def intervals(trace, tid):
    s = trace.states
    m = s.tid == tid
    return list(zip(s.start_ns[m].tolist(), s.end_ns[m].tolist(), s.state[m].tolist(), strict=True))


def fork_wait_exit_rows() -> list[tuple]:
    """Main (100) forks a worker (101) on cpu 1, waits on futex 0xabc from 21 to the worker's
    wakeup at 50, runs again from 52; both exit."""
    return [
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (10, 0, 100, Kind.FORK, 100, 101, 0),
        (11, 0, 100, Kind.WAKEUP_NEW, 101, 1, 0),
        (12, 1, 0, Kind.SWITCH, 0, 101, 0),             # worker runs on cpu 1
        (20, 0, 100, Kind.FUTEX_ENTER, 0xABC, 0, 0),     # main waits on futex 0xabc
        (21, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        (50, 1, 101, Kind.WAKEUP, 100, 0, 0),            # worker wakes main
        (52, 0, 0, Kind.SWITCH, 0, 100, 0),
        (53, 0, 100, Kind.FUTEX_EXIT, 0, 0, 0),
        (60, 1, 101, Kind.EXIT, 101, 0, 0),
        (61, 1, 101, Kind.SWITCH, 101, 0, X_BIT),
        (70, 0, 100, Kind.EXIT, 100, 0, 0),
        (71, 0, 100, Kind.SWITCH, 100, 0, 32),
    ]


def test_fork_run_futex_wait_wakeup_exit():
    e = ev(fork_wait_exit_rows())
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 21, R), (21, 50, SY), (50, 52, RN), (52, 71, R)]
    assert intervals(tr, 101) == [(11, 12, RN), (12, 61, R)]  # queued by its WAKEUP_NEW, not its fork
    s = tr.states
    wait = (s.tid == 100) & (s.state == SY)
    assert s.addr[wait][0] == 0xABC and s.waker[wait][0] == 101
    assert tr.meta["chain_gaps"] == 0 and tr.wall_ns == 71
    assert list(tr.threads.exited) == [True, True]


def test_a_child_is_runnable_from_its_wakeup_not_its_fork():
    # the parent is preempted between the fork and the child's first wakeup (4 threads on 2 vCPUs:
    # up to 1.7 ms): the kernel queues the child only at WAKEUP_NEW, and its run delay counts from there
    rows = [
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (10, 0, 100, Kind.FORK, 100, 101, 0),
        (11, 0, 100, Kind.SWITCH, 100, 0, 0),       # the parent is preempted
        (14, 0, 0, Kind.SWITCH, 0, 100, 0),
        (15, 0, 100, Kind.WAKEUP_NEW, 101, 1, 0),
        (18, 1, 0, Kind.SWITCH, 0, 101, 0),
        (60, 1, 101, Kind.EXIT, 101, 0, 0),
        (61, 1, 101, Kind.SWITCH, 101, 0, X_BIT),
        (70, 0, 100, Kind.EXIT, 100, 0, 0),
        (71, 0, 100, Kind.SWITCH, 100, 0, 32),
    ]
    tr = build_trace(ev(rows), root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(15, 18, RN), (18, 61, R)]
    assert int(tr.threads.start_ns[tr.threads.tid.tolist().index(101)]) == 15
    assert intervals(tr, 100) == [(0, 11, R), (11, 14, RN), (14, 71, R)]
    # without a WAKEUP_NEW in the recording (a perf script text without it) the fork queues the child
    tr = build_trace(ev([r for r in rows if r[3] != Kind.WAKEUP_NEW]), root_pids=[100])
    assert intervals(tr, 101) == [(10, 18, RN), (18, 61, R)]


def test_preemption_and_io_and_sleep():
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (5, 0, 100, Kind.SWITCH, 100, 7, 0),          # preempted by an unrelated task 7
        (9, 0, 7, Kind.SWITCH, 7, 100, S_BIT),
        (15, 0, 100, Kind.SWITCH, 100, 0, D_BIT),     # disk wait
        (20, 0, 0, Kind.WAKEUP, 100, 0, 0),
        (21, 0, 0, Kind.SWITCH, 0, 100, 0),
        (25, 0, 100, Kind.SWITCH, 100, 0, S_BIT),     # plain sleep (no futex)
        (40, 0, 0, Kind.SWITCH, 0, 7, 0),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 100) == [(0, 5, R), (5, 9, RN), (9, 15, R), (15, 20, IO), (20, 21, RN), (21, 25, R),
                                  (25, 40, SL)]


def test_missing_switch_in_after_wakeup_is_repaired_at_the_wakeup():
    # cpu 1 goes idle at 10; worker is woken at 20 for cpu 1; the idle->worker switch is lost
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 101, 0),
        (5, 1, 101, Kind.FUTEX_ENTER, 0x10, 0, 0),
        (10, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (20, 0, 100, Kind.WAKEUP, 101, 1, 0),
        # lost: (21, 1, 0, SWITCH, 0 -> 101)
        (30, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (40, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (50, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    w = intervals(tr, 101)
    assert w[:4] == [(1, 2, RN), (2, 10, R), (10, 20, SY), (20, 40, R)]
    assert tr.meta["chain_gaps"] == 1
    assert tr.meta["repaired_intervals"] == {"101": 1}
    assert tr.meta["repair_uncertainty_ns"] == {"101": 10}  # the switch-in lies in [20, 30]
    rep = tr.states.repaired[(tr.states.tid == 101) & (tr.states.start_ns == 20)]
    assert rep.tolist() == [True]


def test_missing_switch_in_of_a_sleeper_is_put_midway_between_its_bounds():
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 101, 0),
        (10, 1, 101, Kind.SWITCH, 101, 0, S_BIT),      # sleeps (not in a futex)
        # lost: wakeup from idle, idle -> 101
        (30, 1, 101, Kind.SWITCH, 101, 0, S_BIT),      # first proof it ran
        (50, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(1, 2, RN), (2, 10, R), (10, 20, SL), (20, 30, R), (30, 50, SL)]
    assert tr.meta["repair_uncertainty_ns"] == {"101": 10}


def test_missing_switch_in_of_a_futex_waiter_starts_at_its_first_own_event():
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 101, 0),
        (5, 1, 101, Kind.FUTEX_ENTER, 0x10, 0, 0),
        (10, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        # lost: wakeup from idle, idle -> 101
        (30, 1, 101, Kind.FUTEX_EXIT, 0, 0, 0),
        (40, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (50, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    assert intervals(tr, 101)[:4] == [(1, 2, RN), (2, 10, R), (10, 30, SY), (30, 40, R)]


def test_migration_bounds_the_switch_in_of_a_preempted_thread():
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 0, 100, Kind.SWITCH, 100, 101, 0),         # main preempted by the worker on cpu 0
        (3, 1, 5, Kind.SWITCH, 5, 0, S_BIT),           # cpu 1 goes idle
        (9, 0, 101, Kind.SWITCH, 101, 100, 0),         # worker preempted back
        (20, 1, 0, Kind.MIGRATE, 101, 0, 1),           # idle cpu 1 pulls the worker
        # lost: idle -> 101 on cpu 1
        (35, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (50, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 101)[:4] == [(1, 2, RN), (2, 9, R), (9, 20, RN), (20, 35, R)]


def test_kernel_runtime_accounting_is_compared():
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (4, 0, 100, Kind.STAT_RUNTIME, 100, 4, 0),
        (10, 0, 100, Kind.STAT_RUNTIME, 100, 6, 0),
        (10, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        (20, 0, 0, Kind.SWITCH, 0, 7, 0),
    ])
    tr = build_trace(e, root_pids=[100])
    check = tr.meta["kernel_runtime_check"]
    assert check["available"] and check["per_thread"] == {"100": [10, 10]} and check["disagreeing"] == []


def test_only_the_process_tree_is_traced():
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 7, 0),           # unrelated task 7
        (3, 1, 7, Kind.FORK, 7, 8, 0),
        (9, 0, 100, Kind.SWITCH, 100, 101, 0),
        (12, 0, 101, Kind.SWITCH, 101, 100, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    assert sorted(tr.threads.tid.tolist()) == [100, 101]


@st.composite
def event_streams(draw):
    """Plausible scheduler streams for 3 traced threads + 1 foreign on 2 CPUs, with drops."""
    tids = [100, 101, 102]
    rows = [(0, 0, 0, Kind.SWITCH, 0, 100, 0), (1, 0, 100, Kind.FORK, 100, 101, 0), (2, 0, 100, Kind.FORK, 100, 102, 0)]
    on_cpu = {0: 100, 1: 0}
    t = 3
    for _ in range(draw(st.integers(0, 60))):
        t += draw(st.integers(0, 5))
        cpu = draw(st.integers(0, 1))
        cur = on_cpu[cpu]
        choice = draw(st.integers(0, 5))
        if choice == 0:
            nxt = draw(st.sampled_from([0, 7, *tids]))
            if nxt in on_cpu.values() and nxt != 0:
                continue
            ps = draw(st.sampled_from([0, S_BIT, D_BIT]))
            rows.append((t, cpu, cur, Kind.SWITCH, cur, nxt, ps))
            on_cpu[cpu] = nxt
        elif choice == 1:
            rows.append((t, cpu, cur, Kind.WAKEUP, draw(st.sampled_from(tids)), draw(st.integers(0, 1)), 0))
        elif choice == 2:
            rows.append((t, cpu, cur, Kind.FUTEX_ENTER, 0x40, draw(st.sampled_from([0, 1, 9, 128])), 0))
        elif choice == 3:
            rows.append((t, cpu, cur, Kind.FUTEX_EXIT, 0, 0, 0))
        elif choice == 4:
            rows.append((t, cpu, cur, Kind.RENAME, cur, 0, 0))
        else:  # a runtime report, possibly inconsistent with the switches
            rows.append((t, cpu, cur, Kind.STAT_RUNTIME, draw(st.sampled_from(tids)), draw(st.integers(1, 30)), 0))
    keep = draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    rows = rows[:3] + [r for r, k in zip(rows[3:], keep[3:], strict=True) if k or r[3] != Kind.SWITCH]
    return ev(rows)


@settings(max_examples=150, deadline=None)
@given(event_streams())
def test_states_always_tile_lifetimes(events):
    tr = build_trace(events, root_pids=[100])
    tr.validate()
    # every traced thread's time adds up to its lifetime
    life = tr.threads.end_ns - tr.threads.start_ns
    assert np.array_equal(tr.time_in_states().sum(axis=1), life)


@settings(max_examples=100, deadline=None)
@given(event_streams(), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 1),
                                           st.sampled_from([-1, 0, 7, 100, 101, 102])), max_size=30))
def test_cpu_samples_change_no_state(events, samples):
    """CPU samples (read by perf script only, so present or not with perf) of any task, the unnamed
    one (-1) included, anywhere among the events: the same states and switch spans as without them.
    (The trace spans every event recorded: a sample after the last tracepoint extends it.)"""
    last = int(events.time[-1])
    with_samples = concat_events([events, ev([(min(t, last), c, x, Kind.SAMPLE, 0x1000 + t, 0, 0)
                                              for t, c, x in samples])]).sorted()
    bare, sampled = build_trace(events, root_pids=[100]), build_trace(with_samples, root_pids=[100])
    assert sampled.states == bare.states and sampled.switch_spans == bare.switch_spans
    assert {k: sampled.meta[k] for k in ("chain_gaps", "chain_gaps_traced")} == \
        {k: bare.meta[k] for k in ("chain_gaps", "chain_gaps_traced")}


def test_an_event_of_an_unnamed_task_shows_nothing():
    """The kernel names no task (tid -1) in the events an exiting thread makes after its unhash: its
    runtime report at 10 neither breaks CPU 0's chain (the worker leaves it at 10) nor ends the worker's
    run; a report on CPU 1 at 9 in task 7 does (7 was not switched in there: the main thread's
    switch-out was lost)."""
    rows = [(0, 0, 0, Kind.SWITCH, 0, 100, 0), (1, 0, 100, Kind.FORK, 100, 101, 0),
            (2, 0, 100, Kind.SWITCH, 100, 101, S_BIT), (3, 1, 0, Kind.SWITCH, 0, 100, 0),
            (10, 0, -1, Kind.STAT_RUNTIME, 101, 8, 0), (10, 0, 101, Kind.SWITCH, 101, 0, S_BIT),
            (20, 1, 100, Kind.SWITCH, 100, 0, S_BIT)]
    tr = build_trace(ev(rows), root_pids=[100])
    assert intervals(tr, 101) == [(1, 2, RN), (2, 10, R), (10, 20, SL)]
    assert tr.meta["chain_gaps"] == 0 and tr.meta["repaired_intervals"] == {}
    foreign = build_trace(ev([*rows[:4], (9, 1, 7, Kind.STAT_RUNTIME, 7, 7, 0), *rows[4:]]), root_pids=[100])
    assert foreign.meta["chain_gaps"] == 2 and foreign.meta["repaired_intervals"] == {"100": 2}


@settings(max_examples=40, deadline=None)
@given(event_streams(), st.sampled_from([None, 4, 30]))
def test_names_and_spans_made_aside_are_those_made_after(events, end_ns):
    """On a second thread (`Aside`, where the process has two CPUs) or in turn, the same trace; in a
    window some threads' states do not reach, the names and spans are made again for those that do."""
    import os

    from scalestack.trace import builder

    real = os.sched_getaffinity
    try:
        aside = build_trace(events, root_pids=[100], end_ns=end_ns)
        builder.os.sched_getaffinity = lambda _pid: {0}
        in_turn = build_trace(events, root_pids=[100], end_ns=end_ns)
    except UserError as exc:
        assert "window is empty" in str(exc)
        return
    finally:
        builder.os.sched_getaffinity = real
    for name in ("threads", "states", "names", "switch_spans", "samples"):
        assert getattr(aside, name) == getattr(in_turn, name), name
    assert aside.meta == in_turn.meta


def test_aside_work_fails_where_it_is_asked_for():
    from scalestack.trace.builder import Aside

    def work(present):
        if len(present) == 2:
            raise ValueError("no names")
        return present.sum()

    aside = Aside(np.array([3, 5]), {"names": work})
    assert aside.get("names", np.array([5])) == 5  # other threads: made again
    with pytest.raises(ValueError, match="no names"):
        aside.get("names", np.array([3, 5]))


def test_running_follows_the_kernels_runtime_reports():
    # the switch into the worker at 20 was lost and nothing else says when it ran; the
    # scheduler's report at 30 says it had run 4 ns, its report at 40 another 10
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 101, 0),
        (9, 1, 101, Kind.STAT_RUNTIME, 101, 7, 0),
        (9, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (30, 1, 101, Kind.STAT_RUNTIME, 101, 4, 0),
        (40, 1, 101, Kind.STAT_RUNTIME, 101, 10, 0),
        (40, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (50, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(1, 2, RN), (2, 9, R), (9, 26, SL), (26, 40, R), (40, 50, SL)]
    assert tr.meta["running_reconciled_ns"] == {}


def _uncharged_run(charged_again_at, run_end, extra=()):
    """The worker is switched in at 2 and out at `run_end` (both switches seen); the scheduler
    charged it only [2, 10] and [charged_again_at, run_end]."""
    return ev(sorted([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 101, 0),
        (10, 1, 101, Kind.STAT_RUNTIME, 101, 8, 0),
        (run_end, 1, 101, Kind.STAT_RUNTIME, 101, run_end - charged_again_at, 0),
        (run_end, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (run_end + 10, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
        *extra,
    ], key=lambda r: r[0]))


def test_running_the_kernel_did_not_charge_is_given_back():
    # the switches say the worker ran from 2 to 40 (a switch-out/in pair was lost between), but
    # the scheduler charged it only [2, 10] and [30, 40]
    tr = build_trace(_uncharged_run(30, 40), root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(1, 2, RN), (2, 10, R), (10, 30, RN), (30, 40, R), (40, 50, SL)]
    assert tr.meta["running_reconciled_ns"] == {"101": [0, 20]}
    rep = tr.states.repaired[(tr.states.tid == 101) & (tr.states.start_ns == 10)]
    assert rep.tolist() == [True]


def _stolen_run(extra=()):
    """300 us uncharged while the worker was current."""
    return _uncharged_run(300_030, 400_040, extra)


def test_an_uncharged_stretch_with_the_cpu_silent_is_steal_not_run_delay():
    # nothing else ran on CPU 1: the thread stayed current while the hypervisor ran another
    # guest. The kernel charges that neither as CPU time nor as run delay.
    tr = build_trace(_stolen_run(), root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(1, 2, RN), (2, 10, R), (10, 300_030, UN), (300_030, 400_040, R),
                                  (400_040, 400_050, SL)]
    assert tr.meta["steal_ns"] == {"101": 300_020}


def test_an_uncharged_stretch_where_another_task_ran_stays_run_delay():
    # another task's event on CPU 1 inside the stretch: the worker was switched out (a lost pair)
    tr = build_trace(_stolen_run([(150_000, 1, 7, Kind.STAT_RUNTIME, 7, 1000, 0)]), root_pids=[100])
    tr.validate()
    assert UN not in [st for _a, _b, st in intervals(tr, 101)]
    assert tr.meta["steal_ns"] == {}


def test_an_uncharged_stretch_after_a_futex_wait_is_sleep_not_steal():
    # the worker's last event before the silence entered a futex wait: it slept (switch-out lost)
    tr = build_trace(_stolen_run([(11, 1, 101, Kind.FUTEX_ENTER, 0xABC, 0, 0)]), root_pids=[100])
    tr.validate()
    assert UN not in [st for _a, _b, st in intervals(tr, 101)]
    assert tr.meta["steal_ns"] == {}


def test_a_short_uncharged_stretch_stays_run_delay():
    # 20 us: the kernel's clock skew around a wakeup, which its own figures count as run delay
    tr = build_trace(_uncharged_run(20_030, 120_040), root_pids=[100])
    assert (10, 20_030, RN) in intervals(tr, 101)
    assert tr.meta["steal_ns"] == {}


def test_an_uncharged_stretch_at_a_runs_start_is_steal_though_the_switch_into_it_falls_inside():
    # The worker is preempted by task 7 at 20; 7 switches back to it at 21_600, 1.6 us after its own
    # last runtime report (20_000), where the switch instant is placed; the eBPF collector's
    # run-delay record of that switch follows at 21_750. The worker's next report (700_000, 200 us)
    # leaves [20_000, 500_000) uncharged with nothing but that switch on CPU 1: steal (xz -T2 on this
    # VM: 470 us at the start of runs, which the switch's own events kept RUNNABLE, +1.4 ms).
    e = ev([
        (0, 0, 0, Kind.SWITCH, 0, 100, 0),
        (1, 0, 100, Kind.FORK, 100, 101, 0),
        (2, 1, 0, Kind.SWITCH, 0, 101, 0),
        (20, 1, 101, Kind.STAT_RUNTIME, 101, 18, 0),
        (20, 1, 101, Kind.SWITCH, 101, 7, 0),
        (20_000, 1, 7, Kind.STAT_RUNTIME, 7, 19_980, 0),
        (21_600, 1, 7, Kind.SWITCH, 7, 101, S_BIT),
        (21_750, 1, 7, Kind.RUN_DELAY, 7, 5_000, 3),
        (700_000, 1, 101, Kind.STAT_RUNTIME, 101, 200_000, 0),
        (700_000, 1, 101, Kind.SWITCH, 101, 0, S_BIT),
        (700_010, 0, 100, Kind.SWITCH, 100, 0, S_BIT),
    ])
    tr = build_trace(e, root_pids=[100])
    tr.validate()
    assert intervals(tr, 101) == [(1, 2, RN), (2, 20, R), (20, 20_000, RN), (20_000, 500_000, UN),
                                  (500_000, 700_000, R), (700_000, 700_010, SL)]
    assert tr.meta["steal_ns"] == {"101": 480_000}
