"""Read the text of `perf script` into RawEvents: one compiled pass over the bytes.

For traces recorded elsewhere and shared as text. The expected input is what
``perf script -i perf.data -F comm,pid,tid,cpu,time,event,trace --ns`` prints for a recording of
the tracepoints in `scalestack.trace.events.RECORD_TRACEPOINTS`; plain ``perf script`` output (no pid
column, microsecond times) is accepted too. Lines of other events are counted and skipped;
a line that is not a perf-script event line stops the import with its line number.

Lines ``PERF_RECORD_LOST lost N`` (from ``--show-lost-events``) are summed into
``stats["lost_events"]``.

The text is read in chunks cut at line ends, so memory holds one chunk plus the event columns.
Comm strings are hashed inside the compiled loop; only the distinct ones become Python strings.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable

import numba
import numpy as np

from scalestack.errors import TraceFormatError, UserError
from scalestack.trace.events import Kind, RawEvents

CHUNK_BYTES = 32 << 20

_LOST_CODE = 255  # `perf script --show-lost-events` lines: counted, not events

# Event names the compiled parser knows, in the order of _KIND_CODES.
_EVENT_NAMES = [
    b"sched:sched_switch", b"sched:sched_wakeup", b"sched:sched_wakeup_new", b"sched:sched_process_fork",
    b"sched:sched_process_exec", b"sched:sched_process_exit", b"task:task_rename", b"task:task_newtask",
    b"syscalls:sys_enter_futex", b"syscalls:sys_exit_futex", b"syscalls:sys_enter_futex_waitv",
    b"syscalls:sys_exit_futex_waitv", b"sched:sched_stat_runtime", b"sched:sched_migrate_task",
    b"PERF_RECORD_LOST",
]
_KIND_CODES = np.array([
    Kind.SWITCH, Kind.WAKEUP, Kind.WAKEUP_NEW, Kind.FORK, Kind.EXEC, Kind.EXIT, Kind.RENAME, Kind.NEWTASK,
    Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV, Kind.FUTEX_EXIT, Kind.STAT_RUNTIME, Kind.MIGRATE,
    _LOST_CODE,
], dtype=np.int64)
_NAME_LEN = max(len(n) for n in _EVENT_NAMES)
_NAMES = np.zeros((len(_EVENT_NAMES), _NAME_LEN), dtype=np.uint8)
_NAME_LENS = np.array([len(n) for n in _EVENT_NAMES], dtype=np.int64)
for _i, _n in enumerate(_EVENT_NAMES):
    _NAMES[_i, : len(_n)] = np.frombuffer(_n, dtype=np.uint8)

# Payload keys, as byte arrays for the compiled searches.
def _k(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), dtype=np.uint8).copy()


_KEYS = {name: _k(text) for name, text in {
    "prev_comm": "prev_comm=", "prev_pid": " prev_pid=", "prev_state": " prev_state=", "next_comm": " next_comm=",
    "next_pid": " next_pid=", "comm": "comm=", "pid": " pid=", "target_cpu": " target_cpu=",
    "child_comm": " child_comm=", "child_pid": " child_pid=", "filename": "filename=", "old_pid": " old_pid=",
    "pid0": "pid=", "oldcomm": " oldcomm=", "newcomm": " newcomm=", "oom": " oom_score_adj=", "prio": " prio=",
    "clone_flags": " clone_flags=", "uaddr": "uaddr: ", "op": " op: ", "waiters": "waiters: ",
    "nr_futexes": " nr_futexes: ", "group_dead": " group_dead=", "success": " success=",
    "runtime": " runtime=", "orig_cpu": " orig_cpu=", "dest_cpu": " dest_cpu=", "lost": "lost ",
}.items()}

_ERR_NONE, _ERR_HEADER, _ERR_TIME, _ERR_PAYLOAD = 0, 1, 2, 3
_ERR_TEXT = {1: "expected 'COMM [PID/]TID [CPU] SECONDS: EVENT: ...'", 2: "bad timestamp", 3: "bad event fields"}


@numba.njit(cache=True, inline="always")
def _is_digit(b):
    return 48 <= b <= 57


@numba.njit(cache=True)
def _find(buf, start, end, key):
    """First index >= start where key occurs entirely before end, or -1."""
    kl = key.shape[0]
    last = end - kl
    first = key[0]
    i = start
    while i <= last:
        if buf[i] == first:
            j = 1
            while j < kl and buf[i + j] == key[j]:
                j += 1
            if j == kl:
                return i
        i += 1
    return -1


@numba.njit(cache=True)
def _int(buf, i, end):
    """Parse a decimal (optionally negative, optionally padded) integer; (value, next, ok)."""
    while i < end and buf[i] == 32:
        i += 1
    neg = False
    if i < end and buf[i] == 45:
        neg = True
        i += 1
    v = 0
    start = i
    while i < end and _is_digit(buf[i]):
        v = v * 10 + (buf[i] - 48)
        i += 1
    if i == start:
        return 0, i, False
    return (-v if neg else v), i, True


@numba.njit(cache=True)
def _hex(buf, i, end):
    """Parse 0x-prefixed hex as an unsigned 64-bit pattern held in int64; (value, next, ok)."""
    while i < end and buf[i] == 32:
        i += 1
    if i + 1 < end and buf[i] == 48 and (buf[i + 1] == 120 or buf[i + 1] == 88):
        i += 2
    v = np.uint64(0)
    start = i
    while i < end:
        b = buf[i]
        if 48 <= b <= 57:
            d = b - 48
        elif 97 <= b <= 102:
            d = b - 87
        elif 65 <= b <= 70:
            d = b - 55
        else:
            break
        v = v * np.uint64(16) + np.uint64(d)
        i += 1
    if i == start or i - start > 16:
        return 0, i, False
    return np.int64(v), i, True


@numba.njit(cache=True)
def _hash(buf, a, b):
    h = np.uint64(14695981039346656037)
    for i in range(a, b):
        h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
    h = h ^ np.uint64(b - a)
    return np.int64(h)


@numba.njit(cache=True)
def _remember(h, a, b, seen, new_h, new_a, new_b, n_new):
    if h not in seen:
        seen[h] = 1
        if n_new < new_h.shape[0]:
            new_h[n_new] = h
            new_a[n_new] = a
            new_b[n_new] = b
            n_new += 1
    return n_new


@numba.njit(cache=True, inline="always")
def _string(buf, a, b, h, has, m, seen, new_h, new_a, new_b, n_new):
    """Row m's string field is buf[a:b]: store its hash; remember its first occurrence."""
    h[m] = _hash(buf, a, b)
    has[m] = True
    return _remember(h[m], a, b, seen, new_h, new_a, new_b, n_new)


@numba.njit(cache=True)
def _find_last(buf, start, stop, key):
    """Last index in [start, stop) where key starts, or -1 (comms may contain a key's text)."""
    found = -1
    i = _find(buf, start, stop, key)
    while i >= 0:
        found = i
        i = _find(buf, i + 1, stop, key)
    return found


@numba.njit(cache=True)
def _state_bits(buf, a, b):
    v = 0
    for i in range(a, b):
        c = buf[i]
        if c == 83:  # S
            v |= 1
        elif c == 68:  # D
            v |= 2
        elif c == 84:  # T
            v |= 4
        elif c == 116:  # t
            v |= 8
        elif c == 88:  # X
            v |= 16
        elif c == 90:  # Z
            v |= 32
        elif c == 80:  # P
            v |= 64
        elif c == 73:  # I
            v |= 128
        elif c == 32:
            break
    return v


@numba.njit(cache=True)
def _parse(buf, names, name_lens, kind_codes, keys, seen, line0):
    """Parse complete lines of buf. Returns columns, new comm entries and error info."""
    n = buf.shape[0]
    n_lines = 0
    for i in range(n):
        if buf[i] == 10:
            n_lines += 1
    if n > 0 and buf[n - 1] != 10:
        n_lines += 1
    time = np.empty(n_lines, np.int64)
    cpu = np.empty(n_lines, np.int32)
    tid = np.empty(n_lines, np.int32)
    pid = np.empty(n_lines, np.int32)
    kind = np.empty(n_lines, np.uint8)
    a0 = np.zeros(n_lines, np.int64)
    a1 = np.zeros(n_lines, np.int64)
    a2 = np.zeros(n_lines, np.int64)
    h0 = np.zeros(n_lines, np.int64)
    h1 = np.zeros(n_lines, np.int64)
    has0 = np.zeros(n_lines, np.bool_)
    has1 = np.zeros(n_lines, np.bool_)
    new_h = np.empty(4096, np.int64)
    new_a = np.empty(4096, np.int64)
    new_b = np.empty(4096, np.int64)
    n_new = 0
    m = 0
    skipped = 0
    err = 0
    err_line = 0
    err_off = 0
    line_no = line0
    pos = 0
    (k_prev_comm, k_prev_pid, k_prev_state, k_next_comm, k_next_pid, k_comm, k_pid, k_target_cpu,
     k_child_comm, k_child_pid, k_filename, k_old_pid, k_pid0, k_oldcomm, k_newcomm, k_oom, k_prio,
     k_clone_flags, k_uaddr, k_op, k_waiters, k_nr_futexes, k_runtime, k_orig_cpu, k_dest_cpu, k_lost) = keys
    lost = 0
    while pos < n:
        line_no += 1
        eol = pos
        while eol < n and buf[eol] != 10:
            eol += 1
        s = pos
        pos = eol + 1
        e = eol
        if e > s and buf[e - 1] == 13:
            e -= 1
        while s < e and (buf[s] == 32 or buf[s] == 9):
            s += 1
        if s == e or buf[s] == 35:  # blank or '#' comment
            continue
        # ---- header: find "[digits]" preceded by a tid token
        br = -1
        j = s
        while j < e:
            if buf[j] == 91:  # '['
                k = j + 1
                while k < e and _is_digit(buf[k]):
                    k += 1
                if k > j + 1 and k < e and buf[k] == 93 and j > s and buf[j - 1] == 32:
                    br = j
                    break
            j += 1
        if br < 0:
            err = 1
            err_line = line_no
            err_off = s
            break
        # tid token before the bracket: "PID/TID" or "TID"
        j = br - 1
        while j > s and buf[j] == 32:
            j -= 1
        tok_end = j + 1
        while j >= s and (_is_digit(buf[j]) or buf[j] == 47 or buf[j] == 45):
            j -= 1
        tok_start = j + 1
        if tok_start >= tok_end:
            err = 1
            err_line = line_no
            err_off = s
            break
        slash = -1
        for q in range(tok_start, tok_end):
            if buf[q] == 47:
                slash = q
        if slash >= 0:
            v1, _, ok1 = _int(buf, tok_start, slash)
            v2, _, ok2 = _int(buf, slash + 1, tok_end)
            if not (ok1 and ok2):
                err = 1
                err_line = line_no
                err_off = tok_start
                break
            pid[m] = v1
            tid[m] = v2
        else:
            v2, _, ok2 = _int(buf, tok_start, tok_end)
            if not ok2:
                err = 1
                err_line = line_no
                err_off = tok_start
                break
            pid[m] = -1
            tid[m] = v2
        cv, k, _ = _int(buf, br + 1, e)
        cpu[m] = cv
        k += 1  # ']'
        # ---- time: seconds.fraction:
        while k < e and buf[k] == 32:
            k += 1
        sec = 0
        t0 = k
        while k < e and _is_digit(buf[k]):
            sec = sec * 10 + (buf[k] - 48)
            k += 1
        if k == t0 or k >= e or buf[k] != 46:
            err = 2
            err_line = line_no
            err_off = k
            break
        k += 1
        frac = 0
        nd = 0
        while k < e and _is_digit(buf[k]):
            if nd < 9:
                frac = frac * 10 + (buf[k] - 48)
                nd += 1
            k += 1
        if nd == 0 or k >= e or buf[k] != 58:
            err = 2
            err_line = line_no
            err_off = k
            break
        while nd < 9:
            frac *= 10
            nd += 1
        time[m] = sec * 1000000000 + frac
        k += 1
        while k < e and buf[k] == 32:
            k += 1
        # ---- event name "group:name:"
        ev_s = k
        colons = 0
        while k < e and buf[k] != 32:
            if buf[k] == 58:
                colons += 1
                if colons == 2:
                    break
            k += 1
        ev_e = k
        code = -1
        for q in range(names.shape[0]):
            ln = name_lens[q]
            if ev_e - ev_s == ln:
                same = True
                for r in range(ln):
                    if buf[ev_s + r] != names[q, r]:
                        same = False
                        break
                if same:
                    code = q
                    break
        if code < 0 and ev_e - ev_s >= 9 and buf[ev_s] == 99 and buf[ev_s + 1] == 112 and buf[ev_s + 2] == 117 \
                and buf[ev_s + 3] == 45:  # "cpu-clock...": a sample (record --sample)
            kd = 17
        elif code < 0:
            skipped += 1
            continue
        else:
            kd = kind_codes[code]
        if kd == 255:  # "PERF_RECORD_LOST lost N": the kernel dropped N events here
            a = _find(buf, k, e, k_lost)
            if a < 0:
                err = 3
                err_line = line_no
                err_off = k
                break
            v, _, okl = _int(buf, a + k_lost.shape[0], e)
            if not okl:
                err = 3
                err_line = line_no
                err_off = a
                break
            lost += v
            continue
        k += 1
        while k < e and buf[k] == 32:
            k += 1
        p = k  # payload start
        ok = True
        if kd == 17 and p >= e:  # a sample printed without ip/sym (-F ...,trace): nothing to keep of it
            skipped += 1
            continue
        if kd == 1:  # SWITCH
            a = _find(buf, p, e, k_prev_comm)
            b = _find(buf, p, e, k_prev_pid)
            c2 = _find(buf, b + 1 if b >= 0 else p, e, k_prev_state)
            d = _find(buf, c2 + 1 if c2 >= 0 else p, e, k_next_comm)
            f = _find(buf, d + 1 if d >= 0 else p, e, k_next_pid)
            if a < 0 or b < 0 or c2 < 0 or d < 0 or f < 0:
                ok = False
            else:
                v, _, ok1 = _int(buf, b + k_prev_pid.shape[0], e)
                a0[m] = v
                v, _, ok2 = _int(buf, f + k_next_pid.shape[0], e)
                a1[m] = v
                ss = c2 + k_prev_state.shape[0]
                se = ss
                while se < e and buf[se] != 32:
                    se += 1
                a2[m] = _state_bits(buf, ss, se)
                ok = ok1 and ok2
                ca = a + k_prev_comm.shape[0]
                n_new = _string(buf, ca, b, h0, has0, m, seen, new_h, new_a, new_b, n_new)
                # next_comm ends at " next_pid="
                cb = d + k_next_comm.shape[0]
                ce = f
                # "==> next_comm=" : d points at the space before next_comm
                n_new = _string(buf, cb, ce, h1, has1, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 2 or kd == 3 or kd == 6:  # WAKEUP(_NEW), EXIT: "comm=%s pid=%d ..."
            a = _find(buf, p, e, k_comm)
            b = _find(buf, p, e, k_pid)
            if a != p or b < 0:
                ok = False
            else:
                # the comm may contain " pid="; the pid key is the last before " prio="
                pr = _find(buf, b + 1, e, k_prio)
                if pr >= 0:
                    b = _find_last(buf, b, pr, k_pid)
                v, _, ok = _int(buf, b + k_pid.shape[0], e)
                a0[m] = v
                if kd != 6:
                    tc = _find(buf, b, e, k_target_cpu)
                    if tc >= 0:
                        v, _, ok3 = _int(buf, tc + k_target_cpu.shape[0], e)
                        a1[m] = v
                        ok = ok and ok3
                    else:
                        a1[m] = -1
                ca = a + k_comm.shape[0]
                n_new = _string(buf, ca, b, h0, has0, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 4:  # FORK: "comm=%s pid=%d child_comm=%s child_pid=%d"
            a = _find(buf, p, e, k_comm)
            cc = _find(buf, p, e, k_child_comm)
            cp = _find(buf, cc + 1 if cc >= 0 else p, e, k_child_pid)
            b = _find(buf, p, cc if cc >= 0 else e, k_pid)
            if a != p or b < 0 or cc < 0 or cp < 0:
                ok = False
            else:
                v, _, ok1 = _int(buf, b + k_pid.shape[0], e)
                a0[m] = v
                v, _, ok2 = _int(buf, cp + k_child_pid.shape[0], e)
                a1[m] = v
                ok = ok1 and ok2
                ca = cc + k_child_comm.shape[0]
                n_new = _string(buf, ca, cp, h0, has0, m, seen, new_h, new_a, new_b, n_new)
                pa = a + k_comm.shape[0]
                n_new = _string(buf, pa, b, h1, has1, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 5:  # EXEC: "filename=%s pid=%d old_pid=%d"
            a = _find(buf, p, e, k_filename)
            op_ = _find(buf, p, e, k_old_pid)
            if a != p or op_ < 0:
                ok = False
            else:
                b = _find_last(buf, p, op_, k_pid)
                if b < 0:
                    ok = False
                else:
                    v, _, ok1 = _int(buf, b + k_pid.shape[0], e)
                    a0[m] = v
                    v, _, ok2 = _int(buf, op_ + k_old_pid.shape[0], e)
                    a1[m] = v
                    ok = ok1 and ok2
                    fa = a + k_filename.shape[0]
                    n_new = _string(buf, fa, b, h0, has0, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 7:  # RENAME: "pid=%d oldcomm=%s newcomm=%s oom_score_adj=%hd"
            a = _find(buf, p, e, k_pid0)
            oc = _find(buf, p, e, k_oldcomm)
            nc = _find(buf, oc + 1 if oc >= 0 else p, e, k_newcomm)
            oo = _find(buf, nc + 1 if nc >= 0 else p, e, k_oom)
            if a != p or oc < 0 or nc < 0:
                ok = False
            else:
                v, _, ok = _int(buf, a + k_pid0.shape[0], e)
                a0[m] = v
                ne = oo if oo >= 0 else e
                na = nc + k_newcomm.shape[0]
                n_new = _string(buf, na, ne, h0, has0, m, seen, new_h, new_a, new_b, n_new)
                oa = oc + k_oldcomm.shape[0]
                n_new = _string(buf, oa, nc, h1, has1, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 11:  # NEWTASK: "pid=%d comm=%s clone_flags=%llx oom_score_adj=%hd"
            a = _find(buf, p, e, k_pid0)
            cm = _find(buf, p, e, k_comm)
            cf = _find(buf, cm + 1 if cm >= 0 else p, e, k_clone_flags)
            if a != p or cm < 0 or cf < 0:
                ok = False
            else:
                v, _, ok1 = _int(buf, a + k_pid0.shape[0], e)
                a0[m] = v
                v, _, ok2 = _hex(buf, cf + k_clone_flags.shape[0], e)
                a1[m] = v
                ok = ok1 and ok2
                ca = cm + k_comm.shape[0]
                n_new = _string(buf, ca, cf, h0, has0, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 8:  # FUTEX_ENTER: "uaddr: 0x..., op: 0x..., ..."
            a = _find(buf, p, e, k_uaddr)
            b = _find(buf, p, e, k_op)
            if a != p or b < 0:
                ok = False
            else:
                v, _, ok1 = _hex(buf, a + k_uaddr.shape[0], e)
                a0[m] = v
                v, _, ok2 = _hex(buf, b + k_op.shape[0], e)
                a1[m] = v
                ok = ok1 and ok2
        elif kd == 10:  # FUTEX_WAITV: "waiters: 0x..., nr_futexes: 0x..."
            a = _find(buf, p, e, k_waiters)
            b = _find(buf, p, e, k_nr_futexes)
            if a != p or b < 0:
                ok = False
            else:
                v, _, ok1 = _hex(buf, a + k_waiters.shape[0], e)
                a0[m] = v
                v, _, ok2 = _hex(buf, b + k_nr_futexes.shape[0], e)
                a1[m] = v
                ok = ok1 and ok2
        elif kd == 9:  # FUTEX_EXIT: "0x..."
            v, _, ok = _hex(buf, p, e)
            a0[m] = v
        elif kd == 17:  # SAMPLE: "IP SYMBOL+0xOFF (DSO)"
            v, q, ok = _hex(buf, p, e)
            a0[m] = v
            while q < e and buf[q] == 32:
                q += 1
            ds = e - 1
            while ds > q and buf[ds] != 40:  # the last '(' opens the binary's name
                ds -= 1
            se = ds - 1 if ds > q else e
            while se > q and buf[se - 1] == 32:
                se -= 1
            plus = se - 1
            while plus > q and buf[plus] != 43:  # "+0x..." offset inside the symbol
                plus -= 1
            sym_end = se
            if plus > q and plus + 2 < se and buf[plus + 1] == 48 and buf[plus + 2] == 120:
                off, _, okoff = _hex(buf, plus + 1, se)
                if okoff:
                    a1[m] = off
                    sym_end = plus
            n_new = _string(buf, q, sym_end, h0, has0, m, seen, new_h, new_a, new_b, n_new)
            if ds > q and buf[e - 1] == 41:
                n_new = _string(buf, ds + 1, e - 1, h1, has1, m, seen, new_h, new_a, new_b, n_new)
        elif kd == 15 or kd == 16:  # STAT_RUNTIME "comm=%s pid=%d runtime=%Lu [ns]"; MIGRATE "... orig_cpu= dest_cpu="
            a = _find(buf, p, e, k_comm)
            stop = _find(buf, p, e, k_runtime) if kd == 15 else _find(buf, p, e, k_orig_cpu)
            if a != p or stop < 0:
                ok = False
            else:
                b = _find_last(buf, p, stop, k_pid)
                if b < 0:
                    ok = False
                else:
                    v, _, ok = _int(buf, b + k_pid.shape[0], e)
                    a0[m] = v
                    if kd == 15:
                        v, _, ok2 = _int(buf, stop + k_runtime.shape[0], e)
                        a1[m] = v
                    else:
                        v, _, ok2 = _int(buf, stop + k_orig_cpu.shape[0], e)
                        a1[m] = v
                        dc = _find(buf, stop, e, k_dest_cpu)
                        ok2 = ok2 and dc >= 0
                        if dc >= 0:
                            v, _, ok3 = _int(buf, dc + k_dest_cpu.shape[0], e)
                            a2[m] = v
                            ok2 = ok2 and ok3
                    ok = ok and ok2
                    ca = a + k_comm.shape[0]
                    n_new = _string(buf, ca, b, h0, has0, m, seen, new_h, new_a, new_b, n_new)
        if not ok:
            err = 3
            err_line = line_no
            err_off = p
            break
        kind[m] = kd
        m += 1
    return (time[:m], cpu[:m], tid[:m], pid[:m], kind[:m], a0[:m], a1[:m], a2[:m], h0[:m], h1[:m],
            has0[:m], has1[:m], new_h[:n_new], new_a[:n_new], new_b[:n_new], skipped, err, err_line, err_off,
            line_no, lost)


_KEY_ORDER = ["prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid", "comm", "pid", "target_cpu",
              "child_comm", "child_pid", "filename", "old_pid", "pid0", "oldcomm", "newcomm", "oom", "prio",
              "clone_flags", "uaddr", "op", "waiters", "nr_futexes", "runtime", "orig_cpu", "dest_cpu", "lost"]


def _keys_tuple():
    return tuple(_KEYS[k] for k in _KEY_ORDER)


def _new_seen():
    return numba.typed.Dict.empty(key_type=numba.types.int64, value_type=numba.types.int64)


def parse_perf_script(
    source: str | bytes | os.PathLike, *, progress: Callable[[int, int], None] | None = None
) -> RawEvents:
    """RawEvents from `perf script` text: a path, or the text itself as bytes.

    Raises TraceFormatError naming the line number of the first line that is not a
    perf-script event line.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        chunks_iter = _chunks_of_bytes(bytes(source))
        total = len(source)
        where = "input"
    else:
        path = os.fspath(source)
        try:
            total = os.path.getsize(path)
        except OSError as exc:
            raise UserError(f"{path}: {exc.strerror}") from None
        chunks_iter = _chunks_of_file(path)
        where = path
    keys = _keys_tuple()
    seen = _new_seen()
    parts = []
    strings: dict[int, str] = {}
    skipped = 0
    lost = 0
    line_no = 0
    done = 0
    for chunk in chunks_iter:
        buf = np.frombuffer(chunk, dtype=np.uint8)
        res = _parse(buf, _NAMES, _NAME_LENS, _KIND_CODES, keys, seen, line_no)
        (time, cpu, tid, pid, kind, a0, a1, a2, h0, h1, has0, has1, nh, na, nb, sk, err, err_line, err_off,
         line_no, lost_here) = res
        lost += lost_here
        for h, a, b in zip(nh.tolist(), na.tolist(), nb.tolist(), strict=True):
            strings[h] = bytes(chunk[a:b]).decode("utf-8", "replace").strip()
        size = len(chunk)
        del buf, chunk  # release the mapped pages before the next chunk (and before unmapping)
        if err:
            chunks_iter.close()
            raise TraceFormatError(
                f"{where}: line {err_line}: not perf script output ({_ERR_TEXT[err]}); "
                "expected the text of `perf script -F comm,pid,tid,cpu,time,event,trace --ns`"
            )
        skipped += sk
        parts.append((time, cpu, tid, pid, kind, a0, a1, a2, h0, h1, has0, has1))
        done += size
        if progress is not None:
            progress(done, total)
    if len(seen) > len(strings):  # more than 4096 new names in one chunk: recover them by re-reading
        raise UserError("too many distinct thread names in one chunk of the text; please report this input")
    if not parts:
        ev = RawEvents.empty()
        ev.stats = {"unknown_events": int(skipped), "lost_events": int(lost), "source_format": "perf-script"}
        return ev
    cols = [np.concatenate([p[i] for p in parts]) for i in range(12)]
    time, cpu, tid, pid, kind, a0, a1, a2, h0, h1, has0, has1 = cols
    hashes = np.array(sorted(strings), dtype=np.int64)
    comms = [strings[int(h)] for h in hashes]
    comm0 = np.where(has0, np.searchsorted(hashes, h0), -1)
    comm1 = np.where(has1, np.searchsorted(hashes, h1), -1)
    ev = RawEvents(time=time, cpu=cpu, tid=tid, pid=pid, kind=kind, arg0=a0, arg1=a1, arg2=a2,
                   comm0=comm0, comm1=comm1, comms=comms,
                   stats={"unknown_events": int(skipped), "lost_events": int(lost), "source_format": "perf-script"})
    return ev.sorted()


def _chunks_of_bytes(data: bytes):
    start = 0
    while start < len(data):
        end = min(start + CHUNK_BYTES, len(data))
        if end < len(data):
            nl = data.rfind(b"\n", start, end)
            end = nl + 1 if nl >= start else end
        yield data[start:end]
        start = end


def _chunks_of_file(path: str):
    """Chunks of a memory-mapped file cut at line ends: no copy, pages reclaimable by the OS."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                size = len(mm)
                start = 0
                while start < size:
                    end = min(start + CHUNK_BYTES, size)
                    if end < size:
                        nl = mm.rfind(b"\n", start, end)
                        end = nl + 1 if nl >= start else end
                    yield view[start:end]
                    # drop the parsed pages from this process (they stay in the page cache)
                    lo = start - start % mmap.PAGESIZE
                    hi = end - end % mmap.PAGESIZE
                    if hi > lo and hasattr(mm, "madvise"):
                        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
                    start = end
            finally:
                view.release()


def sniff(head: bytes) -> bool:
    """perf script text: an event line with '[CPU]' and a 'group:name:' tracepoint."""
    text = head.decode("utf-8", "replace")
    for line in text.splitlines()[:20]:
        if "[" in line and "]" in line and (": sched:" in line or ": syscalls:" in line or ": task:" in line):
            return True
    return False


def load(path: str, *, pid: int | None = None, comm: str | None = None, progress=None,
         between: tuple | None = None, **meta):
    """Import a perf script text file as a Trace of the process tree of `pid` (or `comm`), or of
    the part `between` (T0, T1) of it (parsed whole, then cut)."""
    from scalestack.ingest.parts import build_part, events_between

    events = events_between(parse_perf_script(path, progress=progress), between, path)
    return build_part(events, pid=pid, comm=comm,
                      meta={"source": "perf-script", "input": os.path.abspath(path), **meta})
