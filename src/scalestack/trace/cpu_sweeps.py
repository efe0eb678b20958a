"""The state builder's "what did this CPU show" questions answered by one sweep over the time-sorted
events, in consecutive chunks, instead of by-CPU buckets of all of them (an index per event,
0.4-0.8 GB at 10^8 events, and every event held in memory to build them; the bucket search is kept
as the tests' reference, tests/unit/cpu_buckets.py).

Each question needs the events up to some instant on one CPU. The questions are taken in order of
that instant; the sweep carries, per CPU asked about, what the answers read of its events so far
(the last event's time, context and kind, the last switch's next task, the time of the last event
in another context than the last one's) and answers each question once the events before its
instant have gone by. Cut the events anywhere: the same answers, in the questions' own order.

Two questions, each a start (the carry), a chunk call and an end, like the walk's
(`builder._walk_start`, `_walk_chunk`, `_walk_end`), and a one-call form over all the events:

* `witness_*`: did anything but thread `tid` show on CPU c during (a, b)?
* `busy_*`: did CPU c run a task other than the waiter between a wake call and the waiter's run
?
"""

from __future__ import annotations

import numba
import numpy as np

from scalestack.trace.events import Kind, context_of

_K_SWITCH = int(Kind.SWITCH)
_K_FUTEX_ENTER = int(Kind.FUTEX_ENTER)
_K_FUTEX_WAITV = int(Kind.FUTEX_WAITV)
_K_RUN_DELAY = int(Kind.RUN_DELAY)
_K_SAMPLE = int(Kind.SAMPLE)
_NEVER = np.iinfo(np.int64).min  # the time of an event that was not seen
_LAST = np.int64(np.iinfo(np.int64).max)  # no question left to answer (typed: a literal compiles callees twice)


def _cpu_runs(n_cpu: int):
    """Per CPU: the last event's time and context, and the time of the last event in another
    context than that; `_NEVER` where there was none (no flag "seen": nothing is after `_NEVER`)."""
    return np.full(n_cpu, _NEVER, np.int64), np.zeros(n_cpu, np.int64), np.full(n_cpu, _NEVER, np.int64)


def _n_cpu(cpu: np.ndarray) -> int:
    """The per-CPU carry's length: the questions' CPUs only (events on others answer nothing)."""
    return int(cpu.max()) + 1 if len(cpu) and int(cpu.max()) >= 0 else 0


@numba.njit(cache=True, inline="always")
def _other_before(last_t, last_x, other_t, x):
    """A CPU's time of the last event in another context than x, once an event in context x
    follows its last one (time `last_t`, context `last_x`): that last one if its context differs
    (events come in time order), else as it was (`other_t`). Scalars: a compiled helper taking the
    carry's arrays costs 10x the whole loop (20 ns an event)."""
    return last_t if last_x != x else other_t


@numba.njit(cache=True, inline="always")
def _other_after(last_t, last_x, other_t, lo, x):
    """Whether a CPU's events so far include one after lo in another context than x: the last one
    is after lo and either in another context or preceded, after lo, by one that is."""
    return last_t > lo and (last_x != x or other_t > lo)


def witness_start(cpu: np.ndarray, a: np.ndarray, b: np.ndarray, tid: np.ndarray, wait_ops_mask: int):
    """The carry of a witness sweep for the stretches (a, b) of thread `tid` on `cpu` (arrays of
    one length), taken in order of b; `wait_ops_mask`: the futex operations that wait (bit per op)."""
    cpu, a, b, tid = (np.ascontiguousarray(x, np.int64) for x in (cpu, a, b, tid))
    n_cpu = _n_cpu(cpu)
    return (cpu, a, b, tid, np.argsort(b), np.array([0, wait_ops_mask], np.int64), np.zeros(len(cpu), np.bool_),
            *_cpu_runs(n_cpu), np.zeros(n_cpu, np.bool_))


@numba.njit(cache=True)
def witness_chunk(time, ecpu, kind, arg0, arg1, etid, carry):
    """Sweep the next time-sorted events (columns of one length), answering the stretches that end
    at or before each event's time before it counts; `carry` is updated in place."""
    q_cpu, q_a, q_b, q_tid, order, pos, out, last_t, last_x, other_t, last_wait = carry
    n_q = order.shape[0]
    n_cpu = last_t.shape[0]
    mask = pos[1]
    k = pos[0]
    next_b = q_b[order[k]] if k < n_q else _LAST
    for i in range(time.shape[0]):
        t = time[i]
        if t >= next_b:
            k = _witness_answer(carry, k, t)
            next_b = q_b[order[k]] if k < n_q else _LAST
        c = ecpu[i]
        kd = kind[i]
        # the eBPF collector's run-delay record is written by a switch's handler: it shows nothing; a CPU
        # sample is left out, so that the states are the same whether the samples were read or not
        # a switch shows the task it switches to: the builder places the start of that task's run up to
        # 30 us before the switch, at the previous task's last runtime report; an unnamed task (-1) shows none
        x = arg1[i] if kd == _K_SWITCH else etid[i]
        if c >= 0 and c < n_cpu and kd != _K_RUN_DELAY and kd != _K_SAMPLE and x >= 0:
            other_t[c] = _other_before(last_t[c], last_x[c], other_t[c], x)
            last_t[c] = t
            last_x[c] = x
            wait = kd == _K_FUTEX_WAITV
            if kd == _K_FUTEX_ENTER:  # arg1 read only here and at switches: the sweep is bound by the columns it reads
                op = arg1[i] & 0x7F
                wait = op < 63 and ((mask >> op) & 1) == 1
            last_wait[c] = wait
    pos[0] = k


@numba.njit(cache=True)
def witness_end(carry):
    """Answer the stretches still open after the last event; the answers in the stretches' order."""
    k = _witness_answer(carry, carry[5][0], _LAST)
    carry[5][0] = k
    return carry[6]


@numba.njit(cache=True)
def _witness_answer(carry, k, t):
    """Answer the stretches from the k-th (in order of b) that end at or before t; the next one."""
    q_cpu, q_a, q_b, q_tid, order, pos, out, last_t, last_x, other_t, last_wait = carry
    n_cpu = last_t.shape[0]
    while k < order.shape[0] and q_b[order[k]] <= t:
        q = order[k]
        c = q_cpu[q]
        if c >= 0 and c < n_cpu:
            x = q_tid[q]
            out[q] = _other_after(last_t[c], last_x[c], other_t[c], q_a[q], x) or (last_x[c] == x and last_wait[c])
        k += 1
    return k


def witness_sweep(time, ecpu, kind, arg0, arg1, etid, wait_ops_mask, cpu, a, b, tid) -> np.ndarray:
    """By one sweep over all the events: for each stretch (a, b) of thread `tid` on
    `cpu`, whether an event on the CPU inside it shows another task (a switch: the one it switches
    to; a run-delay record: none), or the CPU's last event before b is the thread's own entry into
    a futex wait."""
    carry = witness_start(cpu, a, b, tid, wait_ops_mask)
    witness_chunk(time, ecpu, kind, arg0, arg1, etid, carry)
    return witness_end(carry)


def busy_start(cpu: np.ndarray, at: np.ndarray, until: np.ndarray, waiter: np.ndarray):
    """The carry of a busy sweep for the questions (CPU, wake call's time, waiter's run's start,
    waiter), taken in order of the call (the last switch at or before it) and of the run (the
    events before it)."""
    cpu, at, until, waiter = (np.ascontiguousarray(x, np.int64) for x in (cpu, at, until, waiter))
    n_cpu = _n_cpu(cpu)
    return (cpu, at, until, waiter, np.argsort(at), np.argsort(until), np.zeros(2, np.int64),
            np.zeros(len(cpu), np.bool_), np.zeros(n_cpu, np.int64), *_cpu_runs(n_cpu))


@numba.njit(cache=True)
def busy_chunk(time, ecpu, kind, arg0, arg1, etid, carry):
    """Sweep the next time-sorted events: a question's switch part is answered before the first
    event after its call, its other part before the first event at or after the run's start; the
    events of the idle task (context 0) are not counted. `carry` is updated in place."""
    q_cpu, q_at, q_until, q_waiter, by_at, by_until, pos, out, sw_next, last_t, last_x, other_t = carry
    n_q = by_at.shape[0]
    n_cpu = last_t.shape[0]
    k_at, k_until = pos[0], pos[1]
    next_at = q_at[by_at[k_at]] if k_at < n_q else _LAST
    next_until = q_until[by_until[k_until]] if k_until < n_q else _LAST
    for i in range(time.shape[0]):
        t = time[i]
        if t > next_at:
            k_at = _busy_at_call(carry, k_at, t - 1)
            next_at = q_at[by_at[k_at]] if k_at < n_q else _LAST
        if t >= next_until:
            k_until = _busy_before_run(carry, k_until, t)
            next_until = q_until[by_until[k_until]] if k_until < n_q else _LAST
        c = ecpu[i]
        if c >= 0 and c < n_cpu and kind[i] != _K_RUN_DELAY and kind[i] != _K_SAMPLE:  # (as in `witness_chunk`)
            if kind[i] == _K_SWITCH:
                sw_next[c] = arg1[i]
            x = context_of(kind, arg0, etid, i)
            if x > 0:
                other_t[c] = _other_before(last_t[c], last_x[c], other_t[c], x)
                last_t[c] = t
                last_x[c] = x
    pos[0], pos[1] = k_at, k_until


@numba.njit(cache=True)
def busy_end(carry):
    """Answer what is still open after the last event; the answers in the questions' order."""
    pos = carry[6]
    pos[0] = _busy_at_call(carry, pos[0], _LAST)
    pos[1] = _busy_before_run(carry, pos[1], _LAST)
    return carry[7]


@numba.njit(cache=True)
def _busy_at_call(carry, k, t):
    """The questions from the k-th (in order of the call) whose call is at or before t: busy if the
    CPU's last switch so far went neither to idle nor to the waiter. The next question."""
    q_cpu, q_at, q_until, q_waiter, by_at, by_until, pos, out, sw_next, last_t, last_x, other_t = carry
    n_cpu = last_t.shape[0]
    while k < by_at.shape[0] and q_at[by_at[k]] <= t:
        q = by_at[k]
        c = q_cpu[q]
        if c >= 0 and c < n_cpu and sw_next[c] != 0 and sw_next[c] != q_waiter[q]:  # 0: idle, or no switch yet
            out[q] = True
        k += 1
    return k


@numba.njit(cache=True)
def _busy_before_run(carry, k, t):
    """The questions from the k-th (in order of the run) whose run starts at or before t: busy if
    another task than the waiter (not idle) left an event on the CPU after the call. The next one."""
    q_cpu, q_at, q_until, q_waiter, by_at, by_until, pos, out, sw_next, last_t, last_x, other_t = carry
    n_cpu = last_t.shape[0]
    while k < by_until.shape[0] and q_until[by_until[k]] <= t:
        q = by_until[k]
        c = q_cpu[q]
        if c >= 0 and c < n_cpu and _other_after(last_t[c], last_x[c], other_t[c], q_at[q], q_waiter[q]):
            out[q] = True
        k += 1
    return k


def busy_sweep(time, ecpu, kind, arg0, arg1, etid, cpu, at, until, waiter) -> np.ndarray:
    """By one sweep over all the events: whether each CPU ran a task other
    than the waiter between the wake call (`at`) and the waiter's run (`until`)."""
    carry = busy_start(cpu, at, until, waiter)
    busy_chunk(time, ecpu, kind, arg0, arg1, etid, carry)
    return busy_end(carry)
