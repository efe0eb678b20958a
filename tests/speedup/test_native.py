"""Speedup stacks of native programs (issue 27): serial windows, who is a worker, spinning."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.analysis.serial import classify_threads, sweep
from scalestack.analysis.speedup import COMPONENTS, speedup_stack, with_spin
from scalestack.sim.engine import simulate
from scalestack.sim.workloads import coordinator, participates, spin_barriers
from scalestack.trace import State, make_trace

R, Q, S, SL = int(State.RUNNING), int(State.RUNNABLE), int(State.SYNC_WAIT), int(State.SLEEP)


def _trace(threads, rows, end):
    """threads: [(tid, name, role, start, end)]; rows: [(tid, start, end, state)]."""
    tid, name, role, a, b = zip(*threads, strict=True)
    t, s, e, k = zip(*rows, strict=True)
    return make_trace({"tid": list(tid), "name": list(name), "role": list(role), "start_ns": list(a),
                       "end_ns": list(b), "pid": [tid[0]] * len(tid)},
                      {"tid": list(t), "start_ns": list(s), "end_ns": list(e), "state": list(k)},
                      meta={"start_ns": 0, "end_ns": end})


def test_worked_example_openmp_like():
    """Master M and one pool thread P, 2 threads, T_p = 20 (ms, say):
    0-2 M alone (serial); 2-10 both run; 10-12 M alone (serial, P waits on a futex);
    12-14 P runnable alone (another process has the cores; M waits for it): a contention window;
    14-18 both run; 18-20 M alone (serial tail) while P waits. The 1-thread run: M alone for 30.
    Serial windows: 2 + 2 + 2 = 6 -> SEQ = (2 - 1)·6/20 = 0.30 (thesis eq. 3.12). P's futex waits
    lie in serial windows: SYNC = 0. CONT: P's 2 runnable + (N - 1)·2 for M waiting in the
    contention window = 4 -> 0.20. S = 30/20 = 1.5; OTHER = 2 - 1.5 - 0.3 - 0.2 = 0."""
    multi = _trace([(1, "prog", "main", 0, 20), (2, "prog", "app", 2, 20)],
                   [(1, 0, 10, R), (1, 10, 12, R), (1, 12, 14, S), (1, 14, 20, R),
                    (2, 2, 10, R), (2, 10, 12, S), (2, 12, 14, Q), (2, 14, 18, R), (2, 18, 20, S)], 20)
    single = _trace([(1, "prog", "main", 0, 30)], [(1, 0, 30, R)], 30)
    s = speedup_stack(single, multi, 2)
    assert s.form == "native" and s.workers == 2
    assert math.isclose(s.speedup, 1.5)
    assert math.isclose(s.seq, 0.30) and math.isclose(s.seq_thesis, 0.30)
    assert not s.seq_st_measured and math.isclose(s.seq_general, 0.30)  # one thread: T_seq,ST taken equal
    assert math.isclose(s.sync, 0.0, abs_tol=1e-12) and math.isclose(s.cont, 0.20)
    assert math.isclose(s.other, 0.0, abs_tol=1e-12) and math.isclose(s.total(), 2.0)
    a, b = classify_threads(multi).sweep.serial_spans()
    assert a.tolist() == [0, 10, 18] and b.tolist() == [2, 12, 20]


def test_worked_example_coordinator_and_general_form():
    """A coordinator C feeds two workers W1, W2 (T_p = 48): C reads alone 0-8, both workers run
    8-40 while C is active 7 of those 32 (it works beside them, so it is no driver), C writes alone
    40-48. The 1-thread run (C + one worker, T_s = 80): C alone 0-8, the worker alone 8-72 (C waits),
    C alone 72-80. C is a coordinator, not a slot: 2 workers. T_seq = 16 at N, and 16 at 1 (outside
    the worker's life): thesis (2 - 1)·16/48 = 1/3, general (2·16 - 16)/48 = 1/3. The workers' futex
    waits while C runs alone are SEQ, not SYNC; C's waits are not SYNC either."""
    multi = _trace([(1, "c", "main", 0, 48), (2, "w1", "app", 8, 40), (3, "w2", "app", 8, 40)],
                   [(1, 0, 8, R), (1, 8, 20, S), (1, 20, 27, R), (1, 27, 40, S), (1, 40, 48, R),
                    (2, 8, 40, R), (3, 8, 40, R)], 48)
    single = _trace([(1, "c", "main", 0, 80), (2, "w1", "app", 8, 72)],
                    [(1, 0, 8, R), (1, 8, 72, S), (1, 72, 80, R), (2, 8, 72, R)], 80)
    s = speedup_stack(single, multi, 2)
    assert s.form == "native" and s.workers == 2
    assert [t["kind"] for t in s.threads] == ["coordinator"] and s.threads[0]["tid"] == 1
    assert s.seq_st_measured and math.isclose(s.t_seq_st_ns, 16) and math.isclose(s.t_seq_mt_ns, 16)
    assert math.isclose(s.seq, 1 / 3) and math.isclose(s.seq_general, 1 / 3)
    assert math.isclose(s.sync, 0.0, abs_tol=1e-12)
    assert math.isclose(s.total(), 2.0)


def _naive_serial(intervals, t1):
    """Serial-window time by brute force over every integer instant (a run/queued count per ns)."""
    run, queued = np.zeros(t1, int), np.zeros(t1, int)
    for a, b, state in intervals:
        (run if state == R else queued)[a:b] += 1
    act = run + queued
    return int(np.sum((act == 0) | ((act == 1) & (run == 1)))), int(np.sum((act == 1) & (run == 0)))


@st.composite
def random_threads(draw):
    """2-4 threads whose states tile [0, T) with random RUNNING / RUNNABLE / SYNC_WAIT / SLEEP spans."""
    t1 = draw(st.integers(20, 60))
    n = draw(st.integers(2, 4))
    rows = []
    for tid in range(1, n + 1):
        cuts = sorted(set(draw(st.lists(st.integers(1, t1 - 1), max_size=6))))
        edges = [0, *cuts, t1]
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            rows.append((tid, a, b, draw(st.sampled_from([R, R, Q, S, SL]))))
    threads = [(tid, f"t{tid}", "main" if tid == 1 else "app", 0, t1) for tid in range(1, n + 1)]
    return threads, rows, t1


@given(random_threads())
@settings(max_examples=60, deadline=None)
def test_sweep_line_matches_brute_force(case):
    threads, rows, t1 = case
    tr = _trace(threads, rows, t1)
    sw = sweep(tr, np.ones(len(threads), bool))
    ser, cont = _naive_serial([(a, b, k) for _t, a, b, k in rows if k in (R, Q)], t1)
    assert math.isclose(sw.serial_ns, ser) and math.isclose(sw.cont_ns, cont)


@given(random_threads(), random_threads(), st.integers(2, 8))
@settings(max_examples=60, deadline=None)
def test_native_stack_sums_to_n_and_its_terms_are_not_negative(m, s1, n):
    multi, single = _trace(*m), _trace(*s1)
    stack = speedup_stack(single, multi, n, form="native")
    assert math.isclose(stack.total(), n, rel_tol=1e-9, abs_tol=1e-9)
    # by construction: (N - 1)·T_serial >= 0, and SYNC / IMB count waits outside the windows only
    assert stack.seq >= 0 and stack.seq_thesis >= 0 and stack.sync >= 0 and stack.imb >= 0


@given(st.sampled_from([participates, coordinator]), st.sampled_from([2, 4]), st.integers(0, 50), st.integers(1, 3))
@settings(max_examples=12, deadline=None)
def test_simulated_native_patterns_sum_to_n(pattern, n, seed, spare_cores):
    one = simulate(pattern(1, seed), cores=n + spare_cores)
    many = simulate(pattern(n, seed), cores=n + spare_cores)
    s = speedup_stack(one.trace, many.trace, n)
    assert math.isclose(s.total(), n, rel_tol=1e-9)
    assert s.form == "native" and s.workers == n
    assert all(getattr(s, c) > -0.05 * n for c in COMPONENTS)


def test_participating_main_thread_seq_is_its_serial_parts():
    """The main thread works in the loops too: the old SEQ (its box height, N·C(N) − C(1)) is far
    below zero here; the serial windows give the designed serial parts, (N − 1)·T_serial/T_p."""
    wl1, wl4 = participates(1), participates(4)
    one, four = simulate(wl1, cores=8), simulate(wl4, cores=8)
    s = speedup_stack(one.trace, four.trace, 4)
    designed = 3 * wl4["serial_cycles"] / 2.0 / four.runtime_ns  # 2 GHz
    assert s.form == "native" and abs(s.seq - designed) < 0.05 * 4
    old = speedup_stack(one.trace, four.trace, 4, form="managed")
    assert old.seq_general < -0.5  # N·C_main(N) − C_main(1): what issue 27 reported for OpenMP (-0.73 at N = 2)
    assert abs(s.other) < 0.05 and abs(s.total() - 4) < 1e-9


def test_coordinator_gets_its_own_line_not_a_slot():
    one, four = simulate(coordinator(1), cores=16), simulate(coordinator(4), cores=16)
    s = speedup_stack(one.trace, four.trace, 4)
    assert s.workers == 4 and [t["name"] for t in s.threads] == ["main"]
    assert s.threads[0]["kind"] == "coordinator" and s.threads[0]["waits_while_others_work_pct"] > 50
    assert s.sync < 0.1  # the coordinator's waits for its workers are no lost slot


def test_spin_then_block_barrier_is_running_then_sync_wait():
    wl = {"threads": [{"name": "a", "start": True, "ops": [["compute", 200_000], ["barrier", 0, 2, 40_000]]},
                      {"name": "b", "start": True, "ops": [["compute", 400_000], ["barrier", 0, 2, 40_000]]}]}
    res = simulate(wl, cores=2)  # 2 GHz: a arrives at 100 us, spins 40 us (ns, not cycles), blocks until 200 us
    spins = [(w[1], w[2]) for w in res.truth["waits"] if w[3] == "spinning"]
    assert spins == [(100_000, 140_000)]
    st_ = res.trace.states
    a = st_.tid == 1000
    rows = [(int(x), int(y), int(k)) for x, y, k in zip(st_.start_ns[a], st_.end_ns[a], st_.state[a], strict=True)]
    assert rows == [(0, 140_000, R), (140_000, 200_000, S)]  # the spin is RUNNING, as a recording shows it
    short = {"threads": [{**t, "ops": [t["ops"][0], ["barrier", 0, 2, 150_000]]} for t in wl["threads"]]}
    res = simulate(short, cores=2)  # a spin longer than the wait: a never sleeps
    assert [(w[1], w[2]) for w in res.truth["waits"] if w[3] == "spinning"] == [(100_000, 200_000)]
    assert not np.any(res.trace.states.state == S)


def test_spin_is_booked_from_the_passive_twin():
    def passive(wl):
        out = {**wl, "threads": [dict(t) for t in wl["threads"]]}
        for t in out["threads"]:
            t["ops"] = [op[:3] if op[0] == "barrier" else op for op in t["ops"]]
        return out

    act1, act4 = spin_barriers(1), spin_barriers(4)
    r1, r4 = simulate(act1, cores=8), simulate(act4, cores=8)
    p1, p4 = simulate(passive(act1), cores=8), simulate(passive(act4), cores=8)
    raw = speedup_stack(r1.trace, r4.trace, 4)
    booked = with_spin(raw, r4.trace, p4.trace, r1.trace, p1.trace)
    spun = sum(w[2] - w[1] for w in r4.truth["waits"] if w[3] == "spinning") / r4.runtime_ns
    assert raw.other > 0.5 * spun  # spinning is RUNNING: without the twin it reads as work (OTHER)
    assert math.isclose(booked.seq - raw.seq + booked.spin, spun, rel_tol=0.02)
    assert abs(booked.other) < 0.05 and math.isclose(booked.total(), 4)
    clean = speedup_stack(p1.trace, p4.trace, 4)  # the serial parts, once spinning no longer hides them
    assert abs(booked.seq - clean.seq) < 0.05


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 49), st.integers(1, 30))
def test_a_spinner_kept_off_its_core_in_a_serial_part_is_no_contention(q, at):
    """2 threads, T_p = 100: the master works throughout; in the default run the pool thread spins
    through the serial part [0, 50) (RUNNING) except for q in which another process has its core
    (RUNNABLE), then works [50, 100). Its passive twin sleeps through [0, 50). The 1-thread runs take
    150. ΔSEQ books the whole window [0, 50) as SEQ = 0.5, so the spinner's wait for a CPU there is
    no CONT: S = 1.5, SEQ = 0.5, CONT = 0, OTHER = 0 (before, CONT q/100 and OTHER -q/100)."""
    two = [(1, "prog", "main", 0, 100), (2, "prog", "app", 0, 100)]
    a = min(at, 50 - q)
    rows = [(1, 0, 100, R), (2, 0, a, R), (2, a + q, 100, R)] + ([(2, a, a + q, Q)] if q else [])
    multi = _trace(two, rows, 100)
    twin = _trace(two, [(1, 0, 100, R), (2, 0, 50, S), (2, 50, 100, R)], 100)
    one = _trace([(1, "prog", "main", 0, 150)], [(1, 0, 150, R)], 150)
    raw = speedup_stack(one, multi, 2)
    assert math.isclose(raw.cont, q / 100)
    s = with_spin(raw, multi, twin, one, one)
    assert math.isclose(s.speedup, 1.5) and math.isclose(s.seq, 0.5)
    assert abs(s.cont) < 1e-12 and abs(s.other) < 1e-12 and math.isclose(s.total(), 2)


def test_hidden_serial_time_stays_in_seq_when_the_one_thread_runs_cancel_the_spin():
    """The 1-thread active run noisily longer than its passive twin (by more than the N-thread run
    spins) leaves no spin for SYNC, but the serial time the spinning hid in the N-thread run is
    measured from the twins' windows, and still goes to SEQ."""
    act1, act4 = spin_barriers(1), spin_barriers(4)
    r1, r4 = simulate(act1, cores=8), simulate(act4, cores=8)
    p4 = simulate({**act4, "threads": [{**t, "ops": [op[:3] if op[0] == "barrier" else op for op in t["ops"]]}
                                       for t in act4["threads"]]}, cores=8)
    raw = speedup_stack(r1.trace, r4.trace, 4)
    quiet = with_spin(raw, r4.trace, p4.trace)

    def one_thread(t):
        return make_trace({"tid": [2], "pid": [2], "name": ["prog"], "role": ["main"], "start_ns": [0], "end_ns": [t]},
                          {"tid": [2], "start_ns": [0], "end_ns": [t], "state": [R]}, meta={"start_ns": 0, "end_ns": t})

    slow = r4.runtime_ns  # more than the whole spin of the 4-thread run
    noisy = with_spin(raw, r4.trace, p4.trace, one_thread(2 * slow), one_thread(slow))
    assert quiet.seq > raw.seq + 0.05  # the spinning hid serial time
    assert math.isclose(noisy.seq, quiet.seq) and noisy.spin == raw.spin and math.isclose(noisy.sync, raw.sync)
    assert math.isclose(noisy.total(), 4)


def test_a_shell_around_the_program_is_not_one_of_its_threads():
    """`sh -c "prog > out"`: the shell's thread (the root, role main) waits for the program's whole
    run; the program's own two threads are the candidates, and the shell is neither a worker nor a
    coordinator line."""
    from scalestack.analysis.serial import program_threads

    tr = make_trace({"tid": [1, 2, 3], "pid": [1, 2, 2], "name": ["sh", "prog", "prog"], "role": ["main", "app", "app"],
                     "start_ns": [0, 1, 2], "end_ns": [10, 10, 9]},
                    {"tid": [1, 1, 2, 3], "start_ns": [0, 1, 1, 2], "end_ns": [1, 10, 10, 9],
                     "state": [R, S, R, R]}, meta={"start_ns": 0, "end_ns": 10})
    assert program_threads(tr).tolist() == [False, True, True]
    k = classify_threads(tr, 2)
    assert k.kind.tolist() == ["", "worker", "worker"]
    one = make_trace({"tid": [1, 2], "pid": [1, 2], "name": ["sh", "prog"], "role": ["main", "app"],
                      "start_ns": [0, 1], "end_ns": [16, 16]},
                     {"tid": [1, 1, 2], "start_ns": [0, 1, 1], "end_ns": [1, 16, 16], "state": [R, S, R]},
                     meta={"start_ns": 0, "end_ns": 16})
    s = speedup_stack(one, tr, 2)
    assert s.form == "native" and s.workers == 2 and s.threads == ()
    # 0-1: the shell alone, 1-2 and 9-10: one program thread alone -> T_seq = 3 of 10
    assert math.isclose(s.seq, 0.3) and math.isclose(s.sync, 0.0, abs_tol=1e-12)


def test_a_large_other_without_twins_names_spinning_as_a_cause():
    """numpy's OpenBLAS sweep without twin runs read OTHER 0.45 at N = 2 (its worker spins through the
    serial Python): the notes say how to tell spinning from slower work. With twins, or a small OTHER, no note."""
    from scalestack.analysis.speedup import SpeedupStack
    from scalestack.report.sweep import stack_notes

    def stack(other):
        return SpeedupStack(n=2, speedup=2 - 0.06 - other, gc=0.0, seq=0.05, sync=0.0, imb=0.0, cont=0.01,
                            other=other, form="native", workers=2)

    hint = [ln for ln in stack_notes([stack(0.45)]) if "OTHER 0.45" in ln]
    assert len(hint) == 1 and "--passive-env" in hint[0] and "--omp-passive" in hint[0] and "--pirate" in hint[0]
    assert not [ln for ln in stack_notes([stack(0.45)], twins=True) if "OTHER" in ln]
    assert not [ln for ln in stack_notes([stack(0.1)]) if "OTHER" in ln]


def test_a_run_whose_thread_count_did_not_follow_n_is_named():
    """`java -XX:ActiveProcessorCount={threads}` with a parallel stream: the common pool has one
    worker beside main() at both 1 and 2, so both runs had 2 working threads and the speedup was
    1.01. The notes say the N = 1 run did not run 1 thread; runs that did get no such line."""
    from scalestack.analysis.speedup import SpeedupStack
    from scalestack.report.sweep import stack_notes

    def stack(n, workers):
        return SpeedupStack(n=n, speedup=1.0, gc=0.0, seq=0.0, sync=0.0, imb=0.0, cont=0.0, other=n - 1.0,
                            form="managed", workers=workers)

    notes = stack_notes([stack(1, 2), stack(2, 2)])
    off = [ln for ln in notes if "did not follow" in ln]
    assert len(off) == 1 and off[0].startswith("N = 1: 2 threads did the work, not 1"), notes
    assert not [ln for ln in stack_notes([stack(1, 1), stack(2, 2)]) if "did not follow" in ln]


def test_idle_helper_threads_share_one_line_of_the_notes():
    """node's V8 platform threads (6, active 0.0-0.3% of the run) each got a coordinator line; those
    under 1% now share one, and a coordinator that works (xz's main thread) keeps its own."""
    from scalestack.analysis.speedup import SpeedupStack
    from scalestack.report.sweep import stack_notes

    def line(tid, active):
        return {"tid": tid, "name": "node", "kind": "coordinator", "active_pct": active, "alone_pct": 0.0,
                "waits_while_others_work_pct": 90.0}

    st = SpeedupStack(n=2, speedup=1.78, gc=0.0, seq=0.15, sync=0.01, imb=0.0, cont=0.03, other=0.03,
                      form="managed", workers=2, threads=(line(11, 4.0), *(line(20 + k, 0.1 * k) for k in range(6))))
    notes = [ln for ln in stack_notes([st]) if "coordinator" in ln]
    assert len(notes) == 2 and "thread 11 (node) is a coordinator" in notes[0], notes
    assert notes[1].startswith("N = 2: 6 more threads (node)") and "20, 21, 22, 23, 24, 25" in notes[1], notes


def test_the_baseline_and_its_twin_measure_the_run_to_run_noise():
    """The 1-thread run and its passive twin do the same work: their spread (here 150 against 165,
    10%) is what S and OTHER are uncertain by, said in the notes; without twins there is none."""
    from scalestack.analysis.sweep import stacks
    from scalestack.report.sweep import stack_notes

    two = [(1, "prog", "main", 0, 100), (2, "prog", "app", 0, 100)]
    multi = _trace(two, [(1, 0, 100, R), (2, 0, 100, R)], 100)
    twin = _trace(two, [(1, 0, 100, R), (2, 0, 50, S), (2, 50, 100, R)], 100)

    def one(t):
        return _trace([(1, "prog", "main", 0, t)], [(1, 0, t, R)], t)

    res = stacks({1: one(150), 2: multi}, {1: one(165), 2: twin})
    assert [r.baseline_spread for r in res] == [0.1, 0.1]
    assert any("10.0% apart" in line and "±0.15" in line for line in stack_notes(res, twins=True))
    alone = stacks({1: one(150), 2: multi})
    assert math.isnan(alone[1].baseline_spread) and not any("apart" in line for line in stack_notes(alone))
    assert alone[1].to_dict()["baseline_spread"] is None
