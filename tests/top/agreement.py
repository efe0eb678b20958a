"""One run watched by both collectors at once: perf (`record --pid`) and the eBPF aggregator.

perf's C_j comes from its switch instants (`analysis/switch_spans.py`, runtime reports only to
repair lost switches), the quantity the aggregator keeps; its C_j from the state builder's
RUNNING intervals (laid out from the runtime reports) is shown beside it as `crit_states_ms`."""

from __future__ import annotations

import threading

import numpy as np

import scalestack


def both(command: list[str], perf_ready_s: float = 3.0, keep_perf_data: str | None = None):
    """(perf Trace, eBPF Snapshot) of the same run of `command`; the trace's meta["schedstat"]
    holds what the threads said of themselves (tid -> on-CPU ns, workloads' SCHEDSTAT_OUT), and
    meta["switch_spans"] the RUNNING spans at perf's switch instants, and meta["exit_truth"] each
    thread's on-CPU ns as the kernel charged it at its last switch-out (`collect/exit_check.py`;
    runtime threads, JIT and GC, write no SCHEDSTAT_OUT line: this is their truth)."""
    import os
    import tempfile

    import scalestack
    from scalestack.collect.aggregator import Aggregator, GatedCommand
    from scalestack.collect.exit_check import ExitProbe
    from scalestack.ingest.perf_data import read_events
    from scalestack.tools import perf_binary
    from scalestack.trace.switch_spans import switch_spans

    tmpdir = tempfile.TemporaryDirectory(prefix="scalestack-both-")
    perf_data = keep_perf_data or os.path.join(tmpdir.name, "perf.data")
    fd, selfreport = tempfile.mkstemp(prefix="scalestack-schedstat-")
    os.close(fd)
    old = os.environ.get("SCHEDSTAT_OUT")
    os.environ["SCHEDSTAT_OUT"] = selfreport
    try:
        gated = GatedCommand(command, quiet=True)
    finally:
        if old is None:
            del os.environ["SCHEDSTAT_OUT"]
        else:
            os.environ["SCHEDSTAT_OUT"] = old
    out: dict = {}

    ready = threading.Event()

    def run_command():  # perf must run in the main thread (it sets signal handlers)
        try:
            # release the program only once perf's events are on (a fixed sleep raced with a slow
            # perf start on a busy machine: perf then missed the run's start, eBPF did not)
            if not ready.wait(perf_ready_s * 20):
                raise RuntimeError("perf did not enable its events")
            gated.release()
            gated.proc.wait(timeout=120)  # reaped: /proc/PID goes, and `record --pid` stops
            out["snap"] = agg.snapshot()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            out["error"] = exc
            gated.cancel()

    with ExitProbe() as probe, Aggregator(gated.pid) as agg:
        th = threading.Thread(target=run_command)
        th.start()
        try:
            trace = scalestack.record(None, None, pid=gated.pid, duration=150, on_ready=ready.set,
                                      keep_perf_data=perf_data)
        finally:
            th.join()
    # the first thread ran before the watch began (in the gate): its kernel figure counts that too
    trace.meta["exit_truth"] = {tid: on_cpu for tid, (on_cpu, _rq, _at) in probe.readings().items()
                                if tid != gated.pid}
    if "error" in out:
        raise out["error"]
    with open(selfreport) as fh:
        trace.meta["schedstat"] = {int(ln.split()[0]): int(ln.split()[1]) for ln in fh if ln.strip()}
    os.unlink(selfreport)
    events = read_events(perf_data, perf_binary())
    tmpdir.cleanup()
    trace = trace.with_meta(switch_spans=switch_spans(events, trace.threads.tid, trace.start_ns, trace.end_ns))
    return trace, out["snap"]


def _covered(u0: np.ndarray, u1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Length of the union of disjoint sorted [u0, u1) that lies before each x."""
    before = np.r_[0, np.cumsum(u1 - u0)[:-1]]
    k = np.searchsorted(u0, x, side="right") - 1
    kk = np.maximum(k, 0)
    return np.where(k < 0, 0, before[kk] + np.clip(x - u0[kk], 0, u1[kk] - u0[kk]))


def beside_rebuilt_ns(spans) -> dict[int, int]:
    """tid -> time it ran while another thread ran in a span perf rebuilt (its bounds uncertain).

    Such a span moves the running count under the threads beside it, so their C_j is not exact
    either, even when none of their own spans was rebuilt."""
    tid, a, b = spans.tid, spans.start_ns, spans.end_ns
    rep = np.asarray(spans.repaired, bool)
    out = {}
    for t in np.unique(tid).tolist():
        mine, other = tid == t, rep & (tid != t)
        if not other.any():
            out[t] = 0
            continue
        o = np.argsort(a[other], kind="stable")
        s0, s1 = a[other][o], np.maximum.accumulate(b[other][o])
        new = np.r_[True, s0[1:] > s1[:-1]]  # the other threads' rebuilt spans merged into disjoint runs
        u0, u1 = s0[new], np.maximum.reduceat(s1, np.flatnonzero(new))
        out[t] = int((_covered(u0, u1, b[mine]) - _covered(u0, u1, a[mine])).sum())
    return out


def compare(trace, snap) -> list[dict]:
    """Per thread: C_j and Run_j from both, and their relative differences."""
    import dataclasses

    from scalestack.analysis.criticality import criticality_from_spans
    from scalestack.trace import SwitchSpanTable

    # the Trace's own criticality (switch-instant spans, made by the state builder) is what is scored;
    # the RUNNING-interval figure is kept beside it to show what the spans changed
    crit = scalestack.criticality(trace)
    states = scalestack.criticality(dataclasses.replace(trace, switch_spans=SwitchSpanTable.empty()))
    spans = trace.meta.get("switch_spans")
    if spans is not None:  # the harness's own sweep over the same perf.data gives the same C_j
        np.testing.assert_allclose(criticality_from_spans(trace, spans).criticality_ns, crit.criticality_ns,
                                   rtol=1e-9, atol=1.0)
    gaps = spans.gaps() if spans is not None else {}
    n_spans = dict(zip(spans.tids.tolist(), (spans.complete + spans.lost_in + spans.lost_out + spans.lost_whole).tolist(),
                       strict=True)) if spans is not None else {}
    beside = beside_rebuilt_ns(trace.switch_spans)
    idx = snap.index()
    rows = []
    for i, tid in enumerate(crit.tids.tolist()):
        j = idx.get(int(tid))
        c_e = float(snap.crit_ns[j]) if j is not None else 0.0
        r_e = float(snap.times_ns["running"][j]) if j is not None else 0.0
        c_p, r_p = float(crit.criticality_ns[i]), float(crit.running_ns[i])
        truth = trace.meta.get("schedstat", {}).get(int(tid))
        kernel = trace.meta.get("exit_truth", {}).get(int(tid))
        rows.append({"tid": int(tid), "name": str(crit.names[i]), "crit_perf_ms": c_p / 1e6, "crit_ebpf_ms": c_e / 1e6,
                     "crit_states_ms": float(states.criticality_ns[i]) / 1e6, "repaired": gaps.get(int(tid), 0),
                     "spans": n_spans.get(int(tid), 0), "beside_rebuilt_ms": beside.get(int(tid), 0) / 1e6,
                     "run_self_ms": truth / 1e6 if truth is not None else None,
                     "run_kernel_ms": kernel / 1e6 if kernel is not None else None,
                     "run_perf_ms": r_p / 1e6, "run_ebpf_ms": r_e / 1e6,
                     "crit_diff_pct": abs(c_e - c_p) / max(c_p, 1.0) * 100,
                     "run_diff_pct": abs(r_e - r_p) / max(r_p, 1.0) * 100,
                     "crit_share_perf": c_p / max(crit.criticality_ns.sum(), 1.0)})
    return rows


def summary(rows: list[dict]) -> str:
    head = f"{'tid':>7} {'name':16} {'C perf':>11} {'C eBPF':>9} {'diff':>8}  {'Run perf':>11} {'Run eBPF':>9} " \
           f"{'diff':>8} {'self':>9} {'kernel':>9} {'C states':>9} {'repaired':>8} {'beside':>8}"
    return "\n".join([head] + [
        f"{r['tid']:>7} {r['name'][:16]:16} C {r['crit_perf_ms']:9.3f} {r['crit_ebpf_ms']:9.3f} "
        f"({r['crit_diff_pct']:5.2f}%)  Run {r['run_perf_ms']:9.3f} {r['run_ebpf_ms']:9.3f} "
        f"({r['run_diff_pct']:5.2f}%) {r['run_self_ms'] if r['run_self_ms'] is not None else float('nan'):9.3f}"
        f" {r['run_kernel_ms'] if r['run_kernel_ms'] is not None else float('nan'):9.3f}"
        f" {r['crit_states_ms']:9.3f} {r['repaired']:8d} {r['beside_rebuilt_ms']:8.3f}"
        for r in rows])


__all__ = ["both", "compare", "summary", "np"]
