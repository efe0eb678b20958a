"""Critical functions, lock naming and the stacks reader on hand-made inputs with known answers."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.analysis.where import collapsed, where
from scalestack.ingest.perf_stacks import parse_stacks
from scalestack.symbols.elf import ElfSymbols
from scalestack.symbols.locks import Mapping, _named, name_futexes
from scalestack.trace import FrameTable, FutexCallTable, StackTable, State, make_trace
from scalestack.trace.model import SampleTable

MS = 1_000_000


def _trace(running: dict[int, list[tuple[int, int]]], end: int, samples: list[tuple[int, int, int]],
           frames: list[tuple[str, str]], stacks: list[list[int]], hz: int = 1000, waits=(), calls=None, meta=None):
    """Threads whose RUNNING intervals are given (SLEEP elsewhere, or SYNC_WAIT for `waits`
    (tid, start, end, addr, waker)); samples (tid, time, stack id)."""
    tids = sorted(running)
    st_rows = []
    for t in tids:
        busy = sorted([(a, b, State.RUNNING, 0, -1) for a, b in running[t]]
                      + [(a, b, State.SYNC_WAIT, addr, wk) for tt, a, b, addr, wk in waits if tt == t])
        cur = 0
        for a, b, s, addr, wk in busy:
            if a > cur:
                st_rows.append((t, cur, a, State.SLEEP, 0, -1))
            st_rows.append((t, a, b, s, addr, wk))
            cur = b
        if cur < end:
            st_rows.append((t, cur, end, State.SLEEP, 0, -1))
    cols = list(zip(*st_rows, strict=True))
    trace = make_trace(
        {"tid": tids, "name": [f"w{t}" for t in tids], "start_ns": [0] * len(tids), "end_ns": [end] * len(tids)},
        {"tid": cols[0], "start_ns": cols[1], "end_ns": cols[2], "state": cols[3], "addr": cols[4], "waker": cols[5]},
        meta={"sample_hz": hz, **(meta or {})},
        samples={"tid": [s[0] for s in samples], "time_ns": [s[1] for s in samples], "cpu": [0] * len(samples),
                 "ip": [0] * len(samples), "offset": [0] * len(samples),
                 "symbol": [frames[stacks[s[2]][0]][0] for s in samples],
                 "binary": [frames[stacks[s[2]][0]][1] for s in samples], "stack": [s[2] for s in samples]},
    )
    import dataclasses

    fr = FrameTable(ip=np.arange(len(frames), dtype=np.uint64), symbol=[f[0] for f in frames],
                    offset=[0] * len(frames), binary=[f[1] for f in frames])
    sid = [i for i, s in enumerate(stacks) for _ in s]
    depth = [d for s in stacks for d in range(len(s))]
    stk = StackTable(stack=sid, depth=depth, frame=[f for s in stacks for f in s])
    fc = FutexCallTable(**calls) if calls else FutexCallTable.empty()
    return dataclasses.replace(trace, frames=fr, stacks=stk, futex_calls=fc)


def test_worked_example_weights_samples_by_running_threads():
    # A runs [0, 10) ms, B runs [5, 10) ms; one sample per ms of each thread's running time.
    # A's first 5 samples run alone (1 ms each), its last 5 beside B (0.5 ms), B's 5 likewise:
    # A 5 + 2.5 = 7.5 ms, B 2.5 ms -- exactly their criticality.
    frames = [("main", "/bin/app"), ("alpha", "/bin/app"), ("beta", "/bin/app")]
    stacks = [[1, 0], [2, 0]]  # leaf first
    samples = [(1, int((k + 0.5) * MS), 0) for k in range(10)] + [(2, int((k + 5.5) * MS), 1) for k in range(5)]
    trace = _trace({1: [(0, 10 * MS)], 2: [(5 * MS, 10 * MS)]}, 10 * MS, samples, frames, stacks)
    res = where(trace)
    got = {t["tid"]: t["criticality_ns"] for t in res.threads}
    assert got == pytest.approx({1: 7.5 * MS, 2: 2.5 * MS})
    crit = scalestack.criticality(trace)
    assert dict(zip(crit.tids.tolist(), crit.criticality_ns.tolist(), strict=True)) == pytest.approx(got)
    fn = {f["function"]: (f["self_ns"], f["total_ns"]) for f in res.functions}
    assert fn["alpha"] == pytest.approx((7.5 * MS, 7.5 * MS))
    assert fn["beta"] == pytest.approx((2.5 * MS, 2.5 * MS))
    assert collapsed(res).splitlines() == ["main;alpha 7500", "main;beta 2500"]
    # per window: the first 5 ms are A's alone (5 ms), the rest shared (2.5 ms each)
    first, second = where(trace, between=(0, 5 * MS)), where(trace, between=(5 * MS, 10 * MS))
    assert {t["tid"]: t["criticality_ns"] for t in first.threads} == pytest.approx({1: 5 * MS, 2: 0.0})
    assert {t["tid"]: t["criticality_ns"] for t in second.threads} == pytest.approx({1: 2.5 * MS, 2: 2.5 * MS})


def _lock_scene(frames, stacks, meta=None):
    """Threads 2 and 3 wait on futex 0x1000 during [1, 6) and [2, 8) ms while thread 1, their waker,
    runs [0, 10) ms sampled every ms: its samples have stack 0, the wait calls stack 1, the wakes
    stack 2 (of `stacks`, over `frames`)."""
    samples = [(1, int((k + 0.5) * MS), 0) for k in range(10)]
    waits = [(2, 1 * MS, 6 * MS, 0x1000, 1), (3, 2 * MS, 8 * MS, 0x1000, 1)]
    calls = {"tid": [2, 3, 1, 1], "time_ns": [1 * MS - 10, 2 * MS - 10, 6 * MS - 100, 8 * MS - 100],
             "op": [0, 0, 1, 1], "addr": [0x1000] * 4, "stack": [1, 1, 2, 2]}
    return _trace({1: [(0, 10 * MS)], 2: [(0, 1 * MS), (6 * MS, 7 * MS)], 3: [(0, 1 * MS)]}, 10 * MS, samples,
                  frames, stacks, waits=waits, calls=calls, meta=meta)


def test_lock_holder_releaser_and_serial_share():
    # threads 2 and 3 wait on futex 0x1000 while thread 1 (their waker) runs `hold_it`
    frames = [("start", "/bin/app"), ("hold_it", "/bin/app"), ("__lll_lock_wait", "/usr/lib/libc.so.6"),
              ("wait_here", "/bin/app"), ("__lll_lock_wake", "/usr/lib/libc.so.6"), ("let_go", "/bin/app")]
    stacks = [[1, 0], [2, 3, 0], [4, 5, 0]]
    trace = _lock_scene(frames, stacks, meta={"locks": {"0x1000": {"name": "big_lock"}}})
    trace.validate()
    (lk,) = where(trace).locks
    assert lk["name"] == "big_lock" and lk["how"] == "symbol"
    assert lk["wait_ns"] == 11 * MS and lk["waits"] == 2 and lk["waiters"] == 2
    assert lk["serial_share"] == pytest.approx(0.7)  # someone waits during [1, 8) ms of 10
    assert lk["wait_sites"] == {"wait_here": 2} and lk["releasers"] == {"let_go": 2}
    assert lk["holders"] == {"hold_it": 5 + 6}  # samples of thread 1 inside [1, 6) and [2, 8)
    unnamed = _lock_scene(frames, stacks)
    assert where(unnamed).locks[0]["name"] == "lock waited at wait_here"


@pytest.mark.parametrize("lang, frames, site, releaser", [
    # Rust links std into the program: its mutex's slow path is no call site; a release whose stack
    # holds std's frames only (the closure inlined into them) is named by the first of those
    ("rust", [("std::sys::backtrace::__rust_begin_short_backtrace", "/bin/app"), ("app::hold_it", "/bin/app"),
              ("syscall", "/usr/lib/libc.so.6"), ("<std::sys::sync::mutex::futex::Mutex>::lock_contended", "/bin/app"),
              ("app::wait_here", "/bin/app"), ("std::sys::sync::mutex::futex::Mutex::wake", "/bin/app"),
              ("core::ops::function::FnOnce::call_once", "/bin/app")],
     "app::wait_here", "std::sys::sync::mutex::futex::Mutex::wake"),
    # C++: std's templates instantiated in the program are the library's, the caller is the site
    ("c++", [("std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)()> > >::_M_run()", "/bin/app"),
             ("hold_it()", "/bin/app"), ("__lll_lock_wait", "/usr/lib/libc.so.6"),
             ("std::unique_lock<std::mutex>::lock()", "/bin/app"), ("wait_here()", "/bin/app"),
             ("__lll_lock_wake", "/usr/lib/libc.so.6"), ("let_go()", "/bin/app")],
     "wait_here()", "let_go()"),
])
def test_a_standard_library_compiled_into_the_program_is_no_call_site(lang, frames, site, releaser):
    stacks = [[1, 0], [2, 3, 4, 0], [5, 6, 0]]
    trace = _lock_scene(frames, stacks)
    (lk,) = where(trace).locks
    assert lk["name"] == f"lock waited at {site}" and lk["wait_sites"] == {site: 2}, lk
    assert lk["releasers"] == {releaser: 2}, lk
    # in a program that is not Rust, `core::` is the program's own namespace
    plain = [(n.replace("std::sys::backtrace::__rust_begin_short_backtrace", "start"), b) for n, b in frames]
    plain[3] = ("core::Engine::lock_slow", "/bin/app")
    other = _lock_scene(plain, stacks)
    assert where(other).locks[0]["wait_sites"] == {"core::Engine::lock_slow": 2}


@pytest.mark.parametrize("frame, primitive, todo", [
    (("__lll_lock_wait", "/usr/lib/libc.so.6"), "mutex", "shorter critical sections"),
    (("pthread_cond_wait@@GLIBC_2.3.2", "/usr/lib/libc.so.6"), "condition variable", "before it signals"),
    (("pthread_barrier_wait", "/usr/lib/libc.so.6"), "barrier", "wait for the last to arrive"),
    (("pthread_rwlock_wrlock", "/usr/lib/libc.so.6"), "read-write lock", "fewer writers"),
    (("sem_wait@@GLIBC_2.34", "/usr/lib/libc.so.6"), "semaphore", "before it posts"),
    (("std::sys::sync::condvar::futex::Condvar::wait", "/bin/app"), "condition variable", "before it signals"),
    (("syscall", "/usr/lib/libc.so.6"), "", "between barriers"),  # the generic advice
])
def test_a_locks_primitive_comes_from_its_wait_stacks_and_sets_the_advice(frame, primitive, todo):
    frames = [("std::sys::backtrace::__rust_begin_short_backtrace", "/bin/app"), ("hold_it", "/bin/app"),
              ("syscall", "/usr/lib/libc.so.6"), frame, ("wait_here", "/bin/app"), ("let_go", "/bin/app")]
    stacks = [[1, 0], [2, 3, 4, 0], [5, 0]]
    trace = _lock_scene(frames, stacks)
    (lk,) = where(trace).locks
    assert lk["primitive"] == primitive and lk["name"] == "lock waited at wait_here", lk
    from scalestack.analysis.advice import advise
    # w1..w3 are a pool: its finding names the lock; as threads of no pool, the lock finding does
    f = next(f for f in advise(trace).findings if f.kind == "pool")
    assert todo in f.detail and (f"(a {primitive})" in f.detail) == bool(primitive), f
    th = trace.threads
    names = type(th)(**{**{c: getattr(th, c) for c in th.SCHEMA}, "name": ["main", "reader", "writer"]})
    f = next(f for f in advise(dataclasses.replace(trace, threads=names)).findings if f.kind == "lock")
    assert todo in f.detail and (f"(a {primitive})" in f.title) == bool(primitive), f


def test_openblas_polling_is_spinning_and_its_kernels_are_work():
    """Two threads run alone in turn, 10 samples each: 6 of thread 1's and 4 of thread 2's are in
    OpenBLAS's polling loops (the leaf itself, or a sched_yield called from one), the rest in its
    gemm kernel under them. 10 of 20 ms spin: the finding comes first and says what to do."""
    blas, libc, k = "/x/numpy.libs/libscipy_openblas64_-32a4b2a6.so", "/usr/lib/libc.so.6", "[kernel.kallsyms]"
    frames = [("start_thread", libc), ("blas_thread_server", blas), ("exec_threads", blas), ("inner_thread", blas),
              ("dgemm_kernel_HASWELL", blas), ("do_sched_yield", k), ("__sched_yield", libc), ("exec_blas", blas),
              ("main", "/bin/app")]
    stacks = [[3, 2, 1, 0], [4, 3, 2, 1, 0], [5, 6, 1, 0], [7, 8], [4, 3, 7, 8]]
    samples = ([(1, int((j + 0.5) * MS), [0, 0, 0, 2, 2, 2, 1, 1, 1, 1][j]) for j in range(10)]
               + [(2, int((j + 10.5) * MS), [3, 3, 3, 3, 4, 4, 4, 4, 4, 4][j]) for j in range(10)])
    trace = _trace({1: [(0, 10 * MS)], 2: [(10 * MS, 20 * MS)]}, 20 * MS, samples, frames, stacks)
    res = where(trace)
    assert {t["tid"]: t["spin_ns"] for t in res.threads} == pytest.approx({1: 6 * MS, 2: 4 * MS})
    assert res.spin_share == pytest.approx(0.5)
    assert {f["function"] for f in res.spin_functions} == {"inner_thread", "blas_thread_server", "exec_blas"}
    assert res.thread_functions[1][0] == "dgemm_kernel_HASWELL" == res.thread_functions[2][0]  # the work
    from scalestack.analysis.advice import advise
    first = advise(trace).findings[0]
    assert first.kind == "spin" and first.title == "50% of the run is threads spinning, not working", first
    assert "OPENBLAS_NUM_THREADS" in first.detail and "waited" not in first.detail, first  # no CPU wait here
    # the same names in another library are not OpenBLAS's polling
    other = [(n, "/bin/app") if b == blas else (n, b) for n, b in frames]
    assert where(_trace({1: [(0, 10 * MS)], 2: [(10 * MS, 20 * MS)]}, 20 * MS, samples, other, stacks)).spin_share == 0


def test_samples_in_the_recorders_handlers_are_the_recordings_cost():
    """Thread 1 runs alone [0, 10) ms: 6 samples in its work, 4 inside perf's futex-syscall
    tracepoint handler (what `--stacks` costs: the stack copy at every futex call). 4 ms of its
    10 ms of criticality are the recording's, and its top function stays its own work."""
    k = "[kernel.kallsyms]"
    frames = [("main", "/bin/app"), ("work", "/bin/app"), ("syscall", "/usr/lib/libc.so.6"),
              ("entry_SYSCALL_64_after_hwframe", k), ("perf_syscall_enter", k), ("perf_tp_event", k),
              ("perf_swevent_event", k)]
    stacks = [[1, 0], [6, 5, 4, 3, 2, 1, 0]]
    samples = [(1, int((j + 0.5) * MS), 0 if j < 6 else 1) for j in range(10)]
    trace = _trace({1: [(0, 10 * MS)]}, 10 * MS, samples, frames, stacks)
    res = where(trace)
    (row,) = res.threads
    assert row["recording_ns"] == pytest.approx(4 * MS) and res.recording_share == pytest.approx(0.4)
    assert res.thread_functions[1][0] == "work"  # not perf_swevent_event
    # the same function names outside the kernel are not the recorder's
    user = [(n, "/bin/app") if n.startswith("perf_") else (n, b) for n, b in frames]
    assert where(_trace({1: [(0, 10 * MS)]}, 10 * MS, samples, user, stacks)).recording_share == 0.0


def test_compare_puts_the_recorders_samples_in_one_row():
    """Two recordings of the same 10 ms of work, one with 4 of its 10 samples in perf's handlers
    (whatever leaf each stopped in): compare shows those 4 ms as the recording's own work, not as
    kernel functions of the program."""
    from scalestack.analysis.compare import RECORDING, compare

    k = "[kernel.kallsyms]"
    frames = [("main", "/bin/app"), ("work", "/bin/app"), ("perf_syscall_enter", k), ("perf_tp_event", k),
              ("perf_swevent_event", k), ("memcpy_erms", k)]
    stacks = [[1, 0], [4, 3, 2, 1, 0], [5, 3, 2, 1, 0]]
    recorded = [(1, int((j + 0.5) * MS), [0, 0, 0, 0, 0, 0, 1, 1, 1, 2][j]) for j in range(10)]
    plain = [(1, int((j + 0.5) * MS), 0) for j in range(10)]
    a = _trace({1: [(0, 10 * MS)]}, 10 * MS, recorded, frames, stacks)
    b = _trace({1: [(0, 10 * MS)]}, 10 * MS, plain, frames, stacks)
    rows = {c.label: c for c in compare(a, b).changes if c.kind == "function"}
    assert RECORDING in rows and not any(n.startswith(("perf_", "memcpy")) for n in rows), list(rows)
    assert rows[RECORDING].contribution_ns == pytest.approx(-4 * MS)
    assert rows["work (app)"].contribution_ns == pytest.approx(4 * MS)


def _idle_beside_a_lock():
    """big_lock as in test_lock_holder_releaser_and_serial_share, and beside it threads 4 and 5
    parked on a condition variable (0x2000) for almost the whole run (0.1 ms of running each), and
    thread 6, a JIT compiler thread by its role, waiting on its queue (0x3000) for 8 ms."""
    frames = [("start", "/bin/app"), ("hold_it", "/bin/app")]
    samples = [(1, int((k + 0.5) * MS), 0) for k in range(10)]
    waits = [(2, 1 * MS, 6 * MS, 0x1000, 1), (3, 2 * MS, 8 * MS, 0x1000, 1),
             (4, MS // 10, 10 * MS, 0x2000, -1), (5, MS // 10, 10 * MS, 0x2000, -1), (6, 1 * MS, 9 * MS, 0x3000, 1)]
    trace = _trace({1: [(0, 10 * MS)], 2: [(0, 1 * MS), (6 * MS, 7 * MS)], 3: [(0, 1 * MS)], 4: [(0, MS // 10)],
                    5: [(0, MS // 10)], 6: [(0, 1 * MS), (9 * MS, 10 * MS)]}, 10 * MS, samples, frames, [[1, 0]],
                   waits=waits, meta={"locks": {"0x1000": {"name": "big_lock"}}})
    return trace.with_roles("^w6$=jit")


def test_idle_threads_waits_are_counted_apart():
    trace = _idle_beside_a_lock()
    trace.validate()
    locks = where(trace).locks
    assert [lk["addr"] for lk in locks] == ["0x1000", "0x2000", "0x3000"]  # the one threads that work wait on first
    big, cond, queue = locks
    assert (big["wait_ns"], big["waiters"], big["idle_waiters"], big["idle_wait_ns"]) == (11 * MS, 2, 0, 0)
    assert big["serial_share"] == pytest.approx(0.7)
    # parked (0.1 ms of running beside thread 1's 10 ms: under 2%): their waits count apart
    assert (cond["wait_ns"], cond["waits"], cond["waiters"], cond["serial_share"], cond["critical_share"]) == \
        (0, 0, 0, 0.0, 0.0)
    assert (cond["idle_waiters"], cond["idle_wait_ns"]) == (2, 2 * (10 * MS - MS // 10))
    # a JIT thread is idle by its role, whatever it ran (2 ms here: 20% of the busiest)
    assert (queue["wait_ns"], queue["idle_waiters"], queue["idle_wait_ns"]) == (0, 1, 8 * MS)
    # as an app thread, the same waits are contention
    as_app = where(trace.with_roles("^w6$=app")).locks
    assert next(lk for lk in as_app if lk["addr"] == "0x3000")["wait_ns"] == 8 * MS


def test_advice_names_the_lock_not_the_idle_threads_condition_variable():
    from scalestack.analysis.advice import advise

    trace = _idle_beside_a_lock()
    for t in (trace, dataclasses.replace(trace, samples=SampleTable.empty())):  # with call stacks, and without
        res = advise(t)
        assert not any(f.addr in (0x2000, 0x3000) for f in res.findings), res.text()
        assert any(f.addr == 0x1000 for f in res.findings), res.text()
        assert "w4" not in res.text() and "w5" not in res.text(), res.text()
        assert set(res.caused_wait_ns) == {1} and res.caused_wait_ns[1] == 11 * MS  # not thread 6's 8 ms


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**9), st.sampled_from(["app", "main", "gc", "jit", "runtime", "other"]),
                          st.integers(0, 50), st.integers(0, 10**9)), min_size=1, max_size=12))
def test_idle_threads_are_the_service_roles_and_the_parked(rows):
    from scalestack.analysis.where import PARKED_SHARE, PARKED_WAIT, idle_threads

    span = 10**9
    tids = np.arange(100, 100 + len(rows))
    running = np.array([r[0] for r in rows], np.int64)
    roles = np.array([r[1] for r in rows], object)
    waits = np.array([r[2] for r in rows], np.int64)
    waited = np.array([r[3] for r in rows], np.int64)
    idle = set(idle_threads(tids, roles, running, waits, waited, span).tolist())  # waited: the longest wait
    for t, r, role, n, w in zip(tids.tolist(), running.tolist(), roles.tolist(), waits.tolist(), waited.tolist(),
                                strict=True):
        parked = r < PARKED_SHARE * running.max() and n > 0 and w >= PARKED_WAIT * span
        assert (t in idle) == (role in ("gc", "jit", "runtime") or parked)
    top = int(np.argmax(running))
    assert int(tids[top]) not in idle or roles[top] in ("gc", "jit", "runtime")  # the busiest works


def test_a_thread_kept_off_a_lock_in_many_short_waits_is_not_parked():
    """It hardly runs (its work under the lock is short) but waits as long as the holder's critical
    sections, 40 times a run: its waits are the lock's contention (compare's lockfix program)."""
    from scalestack.analysis.where import idle_threads

    got = idle_threads(np.array([1, 2, 3]), np.array(["app", "app", "app"], object), np.array([10**9, 10**6, 10**6]),
                       np.array([0, 40, 1]), np.array([0, 25 * 10**6, 9 * 10**8]), 10**9)
    assert got.tolist() == [3]  # thread 3 waited once for 90% of the run: parked; thread 2 is kept off a lock


def test_a_thread_woken_now_and_then_for_a_little_work_is_parked():
    """node's platform workers: woken 15 times in a 1 s run for GC and compile tasks, they ran
    3-6 ms beside the busiest thread's 636 ms, waiting 92% of the run, their longest waits 28-51%:
    idle, though their average wait (6%) is short."""
    from scalestack.analysis.where import idle_threads

    got = idle_threads(np.array([1, 2]), np.array(["main", "app"], object), np.array([636 * 10**6, 4 * 10**6]),
                       np.array([0, 15]), np.array([0, 300 * 10**6]), 10**9)
    assert got.tolist() == [2]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 6)), min_size=1, max_size=5),
                min_size=1, max_size=4))
def test_planted_functions_come_back_and_sum_to_criticality(plan):
    """Threads run on a grid of 1-ms cells, one sample in the middle of every running cell, each
    thread's samples in its own planted function: per thread the weighted samples equal the
    thread's criticality (r is constant inside a cell), and each planted function gets exactly
    its thread's criticality back."""
    running = {}
    for k, cells in enumerate(plan):
        spans, cur = [], 0
        for gap, length in cells:
            a = cur + gap
            spans.append((a * MS, (a + length) * MS))
            cur = a + length
        running[k + 1] = spans
    end = max(b for spans in running.values() for _, b in spans) + MS
    frames = [("main", "/bin/app")] + [(f"planted_{t}", "/bin/app") for t in running]
    stacks = [[t, 0] for t in running]
    samples = [(t, a + c * MS + MS // 2, t - 1) for t, spans in running.items() for a, b in spans
               for c in range((b - a) // MS)]
    samples.sort(key=lambda s: s[1])
    trace = _trace(running, end, samples, frames, stacks)
    res = where(trace)
    crit = scalestack.criticality(trace)
    want = dict(zip(crit.tids.tolist(), crit.criticality_ns.tolist(), strict=True))
    got = {t["tid"]: t["criticality_ns"] for t in res.threads}
    assert got == pytest.approx(want, rel=1e-9, abs=1e-3)
    fn = {f["function"]: f["self_ns"] for f in res.functions if f["self_ns"] > 0}
    assert fn == pytest.approx({f"planted_{t}": want[t] for t in running}, rel=1e-9, abs=1e-3)
    # main calls every planted function and never is the leaf: a caller row, its total all of them
    callers = [f for f in res.functions if f["self_ns"] == 0]
    if samples:
        assert [f["function"] for f in callers] == ["main"]
        assert callers[0]["total_ns"] == pytest.approx(sum(want.values()), rel=1e-9, abs=1e-3)
        assert callers[0]["samples"] == len(samples)
    assert sum(t["criticality_ns"] for t in res.threads) == pytest.approx(
        sum(float(w) * 1e3 for w in (line.rsplit(" ", 1)[1] for line in collapsed(res).splitlines())), abs=len(running) * 1e3)


PERF_TEXT = """\
 100/101   5.000000001:   syscalls:sys_enter_futex: uaddr: 0x55550000a0c0, op: 0x00000080, val: 0x00000002
\t           8612b futex_wait+0x2b (inlined)
\t           8612b __GI___lll_lock_wait+0x2b (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            1217 update_table+0x57 (/tmp/app)
\t            1309 worker+0x19 (/tmp/app)
\tffffffff81000130 entry_SYSCALL_64+0x76 ([kernel.kallsyms])

 100/102   5.000000500: cpu-clock/period=1000000,call-graph=dwarf,stack-size=4096/:
\t            1217 update_table+0x57 (/tmp/app)
\t            1309 worker+0x19 (/tmp/app)

 100/100   5.000000600: PERF_RECORD_MMAP2 100/100: [0x555500000000(0x1000) @ 0x1000 fe:00 1 0]: r-xp /tmp/app
 100/101   5.000000700:   sched:sched_switch: prev_comm=app prev_pid=101 ==> next_comm=x next_pid=0
 100/102   5.000000900: cpu-clock/period=1000000,call-graph=dwarf,stack-size=4096/:
\t            1217 update_table+0x57 (/tmp/app)
\t            1309 worker+0x19 (/tmp/app)

"""


def test_perf_script_stacks_are_deduplicated():
    s = parse_stacks(PERF_TEXT.splitlines(keepends=True))
    assert s.futex["op"].tolist() == [0] and s.futex["addr"].tolist() == [0x55550000A0C0]
    fut = s.stacks.frames_of(int(s.futex["stack"][0]))
    # the inlined pseudo-frame and the kernel's syscall entry are dropped
    assert [s.frames.symbol[f] for f in fut] == ["__GI___lll_lock_wait", "update_table", "worker"]
    assert s.sample_stack.tolist() == [1, 1]  # both samples share one stack
    assert s.sample_time.tolist() == [5_000_000_500, 5_000_000_900]
    assert len(s.frames) == 3 and s.frames.offset.tolist() == [0x2B, 0x57, 0x19]
    assert s.mappings == [Mapping(100, 0x555500000000, 0x1000, 0x1000, "/tmp/app")]


def _futex_text(n: int, shallow: int) -> list[str]:
    """perf script text of n futex waits, the first `shallow` of them unwound to the C library only."""
    out = []
    for k in range(n):
        out.append(f" 100/101   5.{k:09d}:   syscalls:sys_enter_futex: uaddr: 0x55550000a0c0, op: 0x00000080, val: 0x2\n")
        out.append("\t           8612b __GI___lll_lock_wait+0x2b (/usr/lib/x86_64-linux-gnu/libc.so.6)\n")
        if k >= shallow:
            out.append("\t            1217 update_table+0x57 (/tmp/app)\n")
        out.append("\n")
    return out


@pytest.mark.parametrize(("n", "shallow", "noted"), [(40, 40, True), (40, 25, True), (40, 15, False), (10, 10, False)])
def test_stacks_that_stop_in_the_c_library_are_said(n, shallow, noted):
    """perf's DWARF unwinding of the C library fails in some system-wide recordings (every futex call's
    stack is then its C library function alone): the trace says so, as a warning, when most calls' are."""
    from scalestack.ingest.perf_stacks import attach_stacks

    s = parse_stacks(_futex_text(n, shallow))
    trace = _trace({101: [(0, 5 * MS)]}, 6 * MS, [], [("f", "/tmp/app")], [[0]])
    got = attach_stacks(trace, s)
    said = [w for w in got.warnings if "no further than the C library" in w]
    assert bool(said) == noted
    if noted:
        assert said[0].startswith(f"perf unwound {shallow} of {n} futex calls' stacks")
        assert any("no further than the C library" in x for x in got.meta["stack_notes"])


needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

LOCKS_C = """
#include <pthread.h>
pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t small_lock = PTHREAD_MUTEX_INITIALIZER;
int main(void) { pthread_mutex_lock(&big_lock); pthread_mutex_unlock(&big_lock); return 0; }
"""


@needs_gcc
def test_global_mutex_named_by_symbol_and_stripped_binary_noted(tmp_path):
    src = tmp_path / "g.c"
    src.write_text(LOCKS_C)
    exe = tmp_path / "g"
    subprocess.run(["gcc", "-O1", "-pthread", str(src), "-o", str(exe)], check=True)
    syms = ElfSymbols(str(exe))
    nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    vaddr = {line.split()[2]: int(line.split()[0], 16) for line in nm.splitlines() if line.endswith("_lock")}
    # a PIE mapped at 0x5555_0000_0000: the text mapping at file offset 0x1000 gives the bias
    text = next(seg for seg in syms.segments if seg[0] <= 0x1000 < seg[0] + seg[2])
    start = 0x555500000000 + text[1]
    maps = [Mapping(7, start, 0x1000, text[0], str(exe))]
    bias = syms.bias(start, text[0])
    names, notes = name_futexes([(7, bias + vaddr["big_lock"]), (7, bias + vaddr["small_lock"] + 8),
                                 (7, 0x7F0000000000)], maps)
    assert names[bias + vaddr["big_lock"]]["name"] == "big_lock"
    assert names[bias + vaddr["small_lock"] + 8]["name"] == "small_lock+0x8"
    assert 0x7F0000000000 not in names and notes == []
    stripped = tmp_path / "g.stripped"
    subprocess.run(["strip", "-o", str(stripped), str(exe)], check=True)
    names, notes = name_futexes([(7, bias + vaddr["big_lock"])], [Mapping(7, start, 0x1000, text[0], str(stripped))])
    assert names[bias + vaddr["big_lock"]]["kind"] == "unnamed-global"
    assert names[bias + vaddr["big_lock"]]["name"] == f"g.stripped+{vaddr['big_lock']:#x}"
    assert any("stripped" in n for n in notes)
    names, notes = name_futexes([(7, 0x1234)], [Mapping(7, 0x1000, 0x1000, 0, str(tmp_path / "gone"))])
    assert names == {} and any("not readable" in n for n in notes)


def test_cpython_gil_named_inside_pyruntime_for_the_versions_measured():
    assert _named("_PyRuntime", 0x1B0, "/usr/lib/libpython3.11.so.1.0")["name"] == "the CPython GIL"
    assert _named("_PyRuntime", 0x1B8, "/usr/bin/python3.11")["kind"] == "cpython-gil"
    other = _named("_PyRuntime", 0x10, "/usr/bin/python3.11")
    assert other["name"] == "_PyRuntime+0x10" and other["kind"] == "global"
    # 3.13.0: the cond's two futex words and the mutex of the main interpreter's GIL, as recorded
    for off in (0x177B0, 0x177B4, 0x177B8):
        assert _named("_PyRuntime", off, "/opt/py/lib/libpython3.13.so.1.0")["name"] == "the CPython GIL"
    note = _named("_PyRuntime", 0x1B0, "/usr/bin/python3.12")["note"]
    assert "3.11" in note and "3.13" in note


def test_a_lock_names_note_reaches_the_findings():
    """A futex inside the runtime state of a CPython whose GIL offsets are unknown keeps its symbol
    name, and the note saying why reaches `where`'s notes (the report prints them), once."""
    frames = [("main", "/bin/app"), ("work", "/bin/app")]
    entry = _named("_PyRuntime", 0x1B0, "/usr/lib/libpython3.12.so.1.0")
    meta = {"locks": {"0x1000": entry, "0x1004": dict(entry, name="_PyRuntime+0x1b4")}}
    trace = _trace({1: [(0, 4 * MS)]}, 4 * MS, [(1, MS // 2, 0)], frames, [[1, 0]], meta=meta)
    notes = [n for n in where(trace).notes if "libpython3.12" in n]
    assert len(notes) == 1 and "GIL's offsets are known for 3.11, 3.13 only" in notes[0], notes


def test_traces_keep_stacks_through_save_and_load(tmp_path):
    frames = [("main", "/bin/app"), ("alpha", "/bin/app")]
    trace = _trace({1: [(0, 4 * MS)]}, 4 * MS, [(1, MS // 2, 0)], frames, [[1, 0]],
                   calls={"tid": [1], "time_ns": [10], "op": [0], "addr": [0x10], "stack": [0]})
    scalestack.save(trace, tmp_path / "t.trace")
    back = scalestack.load(tmp_path / "t.trace")
    assert back.equals(trace)
    assert back.samples.to_frame()["stack"].tolist() == [0]
    # a sample table written before stack ids existed loads with stack -1
    old = SampleTable(**{k: v for k, v in trace.samples.columns().items() if k != "stack"})
    assert old.stack.tolist() == [-1]


def test_flame_boxes_merge_shared_prefixes():
    from scalestack.report.flame_figures import flame_boxes

    boxes = flame_boxes({"main;a;x": 2.0, "main;a;y": 1.0, "main;b": 3.0})
    assert sorted(boxes) == sorted([(0, 0.0, 6.0, "main"), (1, 0.0, 3.0, "a"), (2, 0.0, 2.0, "x"),
                                    (2, 2.0, 1.0, "y"), (1, 3.0, 3.0, "b")])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.lists(st.sampled_from("abcd"), min_size=1, max_size=5).map(";".join),
                       st.floats(0.01, 10), min_size=1, max_size=12))
def test_flame_boxes_nest_inside_their_callers(paths):
    from scalestack.report.flame_figures import flame_boxes

    boxes = flame_boxes(paths)
    total = sum(paths.values())
    assert sum(w for d, _, w, _ in boxes if d == 0) == pytest.approx(total)
    for d, x0, w, _ in boxes:
        if d:
            assert any(pd == d - 1 and px - 1e-9 <= x0 and x0 + w <= px + pw + 1e-9 for pd, px, pw, _ in boxes)
    for d in {b[0] for b in boxes}:  # no two boxes of one row overlap
        row = sorted((x0, x0 + w) for dd, x0, w, _ in boxes if dd == d)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(row, row[1:], strict=False))


def test_failed_reacquire_gaps_count_as_blocked():
    # thread 2 waits on the lock [1, 3) ms, is woken but only runnable [3, 4) ms, waits again [4, 6) ms:
    # the lock keeps it off for [1, 6) ms; thread 3 waits [2, 5) ms
    frames = [("start", "/bin/app"), ("hold_it", "/bin/app")]
    waits = [(2, 1 * MS, 3 * MS, 0x1000, 1), (2, 4 * MS, 6 * MS, 0x1000, 1), (3, 2 * MS, 5 * MS, 0x1000, 1)]
    trace = _trace({1: [(0, 10 * MS)], 2: [(0, 1 * MS), (6 * MS, 7 * MS)], 3: [(0, 1 * MS)]}, 10 * MS,
                   [(1, int((k + 0.5) * MS), 0) for k in range(10)], frames, [[1, 0]], waits=waits)
    (lk,) = where(trace).locks
    assert lk["serial_share"] == pytest.approx(0.5)  # [1, 6) of 10 ms
    # thread 1's samples weigh 1/3 at 0.5 ms (three threads run), 1 at 1.5 .. 5.5 ms and 7.5 .. 9.5 ms,
    # 1/2 at 6.5 ms; those at 1.5 .. 5.5 ms fall inside the blocked time
    assert lk["critical_share"] == pytest.approx(5 / (1 / 3 + 5 + 0.5 + 3))


def test_bad_requests_get_one_clear_line(tmp_path):
    from scalestack.errors import UserError

    with pytest.raises(UserError, match="--no-futex"):
        scalestack.record(["true"], None, stacks=True, futex=False)
    with pytest.raises(UserError, match="perf collector"):
        scalestack.record(["true"], None, stacks=True, collector="tracefs")
    with pytest.raises(UserError, match="dwarf or fp"):
        scalestack.record(["true"], None, stacks="lbr")
    frames = [("main", "/bin/app"), ("alpha", "/bin/app")]
    plain = _trace({1: [(0, 4 * MS)]}, 4 * MS, [], frames, [[1, 0]])
    scalestack.save(plain, tmp_path / "plain.trace")
    out = subprocess.run([sys.executable, "-m", "scalestack.cli", "export", "collapsed", str(tmp_path / "plain.trace")],
                         capture_output=True, text=True)
    assert out.returncode != 0 and out.stderr.count("\n") == 1 and "--stacks" in out.stderr


def test_advise_names_the_function_of_the_critical_thread():
    from scalestack.analysis.advice import advise

    # thread 1 runs 10 ms in `alpha` (8 of them alone), thread 2 runs 2 ms in `beta`
    frames = [("main", "/bin/app"), ("alpha", "/bin/app"), ("beta", "/bin/app")]
    samples = sorted([(1, int((k + 0.5) * MS), 0) for k in range(10)] + [(2, int((k + 0.5) * MS), 1) for k in range(2)],
                     key=lambda s: s[1])
    trace = _trace({1: [(0, 10 * MS)], 2: [(0, 2 * MS)]}, 10 * MS, samples, frames, [[1, 0], [2, 0]])
    crit = next(f for f in advise(trace).findings if f.kind == "critical-thread")
    assert crit.tid == 1 and "100% of its criticality in `alpha`" in crit.detail


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4), st.sampled_from([None, 0]))
def test_simulated_run_per_thread_sums_match_criticality(seed, threads, serial_phase):
    """The simulator with planted code regions (`scalestack.sim.samples`): a cpu-clock-like sampler
    at a random phase, 1 ms period. Each thread's weighted samples estimate its criticality: within
    sampling error (a few periods, or 5% of a long-running thread's criticality)."""
    from scalestack.sim.samples import planted_run

    planted = planted_run(threads=threads, n_phases=2, seed=seed, rounds=2, total_cycles=1.2e10,
                          serial_phase=serial_phase, cores=2)
    res = where(planted.trace)
    crit = scalestack.criticality(planted.trace)
    want = dict(zip(crit.tids.tolist(), crit.criticality_ns.tolist(), strict=True))
    for row in res.threads:
        c = want[row["tid"]]
        assert abs(row["criticality_ns"] - c) <= max(0.05 * c, 4 * res.period_ns), (row, c)
    # every sample is in one planted region: the regions' weights add up to the threads'
    assert sum(f["self_ns"] for f in res.functions) == pytest.approx(sum(t["criticality_ns"] for t in res.threads))


def test_spinning_goes_to_the_speedup_stacks_sync():
    from scalestack.analysis.speedup import speedup_stack
    from scalestack.analysis.where import spin_running_ns

    frames = [("main", "/bin/app"), ("work", "/bin/app"), ("[libgomp.so.1+0x1f7da]", "/usr/lib/libgomp.so.1")]
    stacks = [[1, 0], [2, 0]]
    single = _trace({1: [(0, 10 * MS)]}, 10 * MS, [(1, int((k + 0.5) * MS), 0) for k in range(10)], frames, stacks)
    # two threads run 6 ms each; thread 2 spends 1 ms of it in libgomp's barrier spin
    samples = sorted([(1, int((k + 0.5) * MS), 0) for k in range(6)]
                     + [(2, int((k + 0.5) * MS), 0 if k < 5 else 1) for k in range(6)], key=lambda s: s[1])
    multi = _trace({1: [(0, 6 * MS)], 2: [(0, 6 * MS)]}, 6 * MS, samples, frames, stacks)
    multi = multi.with_roles("w=app")
    single = single.with_roles("w=app")
    assert spin_running_ns(multi, multi.threads.tid) == pytest.approx(1 * MS)
    assert where(multi).spin_share == pytest.approx(1 / 12)
    stack = speedup_stack(single, multi, 2)
    assert stack.sync == pytest.approx(1 * MS / (6 * MS))  # no futex wait: all of SYNC is the spin


def test_futexes_waited_on_at_one_site_get_distinct_names():
    """GNU sort's merge threads wait on five futexes in one function: one name each, by primitive and
    order; a name only one futex has is left as it is."""
    from scalestack.analysis.where import _distinct_names

    site = "lock waited at [sort+0xac90..0xb6b5]"
    locks = [{"name": site, "primitive": p, "how": "call-site"}
             for p in ("mutex", "condition variable", "condition variable", "")]
    locks.append({"name": "big_lock", "primitive": "mutex", "how": "symbol"})
    joins = [{"name": "thread exit (pthread_join in main)", "primitive": "thread exit", "how": "join"}] * 2
    got = [lk["name"] for lk in _distinct_names(locks + [dict(j) for j in joins])]
    assert got[:5] == [f"{site} (mutex)", f"{site} (condition variable 1)", f"{site} (condition variable 2)",
                       f"{site} (futex)", "big_lock"]
    assert len(set(got[:5])) == 5
    assert got[5:] == ["thread exit (pthread_join in main)"] * 2  # each a thread's exit: named alike


def test_phases_name_unnamed_samples_by_their_leaf_frame():
    """Samples perf could not name are regions of their own code for phase detection, not one
    `[unknown]` per binary: each by its leaf frame's name (here a binary gone from disk: its address)."""
    from scalestack.analysis.phases import _symbols

    frames = [("main", "/bin/app"), ("[unknown]", "/gone/app"), ("[unknown]", "/gone/app"), ("work", "/bin/app")]
    stacks = [[1, 0], [2, 0], [3, 0]]
    samples = [(1, k * MS + MS // 2, k % 3) for k in range(6)]
    trace = _trace({1: [(0, 6 * MS)]}, 6 * MS, samples, frames, stacks)
    assert list(trace.samples.symbol[:3]) == ["[unknown]", "[unknown]", "work"]
    assert _symbols(trace, np.arange(6)).tolist() == ["[app+0x1]", "[app+0x2]", "work"] * 2


@pytest.mark.parametrize("broadcast", [True, False])
def test_a_wait_ended_at_its_wakers_exit_is_a_join_only_without_a_wake_call(broadcast):
    """Thread 1 works until it exits at 6 ms; thread 2 waits on 0x2000 from 1 ms until 50 µs before
    that exit. With thread 1's FUTEX_WAKE on the word recorded (a condition variable broadcast just
    before it exits), the wait is the condition variable's, not a join; without one, the kernel
    woke it from the exit: a join."""
    frames = [("start", "/bin/app"), ("work", "/bin/app"), ("futex_wait", "/usr/lib/libc.so.6"),
              ("wait_here", "/bin/app"), ("futex_wake", "/usr/lib/libc.so.6"), ("done", "/bin/app")]
    stacks = [[1, 0], [2, 3, 0], [4, 5, 0]]
    samples = [(1, k * MS + MS // 2, 0) for k in range(6)]
    end = 6 * MS - 50_000
    calls = {"tid": [2] + ([1] if broadcast else []), "time_ns": [MS - 10] + ([end - 5_000] if broadcast else []),
             "op": [0] + ([1] if broadcast else []), "addr": [0x2000] * (2 if broadcast else 1),
             "stack": [1] + ([2] if broadcast else [])}
    trace = _trace({1: [(0, 6 * MS)], 2: [(0, MS), (end, 6 * MS)]}, 6 * MS, samples, frames, stacks,
                   waits=[(2, MS, end, 0x2000, 1)], calls=calls)
    from scalestack.trace import ThreadTable

    cols = trace.threads.columns()
    cols["exited"] = np.array([True, False])
    trace = dataclasses.replace(trace, threads=ThreadTable(**cols))
    (lk,) = [lk for lk in where(trace).locks if lk["addr"] == "0x2000"]
    if broadcast:
        assert lk["how"] == "call-site" and lk["name"] == "lock waited at wait_here", lk
    else:
        assert lk["how"] == "join", lk
