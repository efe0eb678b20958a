"""Where in the code: critical functions, locks and wait sites, spinning (``record --stacks``).

* **Critical functions.** Each on-CPU sample stands for one sampling period of its thread's
  running time; weighted by 1/r(t), r(t) the number of the program's threads running at the
  sample's instant (the same active intervals as `analysis.criticality`), it is that period's
  share of criticality. Summed per thread this is the thread's criticality C_j up to sampling
  error; summed per function it says which code the critical path runs. A function's *self*
  weight counts samples whose leaf frame is in it; its *total* weight counts samples with it
  anywhere on the stack (once per sample).
* **Locks and waits.** SYNC_WAIT intervals grouped by futex word: total wait, waiters, the
  share of the run during which at least one thread waits there (the lock serializes the run
  for that long), of the threads that work: an idle thread (`idle_threads`: a runtime's GC, JIT
  or service thread, or a parked one, which hardly runs and waits in long stretches, like a
  pool's workers on a condition variable for the whole run) delays no work by waiting for some,
  and its waits are counted apart; the code that released it (the waker's wake call's stack) and the code the
  releasing thread ran while the others waited (its samples inside the waits: the function
  holding the lock). Named by symbol (``meta["locks"]``), else by the call site of its waits:
  the first frame of the program below the C library, libpthread, libgomp, the loader and the
  standard library compiled into the program (Rust's std, C++'s std templates); where
  no wait call's stack could be walked, by the function its releasing thread ran meanwhile.
* **Spinning.** Samples inside known spin-wait code (any leaf in libgomp, whose own code is its
  barrier and lock spin-waits; pthread_spin_lock, HotSpot's SpinPause, Go's procyield; OpenBLAS's
  thread server and gemm threads polling their flags) are synchronization, not work; their
  criticality-weighted share is reported per thread.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict

import numpy as np

from scalestack.analysis.criticality import critical_sweep
from scalestack.errors import UserError
from scalestack.results import Result
from scalestack.symbols.elf import symbols_for
from scalestack.trace import State, Trace
from scalestack.trace.exit_wakers import SLACK_NS

SYSTEM_BINARY = re.compile(r"(^\[|/ld-linux|/libc[.-]|/libpthread|/libgomp|/libstdc\+\+|/libgcc_s|/libm[.-]|"
                           r"/libpython|/libjvm)")
# a language's standard library compiled into the program's binary: Rust's std, core and alloc
# (inherent impls demangle as `<std::...>::f`; `<T as core::Trait>::f` is T's code); C++'s
# templates instantiated in the program (namespace std is the implementation's)
RUST_MARK = re.compile(r"__rust_begin_short_backtrace|^std::rt::lang_start")
RUST_STD = re.compile(r"^<?(std|core|alloc)::")
CXX_STD = re.compile(r"^(std|__gnu_cxx)::")
# what kind of primitive a futex wait is in, from the library frames of its stack (leaf first, up
# to the program's own code; glibc's versioned names carry @@GLIBC_x): the advice for each differs
PRIMITIVES = (
    ("condition variable", re.compile(r"^(__)?pthread_cond_|condition_variable::wait|Condvar>?::wait|^__condvar_")),
    ("barrier", re.compile(r"^(__)?pthread_barrier_wait|^gomp_(team_)?barrier_wait")),
    ("read-write lock", re.compile(r"^(__)?pthread_rwlock_|RwLock>?::(read|write)_contended")),
    ("semaphore", re.compile(r"^(__new_)?sem_(timed|clock)?wait|^__new_sem_wait")),
    ("mutex", re.compile(r"^(__)?pthread_mutex_(timed|clock)?lock|^__lll_lock_wait|^__GI___lll_lock_wait|"
                         r"Mutex>?::lock_contended|^std::mutex::lock|^gomp_mutex_lock")),
)
# the recorder's own work in the program's threads: perf's tracepoint handlers, which write each
# event (and, with --stacks, copy the user stack at every futex call) in the thread that hit the
# tracepoint; a sample with one of them on its stack is time the unrecorded program does not spend
RECORDER = re.compile(r"^(perf_tp_event|perf_syscall_enter|perf_syscall_exit|perf_trace_\w+)$")
# libgomp runs no user work itself (that is in the program's outlined functions): on-CPU time in it
# is its barrier and lock spin-waits (GOMP_SPINCOUNT), whose internal functions have no symbols
SPIN_BINARY = re.compile(r"/libgomp\.so")
WAIT_OPS = (0, 9)  # FUTEX_WAIT, FUTEX_WAIT_BITSET (flags masked off)
SPIN = re.compile(r"^(do_spin|do_wait|gomp_barrier_wait_end|gomp_team_barrier_wait_end|gomp_spin\w*|"
                  r"pthread_spin_lock|__pthread_spin_lock|SpinPause|runtime\.procyield|runtime\.osyield)$")
# OpenBLAS's threads busy-wait in its own driver code between polls of a flag (an idle worker for
# new work, a gemm thread for its partners' blocks, the caller for the workers to finish): a
# sample counts when the innermost frame outside the kernel and the C library (a sched_yield) is
# one of these; the work is in the kernels they call (dgemm_kernel_*), which stays work
BLAS_SPIN_BINARY = re.compile(r"/lib(scipy_)?openblas")
BLAS_SPIN = re.compile(r"^(blas_thread_server|exec_blas|exec_blas_async_wait|inner_thread|exec_threads)$")
_YIELD_BINARY = re.compile(r"^\[|/libc[.-]")


def _spinning(fn: list[str], binaries: list[str]) -> tuple[str, str] | None:
    """The spin-wait code a stack (function names and binaries, leaf first) is inside, as (function,
    binary), else None."""
    if not fn:
        return None
    if SPIN_BINARY.search(binaries[0]):
        return fn[0], binaries[0]
    for f, b in zip(fn, binaries, strict=True):
        if SPIN.match(f):
            return f, b
    for f, b in zip(fn, binaries, strict=True):
        if not _YIELD_BINARY.search(b):
            return (f, b) if BLAS_SPIN_BINARY.search(b) and BLAS_SPIN.match(f) else None
    return None


def _recording(fn: list[str], binaries: list[str]) -> bool:
    """Whether a stack (function names and binaries, leaf first) has one of the recorder's kernel
    handlers (`RECORDER`) on it."""
    return any(b.startswith("[kernel") and bool(RECORDER.match(f)) for f, b in zip(fn, binaries, strict=True))


@dataclasses.dataclass(frozen=True)
class WhereResult(Result):
    """Critical functions and locks of one recording with stacks.

    Attributes
    ----------
    threads : per thread: tid, name, criticality_ns (weighted samples), samples, spin_ns,
        recording_ns (weighted samples in the recorder's kernel handlers, `RECORDER`)
    functions : per function: name, binary, self_ns, total_ns (criticality-weighted), samples
    paths : per call path (root;...;leaf): weight_ns
    locks : per lock: addr (addrs: its futex words), name, how (symbol|call-site|holder|join|address),
        wait_ns, waits, waiters, serial_share (of the run with a thread waiting there),
        critical_share (of the run's criticality-weighted samples taken while a thread waits there),
        holders {function: samples}: all of the threads that work; idle_waiters, idle_wait_ns:
        those of idle threads (`idle_threads`), apart; wait_sites, releasers {function: waits}:
        of every wait; primitive: what most waits were in by their stacks (`PRIMITIVES`: "mutex",
        "condition variable", "barrier", "read-write lock", "semaphore"; "thread exit" for a join;
        "" unknown)
    period_ns : one sample's running time; span_ns : the run
    notes : what could not be resolved
    """

    kind = "where"
    threads: list
    functions: list
    paths: dict
    locks: list
    period_ns: float
    span_ns: int
    notes: list
    thread_functions: dict = dataclasses.field(default_factory=dict)  # tid -> (function, weight_ns) most weighted
    spin_functions: list = dataclasses.field(default_factory=list)  # spin-wait code sampled: function, binary, ns

    def rows(self):
        return self.functions

    @property
    def spin_share(self) -> float:
        total = sum(t["criticality_ns"] for t in self.threads)
        return sum(t["spin_ns"] for t in self.threads) / total if total else 0.0

    @property
    def recording_share(self) -> float:
        """Of the criticality-weighted samples, those in the recorder's kernel handlers (`RECORDER`)."""
        total = sum(t["criticality_ns"] for t in self.threads)
        return sum(t.get("recording_ns", 0.0) for t in self.threads) / total if total else 0.0


def unnamed_frame_name(binary: str, ip: int) -> str:
    """A frame no symbol names: the stretch of unnamed code it lies in, [libz.so.1+0x3cd0..0x6510],
    where the binary is still there to read (`ElfSymbols.unnamed_range`), else its own address."""
    base = binary.rsplit("/", 1)[-1]
    syms = symbols_for(binary) if binary.startswith("/") else None
    span = syms.unnamed_range(ip) if syms is not None else None
    return f"[{base}+{span[0]:#x}..{span[1]:#x}]" if span else f"[{base}+{ip:#x}]"


def frame_name(symbol: str, binary: str, ip: int) -> str:
    """A frame's function: perf's symbol, or the stretch of code a frame perf could not name lies in."""
    return symbol if symbol != "[unknown]" else unnamed_frame_name(binary, ip)


def frame_names(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: its function name and how much it is the program's own code: 2 its own, 1 a
    language's standard library compiled into the program's binary (`RUST_STD`, `CXX_STD`: Rust
    links std in, so `std::sys::sync::mutex::futex::Mutex::lock_contended` would name every
    Rust lock), 0 a system library."""
    fr = trace.frames
    names = np.array([frame_name(s, b, ip) for s, b, ip in zip(fr.symbol, fr.binary, fr.ip.tolist(), strict=True)],
                     dtype=object)
    rust = {b for s, b in zip(fr.symbol, fr.binary, strict=True) if RUST_MARK.search(s)}
    own = np.array([0 if SYSTEM_BINARY.search(b) else
                    1 if (RUST_STD if b in rust else CXX_STD).match(s) else 2
                    for s, b in zip(fr.symbol, fr.binary, strict=True)], dtype=np.int8)
    return names, own


def stack_lists(trace: Trace) -> list[np.ndarray]:
    """Frame ids of every stack, leaf first, indexed by stack id."""
    st = trace.stacks
    if not len(st):
        return []
    cuts = np.flatnonzero(np.diff(st.stack)) + 1
    return np.split(st.frame, cuts)


def running_at(trace: Trace, t: np.ndarray) -> np.ndarray:
    """Number of the trace's threads running at each time (switch spans where recorded)."""
    tl = critical_sweep(trace, "running", trace.start_ns, trace.end_ns)[3]
    k = np.clip(np.searchsorted(tl.u, t, side="right") - 1, 0, len(tl.u) - 1)
    return tl.r[k]


def where(trace: Trace, *, top: int = 20, between: tuple[int, int] | None = None) -> WhereResult:
    """Critical functions, locks and spinning of a recording made with ``record --stacks``
    (without stacks: per-function from the samples' own symbols, locks by address); `between`
    (absolute ns) restricts it to one window or phase."""
    if between is not None:
        trace = trace.between(*between)
    hz = trace.meta.get("sample_hz")
    s = trace.samples
    if not len(s) or not hz:
        if trace.meta.get("stacks") and trace.meta.get("source") == "perf-data":
            raise UserError("this trace has call stacks but no CPU samples: its perf.data has no cpu-clock event; "
                            "record it with `scalestack record --stacks`, or add `-e cpu-clock -F 1000` to perf record")
        raise UserError("this trace has no samples; record it with `scalestack record --stacks`")
    period = 1e9 / float(hz)
    keep = np.isin(s.tid, trace.threads.tid) & (s.time_ns >= trace.start_ns) & (s.time_ns < trace.end_ns)
    tid, time, stack = s.tid[keep], s.time_ns[keep], s.stack[keep]
    weight = period / np.maximum(running_at(trace, time), 1)
    names, own = frame_names(trace)
    stacks = stack_lists(trace)
    leaf_sym = s.symbol[keep]
    leaf_bin = s.binary[keep]
    per_thread: dict = defaultdict(float)
    self_w: dict = defaultdict(float)
    total_w: dict = defaultdict(float)
    count: Counter = Counter()
    on_stack: Counter = Counter()  # samples with the function anywhere on their stack
    paths: dict = defaultdict(float)
    spin = np.zeros(len(tid), dtype=bool)
    spin_w: dict = defaultdict(float)
    recorder = np.zeros(len(tid), dtype=bool)
    for i in range(len(tid)):
        w = float(weight[i])
        if stack[i] >= 0 and len(stacks[stack[i]]):
            fids = stacks[stack[i]]
            fn = names[fids]
            key = (fn[0], trace.frames.binary[fids[0]])
            for f in set(fn.tolist()):
                total_w[f] += w
                on_stack[f] += 1
            paths[";".join(fn[::-1].tolist())] += w
            frames = fn.tolist(), [trace.frames.binary[f] for f in fids]
        else:
            key = (leaf_sym[i], leaf_bin[i])
            total_w[key[0]] += w
            paths[key[0]] += w
            frames = [str(key[0])], [str(key[1])]
        spun = _spinning(*frames)
        recorder[i] = _recording(*frames)
        self_w[key] += w
        count[key] += 1
        spin[i] = spun is not None
        if spun is not None:
            spin_w[spun] += w
        elif not recorder[i]:  # a thread's top function is its work: not spinning, not the recorder's
            per_thread[(int(tid[i]), key[0])] += w
    functions = sorted(({"function": k[0], "binary": k[1], "self_ns": v, "total_ns": total_w[k[0]],
                         "samples": count[k]} for k, v in self_w.items()), key=lambda r: -r["self_ns"])
    functions += _callers(trace, names, own, {k[0] for k in self_w}, total_w, on_stack, float(weight.sum()))
    th = trace.threads
    rows = trace.thread_index(tid) if len(tid) else np.zeros(0, np.int64)
    crit = np.bincount(rows, weights=weight, minlength=len(th))
    spin_ns = np.bincount(rows, weights=weight * spin, minlength=len(th))
    recording_ns = np.bincount(rows, weights=weight * recorder, minlength=len(th))
    nsamp = np.bincount(rows, minlength=len(th))
    threads = [{"tid": int(th.tid[j]), "name": str(th.name[j]), "criticality_ns": float(crit[j]),
                "samples": int(nsamp[j]), "spin_ns": float(spin_ns[j]), "recording_ns": float(recording_ns[j])}
               for j in np.argsort(-crit)]
    top_paths = dict(sorted(paths.items(), key=lambda kv: -kv[1])[:max(top * 10, 200)])
    best: dict = {}
    for (t, f), w in per_thread.items():
        if w > best.get(t, ("", 0.0))[1]:
            best[t] = (f, w)
    spinning = [{"function": k[0], "binary": k[1], "ns": v} for k, v in sorted(spin_w.items(), key=lambda kv: -kv[1])]
    return WhereResult(thread_functions=best, spin_functions=spinning[:top], threads=threads,
                       functions=functions[:max(top, 50)], paths=top_paths,
                       locks=locks(trace, names, own, stacks, tid, time, stack, weight, leaf_sym, period),
                       period_ns=period, span_ns=trace.wall_ns, notes=_notes(trace))


def _notes(trace: Trace) -> list[str]:
    """The recording's notes on its stacks, and those its lock names carry (a futex inside CPython's
    runtime state of a version whose GIL offsets are not known), one per binary and cause."""
    notes = list(trace.meta.get("stack_notes", []))
    for entry in (trace.meta.get("locks") or {}).values():
        note = entry.get("note") if isinstance(entry, dict) else None
        line = f"locks: {entry.get('binary', '')}: {entry.get('name', '')} is {note}" if note else None
        if line and not any(n.startswith(f"locks: {entry.get('binary', '')}:") for n in notes):
            notes.append(line)
    return notes


CALLER_SHARE = 0.01  # a caller of the program's own listed among the functions: of the criticality sampled
ENTRY_STUBS = ("_start", "__libc_start_main", "__libc_start_call_main")  # below every main thread's stack


def _callers(trace: Trace, names, own, listed: set, total_w: dict, on_stack: Counter, weight: float) -> list[dict]:
    """The program's own functions that are on the stacks but never the leaf (no self time), with
    at least `CALLER_SHARE` of the sampled criticality, by total: a Rust program's `critical_section`
    and `serial_setup` call a spin helper that has all the self time, and the table named only that
    (perf report --children lists them; system frames such as start_thread are left out)."""
    fr = trace.frames
    first: dict = {}
    for f in np.flatnonzero(own == 2).tolist():
        first.setdefault(str(names[f]), fr.binary[f])
    rows = [{"function": n, "binary": b, "self_ns": 0.0, "total_ns": total_w[n], "samples": on_stack[n]}
            for n, b in first.items()
            if n not in listed and n not in ENTRY_STUBS and total_w.get(n, 0.0) >= CALLER_SHARE * weight]
    return sorted(rows, key=lambda r: -r["total_ns"])


def spin_samples(trace: Trace) -> np.ndarray:
    """Per sample of `trace.samples`: is it inside known spin-wait code (see the module docstring)?"""
    return _per_sample(trace, lambda fn, binaries: _spinning(fn, binaries) is not None)


def recorder_samples(trace: Trace) -> np.ndarray:
    """Per sample of `trace.samples`: is it inside the recorder's kernel handlers (`RECORDER`)?"""
    return _per_sample(trace, _recording)


def _per_sample(trace: Trace, test) -> np.ndarray:
    """`test(names, binaries)` of each sample's stack (leaf first), once per stack; a sample
    without one is tested on its own symbol."""
    s = trace.samples
    if not len(s):
        return np.zeros(0, dtype=bool)
    names, _ = frame_names(trace)
    binaries = trace.frames.binary
    per_stack = np.array([test([str(names[x]) for x in f], [binaries[x] for x in f]) for f in stack_lists(trace)],
                         dtype=bool)
    out = np.array([test([str(sym)], [str(b)]) for sym, b in zip(s.symbol, s.binary, strict=True)], dtype=bool)
    has = (s.stack >= 0) & (s.stack < len(per_stack))
    out[has] = per_stack[s.stack[has]]
    return out


def spin_running_ns(trace: Trace, tids: np.ndarray) -> float:
    """Running time of threads `tids` spent spinning, estimated from the samples (one period each)."""
    hz = trace.meta.get("sample_hz")
    if not hz or not len(trace.samples):
        return 0.0
    mine = np.isin(trace.samples.tid, tids)
    return float(np.count_nonzero(spin_samples(trace) & mine)) * 1e9 / float(hz)


def _site(stacks, names, own, sid) -> str | None:
    """First frame of the program's own code on a stack (leaf first), else the first of a standard
    library compiled into it (a Rust thread's closure inlined into std's thread start), else None."""
    if sid < 0 or sid >= len(stacks):
        return None
    frames = stacks[sid]
    for level in (2, 1):
        for f in frames:
            if own[f] == level and str(names[f]) not in ENTRY_STUBS:  # (a launcher's _start: CPython's)
                return str(names[f])
    return None


def _weight_inside(a: np.ndarray, b: np.ndarray, t: np.ndarray, w: np.ndarray) -> float:
    """Share of the samples' weight (the run's criticality) at instants where some interval [a, b) is open."""
    total = float(w.sum())
    if not len(a) or total <= 0:
        return 0.0
    times = np.r_[a, b]
    delta = np.r_[np.ones(len(a), np.int64), -np.ones(len(b), np.int64)]
    o = np.argsort(times, kind="stable")
    u, open_ = times[o], np.cumsum(delta[o])
    k = np.searchsorted(u, t, side="right") - 1
    inside = (k >= 0) & (open_[np.maximum(k, 0)] > 0)
    return float(w[inside].sum()) / total


def _union(a: np.ndarray, b: np.ndarray) -> int:
    if not len(a):
        return 0
    o = np.argsort(a, kind="stable")
    a, b = a[o], b[o]
    reach = np.maximum.accumulate(b)
    starts = np.r_[True, a[1:] > reach[:-1]]
    grp = np.cumsum(starts) - 1
    lo = a[starts]
    hi = np.maximum.reduceat(b, np.flatnonzero(starts))
    del grp
    return int((hi - lo).sum())


def locks(trace, names, own, stacks, s_tid, s_time, s_stack, s_weight, s_sym, period: float = 1e6) -> list:
    """Per futex word of the program's SYNC_WAIT intervals, largest total wait first."""
    st = trace.states
    m = (st.state == State.SYNC_WAIT) & np.isin(st.tid, trace.threads.tid)
    if not m.any():
        return []
    tid, a, b, addr, waker = st.tid[m], st.start_ns[m], st.end_ns[m], st.addr[m], st.waker[m]
    fc = trace.futex_calls
    named = trace.meta.get("locks", {}) or {}
    is_wait = np.isin(fc.op, WAIT_OPS)
    exit_at = _ExitTimes(trace)
    run = _RunningTime(trace)
    idle = np.isin(tid, trace_idle_threads(trace, run.totals(trace.threads.tid)))
    by_tid_sample = np.lexsort((s_time, s_tid))
    st_tid, st_time = s_tid[by_tid_sample], s_time[by_tid_sample]
    out = []
    groups: dict = {}
    for word in np.unique(addr[addr != 0]).tolist():  # 0: a wait whose futex word is unknown
        entry = named.get(f"{word:#x}")
        # the futex words of one runtime lock (the GIL's condition variable and mutex) are one lock
        key = entry["name"] if entry and entry.get("kind") == "cpython-gil" else word
        groups.setdefault(key, []).append(word)
    for words in groups.values():
        word = words[0]
        every = np.isin(addr, np.array(words, dtype=np.uint64))
        w = every & ~idle  # the numbers: of the threads that work
        wa, wb, wt, wk = a[every], b[every], tid[every], waker[every]  # the names: of every wait
        on_word = np.isin(fc.addr, np.array(words, dtype=np.uint64))
        waits_at = _last_before(fc, on_word & is_wait, wt, wa)
        wakes_at = _last_before(fc, on_word & ~is_wait, wk, wb)
        joins = sum(1 for j in waits_at[waits_at >= 0] if _joins(stacks, names, int(fc.stack[j])))
        if not joins:  # or: each wait ended by its waker's exit (the kernel wakes a joiner when a thread exits)
            # only waits nothing else explains: no stack of theirs names a primitive, and their waker
            # made no wake call on the word (a condition variable broadcast just before the waker
            # exits ends the wait at the exit too, but the broadcast is recorded)
            known = (wk >= 0) & (wakes_at < 0)
            if known.any() and len(waits_at):
                known &= np.array([j < 0 or _primitive(stacks, names, own, int(fc.stack[j])) is None
                                   for j in waits_at.tolist()], bool)
            ends = exit_at.get_many(wk[known]) if known.any() else np.zeros(0)
            joins = int(np.sum(np.abs(ends - wb[known]) < SLACK_NS)) if known.any() else 0
        wait_sites = Counter(x for x in (_site(stacks, names, own, int(fc.stack[j])) for j in waits_at[waits_at >= 0])
                             if x)
        releasers = Counter(x for x in (_site(stacks, names, own, int(fc.stack[j])) for j in wakes_at[wakes_at >= 0])
                            if x)
        primitives = Counter(x for x in (_primitive(stacks, names, own, int(fc.stack[j]))
                                         for j in waits_at[waits_at >= 0]) if x)
        holders: Counter = Counter()
        for x, y, k in zip(a[w].tolist(), b[w].tolist(), waker[w].tolist(), strict=True):
            if k < 0:
                continue
            t_lo, t_hi = np.searchsorted(st_tid, [k, k + 1])
            i0, i1 = t_lo + np.searchsorted(st_time[t_lo:t_hi], [x, y])
            if i1 == i0 and i1 > t_lo and y - st_time[i1 - 1] < 2 * period:
                i0 = i1 - 1  # no sample inside a short wait: the releaser's last one before the release
            for i in by_tid_sample[i0:i1].tolist():
                holders[_site(stacks, names, own, int(s_stack[i])) or str(s_sym[i])] += 1
        blocked = _blocked(tid[w], a[w], b[w], run)
        entry = named.get(f"{int(word):#x}")
        if entry:
            name, how = entry["name"], "symbol"
        elif joins and joins * 2 >= len(wa):
            name, how = f"thread exit (pthread_join{' in ' + wait_sites.most_common(1)[0][0] if wait_sites else ''})", \
                "join"
        elif wait_sites:
            name, how = f"lock waited at {wait_sites.most_common(1)[0][0]}", "call-site"
        elif holders and np.count_nonzero(w) >= 2:
            name, how = f"lock held in {holders.most_common(1)[0][0]}", "holder"
        else:
            name, how = f"futex {int(word):#x}", "address"
        out.append({"addr": f"{int(word):#x}", "addrs": [f"{x:#x}" for x in words], "name": name, "how": how,
                    "wait_ns": int((b[w] - a[w]).sum()), "waits": int(w.sum()), "waiters": int(len(np.unique(tid[w]))),
                    "idle_waiters": int(len(np.unique(tid[every & idle]))),
                    "idle_wait_ns": int((b[every & idle] - a[every & idle]).sum()),
                    "serial_share": _union(*blocked) / trace.wall_ns if trace.wall_ns else 0.0,
                    "critical_share": _weight_inside(*blocked, s_time, s_weight),
                    "wait_sites": dict(wait_sites.most_common(5)), "releasers": dict(releasers.most_common(5)),
                    "holders": dict(holders.most_common(5)),
                    "primitive": "thread exit" if how == "join" else
                    primitives.most_common(1)[0][0] if primitives else ""})
    out.sort(key=lambda r: (r["how"] == "join", -r["wait_ns"], -r["idle_wait_ns"]))
    return _distinct_names(out)


def _distinct_names(locks: list[dict]) -> list[dict]:
    """Futexes named alike (waited on at one call site: GNU sort's merge threads wait on five, mutexes
    and condition variables, in one function) get their primitive and, among those of one kind, a
    number in their order (`locks`: most waited first), so that each row names one futex."""
    named = [lk for lk in locks if lk.get("how") in ("call-site", "holder")]  # (a join is each thread's exit)
    by_name = Counter(lk["name"] for lk in named)
    kinds = Counter((lk["name"], lk["primitive"] or "futex") for lk in named)
    seen: Counter = Counter()
    for lk in named:
        if by_name[lk["name"]] < 2:
            continue
        kind = lk["primitive"] or "futex"
        seen[lk["name"], kind] += 1
        k = seen[lk["name"], kind]
        lk["name"] = f"{lk['name']} ({kind}{f' {k}' if kinds[lk['name'], kind] > 1 else ''})"
    return locks


# a thread that ran less than this share of the busiest thread's running time, and once waited for
# PARKED_WAIT of the run or more, is parked: node's V8 workers ran 0.2 ms beside the busiest
# thread's 620 ms, in 1-4 waits that cover their lives; its platform workers, woken 15 times a
# second for GC and compile tasks, 3-6 ms beside 636 ms, their longest waits 28-51% of the run.
# Threads kept off a lock that another thread holds wait as long as its critical sections (a
# flusher's 40 per run: 2.5% each)
PARKED_SHARE = 0.02
PARKED_WAIT = 0.1
# a runtime's own threads wait for work it gives them (HotSpot's JIT compiler threads on their queue:
# 71% of a 0.3 s run with one waiting, the wake calls made by the threads that run the program)
SERVICE_ROLES = ("gc", "jit", "runtime")


def idle_threads(tids: np.ndarray, roles, running_ns: np.ndarray, waits: np.ndarray, longest_ns: np.ndarray,
                 span_ns: int) -> np.ndarray:
    """The threads of `tids` whose waits are idling, not contention (sorted): the runtime's service
    threads (by `roles`), and the parked ones: they hardly ran (`running_ns`) and waited in a long
    stretch (`waits` SYNC_WAIT intervals, the longest `longest_ns`, in a run of `span_ns`)."""
    running_ns = np.asarray(running_ns, np.float64)
    if len(running_ns) == 0:
        return np.zeros(0, np.int64)
    waits = np.asarray(waits, np.float64)
    parked = ((running_ns < PARKED_SHARE * running_ns.max()) & (waits > 0)
              & (np.asarray(longest_ns, np.float64) >= PARKED_WAIT * max(span_ns, 1)))
    idle = parked | np.isin(np.asarray(roles, object), SERVICE_ROLES)
    return np.sort(np.asarray(tids, np.int64)[idle])


def trace_idle_threads(trace: Trace, running_ns: np.ndarray) -> np.ndarray:
    """`idle_threads` of the trace's threads (`running_ns`: each one's RUNNING ns, in the thread
    table's order), their waits counted from its SYNC_WAIT rows."""
    st, th = trace.states, trace.threads
    m = st.state == State.SYNC_WAIT
    rows = trace.thread_index(st.tid[m], missing=-1)
    ok = rows >= 0
    n = np.bincount(rows[ok], minlength=len(th))
    longest = np.zeros(len(th), np.float64)
    np.maximum.at(longest, rows[ok], st.duration_ns[m][ok].astype(np.float64))
    return idle_threads(th.tid, th.role, running_ns, n, longest, trace.wall_ns)


FAILED_ACQUIRE_NS = 50_000  # running between two waits on one lock below which the thread never got it


class _RunningTime:
    """Cumulative RUNNING time of each thread at any instant."""

    def __init__(self, trace: Trace):
        s = trace.states
        m = s.state == State.RUNNING
        self.per: dict = {}
        for t in np.unique(s.tid[m]).tolist():
            k = m & (s.tid == t)
            a, b = s.start_ns[k], s.end_ns[k]
            self.per[t] = (a, b, np.r_[0, np.cumsum(b - a)])

    def totals(self, tids: np.ndarray) -> np.ndarray:
        """Each thread's RUNNING ns over the whole trace."""
        return np.array([self.per[t][2][-1] if t in self.per else 0 for t in np.asarray(tids).tolist()], np.int64)

    def at(self, tids: np.ndarray, t: np.ndarray) -> np.ndarray:
        out = np.zeros(len(t), dtype=np.int64)
        for x in np.unique(tids).tolist():
            if x not in self.per:
                continue
            a, b, cum = self.per[x]
            sel = tids == x
            i = np.searchsorted(a, t[sel], side="right") - 1
            ii = np.maximum(i, 0)
            out[sel] = np.where(i >= 0, cum[ii] + np.clip(t[sel] - a[ii], 0, b[ii] - a[ii]), 0)
        return out


def _blocked(tid: np.ndarray, a: np.ndarray, b: np.ndarray, run: _RunningTime) -> tuple[np.ndarray, np.ndarray]:
    """Intervals during which threads were kept off by one lock: its waits, and the gap between two
    waits of a thread on it when the thread ran less than FAILED_ACQUIRE_NS in between (woken, it
    waited for a CPU, found the lock taken again and went back to sleep)."""
    o = np.lexsort((a, tid))
    tid, a, b = tid[o], a[o], b[o]
    same = tid[1:] == tid[:-1]
    if not same.any():
        return a, b
    ran = run.at(tid[1:], a[1:]) - run.at(tid[:-1], b[:-1])
    bridge = same & (ran < FAILED_ACQUIRE_NS) & (a[1:] > b[:-1])
    return np.r_[a, b[:-1][bridge]], np.r_[b, a[1:][bridge]]


class _ExitTimes:
    """End time of each thread that exited inside the recording (others: far in the future)."""

    def __init__(self, trace: Trace):
        th = trace.threads
        self.trace = trace
        self.end = np.where(th.exited, th.end_ns, np.iinfo(np.int64).max // 2)

    def get_many(self, tids: np.ndarray) -> np.ndarray:
        rows = self.trace.thread_index(tids, missing=-1)
        return np.where(rows >= 0, self.end[np.maximum(rows, 0)], np.iinfo(np.int64).max // 2)


def _primitive(stacks, names, own, sid: int) -> str | None:
    """The primitive (`PRIMITIVES`) a wait call's stack is in: its first library frame that names
    one, leaf first, before the program's own code."""
    if not 0 <= sid < len(stacks):
        return None
    for f in stacks[sid]:
        if own[f] == 2:
            return None
        name = str(names[f])
        for kind, pattern in PRIMITIVES:
            if pattern.search(name):
                return kind
    return None


def _joins(stacks, names, sid: int) -> bool:
    """A wait inside pthread_join (the futex is the exiting thread's tid word)."""
    return 0 <= sid < len(stacks) and any("join" in str(names[f]) for f in stacks[sid])


def _last_before(fc, mask: np.ndarray, tids: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Row of `fc` (futex calls) of each (tid, time): the thread's last call in `mask` at or before
    that time, -1 if none."""
    rows = np.flatnonzero(mask)
    out = np.full(len(tids), -1, dtype=np.int64)
    if not len(rows):
        return out
    order = np.lexsort((fc.time_ns[rows], fc.tid[rows]))
    rows = rows[order]
    key_tid, key_time = fc.tid[rows].astype(np.int64), fc.time_ns[rows]
    for i, (t, x) in enumerate(zip(tids.tolist(), times.tolist(), strict=True)):
        lo, hi = np.searchsorted(key_tid, [t, t + 1])
        j = lo + np.searchsorted(key_time[lo:hi], x, side="right") - 1
        if j >= lo:
            out[i] = rows[j]
    return out


def collapsed(result: WhereResult) -> str:
    """The criticality-weighted call paths as collapsed stacks (flamegraph.pl, speedscope): one line
    per path, ``root;...;leaf WEIGHT`` with the weight in microseconds."""
    return "".join(f"{p} {round(w / 1e3)}\n" for p, w in result.paths.items() if round(w / 1e3) > 0)
