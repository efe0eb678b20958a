"""The eBPF trace collector: `scalestack record --collector ebpf`.

The same events as the perf and tracefs collectors (scalestack.trace.events.RECORD_TRACEPOINTS),
system-wide, taken by BTF tracepoint programs (`bpf/trace.bpf.c`) into a BPF ring buffer and
written to a file by a small loader (`bpf/trace_loader.c`). Why: on these VMs perf and ftrace
lose switches out of idle with no LOST record, which a BPF program on the same tracepoint
receives (docs/top.md, "Missed switch-ins"); the state builder repairs such gaps, within bounds,
but a collector that does not lose them needs no repair. Records are fixed 80-byte structs, read
here with one `np.fromfile`: no per-event Python.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

import numpy as np

from scalestack.collect import bpf_build
from scalestack.collect.run import Run, root_pid, run_or_watch, sigint_for_the_program
from scalestack.errors import UserError
from scalestack.trace.events import Kind, RawEvents

# trace.bpf.c's struct rec
RECORD = np.dtype([("time", "<u8"), ("a0", "<i8"), ("a1", "<i8"), ("a2", "<i8"), ("cpu", "<i4"), ("tid", "<i4"),
                   ("pid", "<i4"), ("kind", "<u4"), ("c0", "S16"), ("c1", "S16")])
assert RECORD.itemsize == 80
_NO_COMM = np.array([Kind.FUTEX_ENTER, Kind.FUTEX_EXIT, Kind.FUTEX_WAITV, Kind.RUN_DELAY], np.uint32)
_TWO_COMMS = np.array([Kind.SWITCH, Kind.FORK, Kind.RENAME], np.uint32)
DEFAULT_BUFFER = 64 << 20
NAME, HINT = "the eBPF trace collector", "; use --collector perf"  # in its error messages


def unavailable() -> str | None:
    """None when the eBPF collector can run here, else one line saying why not."""
    return bpf_build.unavailable(NAME, HINT)


def read_records(path: str) -> RawEvents:
    """The loader's file as RawEvents, sorted by time (each CPU submits in order; the ring buffer
    interleaves CPUs)."""
    size = os.path.getsize(path)
    if size % RECORD.itemsize:
        raise UserError(f"{path}: {size} bytes is not a whole number of {RECORD.itemsize}-byte eBPF records; "
                        "the recording was cut short")
    rec = np.fromfile(path, dtype=RECORD)
    n = len(rec)
    uniq, inv = np.unique(np.concatenate([rec["c0"], rec["c1"]]), return_inverse=True)
    comms = [u.split(b"\0", 1)[0].decode("utf-8", "replace") for u in uniq.tolist()]
    kind = rec["kind"]
    comm0 = np.where(np.isin(kind, _NO_COMM), -1, inv[:n])
    comm1 = np.where(np.isin(kind, _TWO_COMMS), inv[n:], -1)
    ev = RawEvents(time=rec["time"].astype(np.int64), cpu=rec["cpu"], tid=rec["tid"], pid=rec["pid"], kind=kind,
                   arg0=rec["a0"], arg1=rec["a1"], arg2=rec["a2"], comm0=comm0, comm1=comm1, comms=comms)
    return ev.sorted()


class TraceSession:
    """The loaded trace programs writing to `path` from construction until `stop()`."""

    def __init__(self, path: str, buffer_bytes: int = DEFAULT_BUFFER, timeout: float = 60.0, futex: bool = True):
        obj, loader = bpf_build.build(program="trace")
        self.path = path
        argv = [loader, obj, path, str(buffer_bytes)] + ([] if futex else ["nofutex"])
        self.proc = bpf_build.start_loader(argv, timeout, NAME, HINT)

    def stop(self, timeout: float = 60.0) -> tuple[int, int]:
        """Detach, drain, and return (records written, records lost for want of buffer room)."""
        try:
            out, err = self.proc.communicate("q\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise UserError(f"{NAME} did not stop within {timeout:.0f} s") from None
        done = [ln.split() for ln in out.splitlines() if ln.startswith("done ")]
        if self.proc.returncode != 0 or not done:
            last = err.strip().splitlines()
            raise UserError(f"{NAME} failed: " + (last[-1] if last else f"status {self.proc.returncode}"))
        return int(done[-1][1]), int(done[-1][2])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def collect(command, pid, duration, futex: bool, on_ready=None) -> Run:
    """BTF tracepoint programs into a BPF ring buffer around the command (or for `duration` s)."""
    with tempfile.TemporaryDirectory(prefix="scalestack-rec-") as tmp:
        data, pidfile = os.path.join(tmp, "events.bin"), os.path.join(tmp, "pid")
        with sigint_for_the_program(), TraceSession(data, DEFAULT_BUFFER, futex=futex) as session:
            rc = run_or_watch(command, pid, duration, pidfile, on_ready)
            written, lost = session.stop()
        root = root_pid(pidfile) if command is not None else None
        events = read_records(data)
    events.stats["lost_events"] = lost
    warnings = [f"the eBPF ring buffer had no room for {lost} events"] if lost else []
    return Run(events, rc, root, {"ebpf_buffer_bytes": DEFAULT_BUFFER, "ebpf_records": written}, warnings)
