"""Chrome / Perfetto JSON trace events: import into a Trace, and export a Trace for the Perfetto UI.

Export writes one complete ("X") slice per state interval, named after the state, on the
thread's track, with ``cat = "scalestack.state"`` and the exact integer nanosecond times in
``args``, so `scalestack import chrome` of our own export gives back the same states.

Import also accepts traces written by other tools: for each thread, its slices (B/E pairs or
X events, nested or not) are taken as the thread being busy (RUNNING) and the time between
them as SLEEP, over the thread's lifetime from its first to its last event. Slices named after
a scalestack state ("running", "runnable", "sync_wait", ...) keep that state.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from scalestack.errors import TraceFormatError, UserError
from scalestack.fileio import atomic_write
from scalestack.trace import STATE_NAMES, State, Trace, make_trace

CATEGORY = "scalestack.state"


def export_chrome(trace: Trace, path: str | None = None) -> dict[str, Any]:
    """Chrome JSON for `trace` (written to `path` atomically when given)."""
    t0 = trace.start_ns
    events: list[dict[str, Any]] = []
    th = trace.threads
    pid_of = {int(t): int(p) if p >= 0 else 0 for t, p in zip(th.tid, th.pid, strict=True)}
    rows = zip(th.tid.tolist(), th.pid.tolist(), th.ppid.tolist(), th.name.tolist(), th.role.tolist(),
               th.start_known.tolist(), th.exited.tolist(), strict=True)
    history: dict[int, list] = {}
    for t, tm, nm in zip(trace.names.tid.tolist(), trace.names.time_ns.tolist(), trace.names.name.tolist(), strict=True):
        history.setdefault(t, []).append([tm, nm])
    for tid, pid, ppid, name, role, known, exited in rows:
        shown = pid if pid >= 0 else 0
        events.append({"ph": "M", "name": "thread_name", "pid": shown, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": shown, "tid": tid, "args": {"sort_index": tid}})
        events.append({"ph": "M", "name": "scalestack_thread", "pid": shown, "tid": tid,
                       "args": {"role": role, "pid": pid, "ppid": ppid, "start_known": known, "exited": exited,
                                "names": history.get(tid, [])}})
    s = trace.states
    cols = [c.tolist() for c in (s.tid, s.start_ns, s.end_ns, s.state, s.cpu, s.addr, s.waker, s.repaired)]
    for tid, a, b, st, cpu, addr, waker, rep in zip(*cols, strict=True):
        args: dict[str, Any] = {"start_ns": a, "end_ns": b}
        if cpu >= 0:
            args["cpu"] = cpu
        if addr:
            args["addr"] = hex(addr)
        if waker >= 0:
            args["waker"] = waker
        if rep:
            args["repaired"] = True
        events.append({
            "ph": "X", "cat": CATEGORY, "name": STATE_NAMES[st], "pid": pid_of.get(tid, 0), "tid": tid,
            "ts": (a - t0) / 1000.0, "dur": (b - a) / 1000.0, "args": args,
        })
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"scalestack": {k: v for k, v in trace.meta.items() if _jsonable(v)}},
    }
    if path is not None:
        atomic_write(path, json.dumps(doc, separators=(",", ":")).encode())
    return doc


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def sniff(head: bytes) -> bool:
    text = head.lstrip()[:1]
    return text in (b"{", b"[") and (b"traceEvents" in head or b'"ph"' in head)


def load(path: str, **_: Any) -> Trace:
    """Import a Chrome / Perfetto JSON trace-event file as a Trace."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        doc = _unterminated(raw)
        if doc is None:
            pos = getattr(exc, "pos", None)
            where = f" at byte {pos}" if pos is not None else ""
            raise TraceFormatError(f"{path}: not valid JSON{where}: {getattr(exc, 'msg', exc)}") from None
    return from_chrome(doc, source=os.path.abspath(path))


def _unterminated(raw: bytes):
    """The events of a JSON Array Format file without its closing bracket, which the Trace Event
    Format allows (a tracer killed mid-run leaves it so, a trailing comma too); None if it is not one."""
    text = raw.rstrip()
    if not text.lstrip().startswith(b"[") or text.endswith(b"]"):
        return None
    try:
        return json.loads(text.rstrip(b",") + b"]")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def from_chrome(doc: Any, *, source: str = "chrome") -> Trace:
    if isinstance(doc, list):
        events, other = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events, other = doc["traceEvents"], doc.get("otherData") or {}
    else:
        raise TraceFormatError(f"{source}: not a Chrome trace (expected a list of events or an object with 'traceEvents')")
    saved_meta = other.get("scalestack") if isinstance(other, dict) else None
    names: dict[tuple[int, int], str] = {}  # by (pid, tid): two processes' threads may share a tid number
    info: dict[int, dict] = {}
    pids: dict[int, int] = {}
    ours: dict[int, list[tuple[int, int, int, int, int, int, bool]]] = {}
    opens: dict[tuple[int, int], list[float]] = {}
    spans: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    begin_end: list[tuple[float, int, str, tuple[int, int]]] = []  # B and E, matched in time order below
    for n, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise TraceFormatError(f"{source}: event {n} is not an object")
        ph = ev.get("ph")
        try:
            tid = int(ev.get("tid", 0))
            pid = int(ev.get("pid", 0))
        except (TypeError, ValueError):
            raise TraceFormatError(f"{source}: event {n} has a non-integer pid/tid") from None
        pids.setdefault(tid, pid)
        args = ev.get("args") or {}
        if ph == "M":
            if ev.get("name") == "thread_name" and isinstance(args, dict):
                names[pid, tid] = str(args.get("name", ""))
            elif ev.get("name") == "scalestack_thread" and isinstance(args, dict):
                info[tid] = args
            continue
        if ph not in ("X", "B", "E"):
            continue
        try:
            ts = float(ev["ts"])
        except (KeyError, TypeError, ValueError):
            raise TraceFormatError(f"{source}: event {n} ({ph}) has no numeric 'ts'") from None
        if ph == "X":
            try:
                dur = float(ev.get("dur", 0.0))
            except (TypeError, ValueError):
                raise TraceFormatError(f"{source}: event {n} has a non-numeric 'dur'") from None
            if dur < 0:
                raise TraceFormatError(f"{source}: event {n} has a negative duration")
            if ev.get("cat") == CATEGORY and isinstance(args, dict) and "start_ns" in args:
                try:
                    st = STATE_NAMES.index(ev.get("name"))
                    addr = args.get("addr", 0)
                    addr = int(addr, 16) if isinstance(addr, str) else int(addr)
                    ours.setdefault(tid, []).append((
                        int(args["start_ns"]), int(args["end_ns"]), st, int(args.get("cpu", -1)),
                        addr, int(args.get("waker", -1)), bool(args.get("repaired", False)),
                    ))
                except (ValueError, TypeError, KeyError):
                    raise TraceFormatError(f"{source}: event {n} is a malformed scalestack state slice") from None
                continue
            spans.setdefault((pid, tid), []).append((ts, ts + dur, _state_of(ev.get("name"))))
        else:
            begin_end.append((ts, n, ph, (pid, tid)))
    # the format does not ask for events in time order: B and E are matched in it (file order at ties)
    for ts, n, ph, key in sorted(begin_end, key=lambda e: (e[0], e[1])):
        if ph == "B":
            opens.setdefault(key, []).append(ts)
            continue
        stack = opens.get(key)  # E closes the innermost open slice
        if not stack:
            raise TraceFormatError(f"{source}: event {n} ends a slice that was never begun on tid {key[1]}")
        spans.setdefault(key, []).append((stack.pop(), ts, -1))
    for key, stack in opens.items():
        if stack:
            raise TraceFormatError(f"{source}: {len(stack)} slice(s) on tid {key[1]} were begun but never ended")
    if ours and not spans:
        return _from_ours(ours, {t: nm for (_, t), nm in names.items()}, info, pids, saved_meta)
    if not spans and not ours:
        raise UserError(f"{source}: the trace holds no slices (X or B/E events)")
    return _from_slices(spans, names, source)


def _state_of(name: Any) -> int:
    """A slice named after a state keeps it; anything else is RUNNING (-1 = plain busy)."""
    if isinstance(name, str) and name.lower() in STATE_NAMES:
        return STATE_NAMES.index(name.lower())
    return -1


def _from_ours(ours, names, info, pids, saved_meta) -> Trace:
    flat = [(tid, *row) for tid, rows in ours.items() for row in rows]
    tid_c, a_c, b_c, st_c, cpu_c, addr_c, w_c, r_c = (list(col) for col in zip(*flat, strict=True))
    a_arr, b_arr, tid_arr = np.array(a_c, np.int64), np.array(b_c, np.int64), np.array(tid_c, np.int64)
    tids = np.unique(tid_arr)
    starts = np.array([a_arr[tid_arr == t].min() for t in tids])
    ends = np.array([b_arr[tid_arr == t].max() for t in tids])
    meta = dict(saved_meta or {})
    meta["imported_from"] = meta.get("source", "chrome")
    meta["source"] = "chrome"
    inf = [info.get(int(t), {}) for t in tids]
    roles = [str(i.get("role", "")) for i in inf]
    hist = [(int(t), int(tm), str(nm)) for t, i in zip(tids, inf, strict=True) for tm, nm in i.get("names", [])]
    names_cols = None
    if hist:
        names_cols = {"tid": [h[0] for h in hist], "time_ns": [h[1] for h in hist], "name": [h[2] for h in hist]}
    trace = make_trace(
        {"tid": tids, "pid": [int(i.get("pid", pids.get(int(t), 0))) for t, i in zip(tids, inf, strict=True)],
         "ppid": [int(i.get("ppid", -1)) for i in inf], "name": [names.get(int(t), "") for t in tids],
         "role": roles, "start_ns": starts, "end_ns": ends,
         "start_known": [bool(i.get("start_known", True)) for i in inf],
         "exited": [bool(i.get("exited", True)) for i in inf]},
        {"tid": tid_arr, "start_ns": a_arr, "end_ns": b_arr, "state": st_c, "cpu": cpu_c,
         "addr": np.array(addr_c, dtype=np.uint64), "waker": w_c, "repaired": r_c},
        names=names_cols,
        meta=meta,
    )
    return trace


def _thread_ids(keys) -> tuple[dict[tuple[int, int], int], list[str]]:
    """A Trace tid for each (pid, tid) of a generic trace: its own tid, but for threads of other
    processes that share a tid number with an earlier one (in time order of the file's keys), which
    get numbers above every tid of the file; and a warning for each."""
    top = max((t for _, t in keys), default=0)
    out, seen, warnings = {}, {}, []
    for pid, tid in keys:
        if tid not in seen:
            seen[tid] = pid
            out[pid, tid] = tid
            continue
        top += 1
        out[pid, tid] = top
        warnings.append(f"tid {tid} is a thread of process {seen[tid]} and of process {pid}: the latter is tid {top} here")
    return out, warnings


def _from_slices(spans, names, source) -> Trace:
    """Generic traces: the union of each thread's slices is RUNNING (or the named state)."""
    tid_c, a_c, b_c, st_c = [], [], [], []
    th_tid, th_pid, th_name, th_start, th_end = [], [], [], [], []
    ids, warnings = _thread_ids(list(spans))
    for key, rows in spans.items():
        tid = ids[key]
        arr = np.array([(round(a * 1000), round(b * 1000), s) for a, b, s in rows], dtype=np.int64)
        arr = arr[arr[:, 1] > arr[:, 0]]
        if len(arr) == 0:
            continue
        arr = arr[np.argsort(arr[:, 0], kind="stable")]
        # union of (possibly nested) busy slices: a running max of ends
        a, b, s = arr[:, 0], arr[:, 1], arr[:, 2]
        run_end = np.maximum.accumulate(b)
        new = np.r_[True, a[1:] >= run_end[:-1]]
        ga = a[new]
        gb = np.maximum.reduceat(b, np.flatnonzero(new))
        gs = s[new]
        gs = np.where(gs < 0, int(State.RUNNING), gs)
        # idle gaps between groups
        gap_a, gap_b = gb[:-1], ga[1:]
        keep = gap_b > gap_a
        gap_a, gap_b = gap_a[keep], gap_b[keep]
        n_busy, n_gap = len(ga), len(gap_a)
        tid_c.extend([tid] * (n_busy + n_gap))
        a_c.extend(ga.tolist() + gap_a.tolist())
        b_c.extend(gb.tolist() + gap_b.tolist())
        st_c.extend(gs.tolist() + [int(State.SLEEP)] * n_gap)
        th_tid.append(tid)
        th_pid.append(key[0])
        th_name.append(names.get(key, str(key[1])))
        th_start.append(int(ga[0]))
        th_end.append(int(gb[-1]))
    if not th_tid:
        raise UserError(f"{source}: every slice in the trace is empty")
    return make_trace(
        {"tid": th_tid, "pid": th_pid, "name": th_name, "start_ns": th_start, "end_ns": th_end},
        {"tid": tid_c, "start_ns": a_c, "end_ns": b_c, "state": st_c},
        meta={"source": "chrome", "input": source,
              "warnings": ["imported from generic Chrome slices: busy = RUNNING, between slices = SLEEP", *warnings]},
    )
