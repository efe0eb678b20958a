"""A second collector: the kernel's own ftrace ring buffer, read through tracefs.

It exists to be compared with perf (issue "prove every Trace right"): the same tracepoints,
a different buffer. A private tracefs instance (`instances/scalestack-PID`) keeps other users'
tracing untouched; its clock is `mono` (CLOCK_MONOTONIC, like `record`'s perf clock); the
buffer is large and `buffer_percent` makes the kernel wake our reader threads only when a
CPU's buffer is half full, so draining costs the program almost nothing (perf's reader wakes far
more often); `overwrite` is off, so a full buffer drops new events and counts them rather than
silently overwriting old ones.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import tempfile
import threading
from collections.abc import Sequence

import numpy as np

from scalestack.collect.run import Run, root_pid, run_or_watch, sigint_for_the_program
from scalestack.errors import UserError
from scalestack.ingest.ftrace_raw import FtraceWindows, most_events, read_cpu_buffers
from scalestack.ingest.tracepoint import EventFormat, parse_format
from scalestack.ingest.windows import streamed
from scalestack.trace.events import RawEvents


def remove_stale_instances(instances: str) -> list[str]:
    """Remove the instances of recordings whose process is gone (killed before its cleanup ran):
    each holds its ring buffers (64 MiB per CPU by default) in kernel memory until removed."""
    removed = []
    try:
        names = os.listdir(instances)
    except OSError:
        return removed
    for name in names:
        m = re.fullmatch(r"scalestack-(\d+)", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        try:
            os.rmdir(os.path.join(instances, name))
            removed.append(name)
        except OSError:
            pass  # in use, or not ours to remove
    return removed


class TracefsInstance:
    """A private ftrace instance with the given tracepoints enabled; a context manager."""

    def __init__(self, tracefs: str, tracepoints: Sequence[str], pages: str, buffer_kb: int = 65536):
        self.root = os.path.join(tracefs, "instances", f"scalestack-{os.getpid()}")
        self.tracefs = tracefs
        self.tracepoints = list(tracepoints)
        self.buffer_kb = buffer_kb
        self.formats: dict[int, EventFormat] = {}
        self._spill = pages  # the caller's directory for one file of pages a CPU (its to remove)
        self._failed: OSError | None = None  # a page file that could not be written (a full device)
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def _write(self, rel: str, value: str) -> None:
        try:
            with open(os.path.join(self.root, rel), "w") as fh:
                fh.write(value)
        except OSError as exc:
            raise UserError(f"tracefs: cannot write {value!r} to {rel}: {exc.strerror}") from None

    def __enter__(self) -> TracefsInstance:
        remove_stale_instances(os.path.dirname(self.root))
        try:
            os.mkdir(self.root)
        except FileExistsError:  # left by a crashed run of this pid: instances go with rmdir
            os.rmdir(self.root)
            os.mkdir(self.root)
        except OSError as exc:
            raise UserError(f"tracefs: cannot create an instance under {self.tracefs}/instances: {exc.strerror}") from None
        self._write("tracing_on", "0")
        self._write("trace_clock", "mono")
        self._write("buffer_size_kb", str(self.buffer_kb))
        self._write("options/overwrite", "0")
        if os.path.exists(os.path.join(self.root, "buffer_percent")):
            self._write("buffer_percent", "50")
        for tp in self.tracepoints:
            group, name = tp.split(":", 1)
            with open(os.path.join(self.root, "events", group, name, "format")) as fh:
                fmt = parse_format(fh.read(), group)
            self.formats[fmt.id] = fmt
            self._write(f"events/{group}/{name}/enable", "1")
        return self

    def _cpus(self) -> list[int]:
        per_cpu = os.path.join(self.root, "per_cpu")
        return sorted(int(m.group(1)) for e in os.listdir(per_cpu) if (m := re.fullmatch(r"cpu(\d+)", e)))

    def _drain(self, cpu: int) -> None:
        """Copy one CPU's pages out to its file as the kernel fills them, and everything left at
        the end: the recording is not held in memory."""
        fd = os.open(os.path.join(self.root, "per_cpu", f"cpu{cpu}", "trace_pipe_raw"), os.O_RDONLY | os.O_NONBLOCK)
        try:
            with open(self._page_file(cpu), "wb") as out:
                while True:
                    final = self._stopping.is_set()
                    if not final:
                        select.select([fd], [], [], 0.2)
                    while True:
                        try:
                            block = os.read(fd, 4096)
                        except BlockingIOError:
                            break
                        if not block:
                            break
                        out.write(block.ljust(4096, b"\0"))
                    if final:
                        return
        except OSError as exc:  # the page file (a full $TMPDIR): said by `read` or `windows`, not lost in a thread
            self._failed = exc
        finally:
            os.close(fd)

    def _page_file(self, cpu: int) -> str:
        return os.path.join(self._spill, f"cpu{cpu}")

    def start(self) -> None:
        self._stopping.clear()
        self._threads = [threading.Thread(target=self._drain, args=(cpu,), daemon=True) for cpu in self._cpus()]
        for t in self._threads:
            t.start()
        self._write("tracing_on", "1")

    def stop(self) -> None:
        self._write("tracing_on", "0")
        self._stopping.set()
        for t in self._threads:
            t.join()

    def dropped(self) -> int:
        """How many events the buffer dropped (its per-CPU stats)."""
        dropped = 0
        for cpu in self._cpus():
            with open(os.path.join(self.root, "per_cpu", f"cpu{cpu}", "stats")) as fh:
                stats = fh.read()
            for key in ("overrun", "dropped events"):
                m2 = re.search(rf"^{key}:\s*(\d+)", stats, re.M)
                if m2:
                    dropped += int(m2.group(1))
        return dropped

    def _files(self) -> dict[int, str]:
        if self._failed is not None:
            raise UserError(f"cannot keep the tracefs recording in {self._spill}: {self._failed.strerror}; "
                            "free space there or set TMPDIR to a directory with room")
        return {cpu: self._page_file(cpu) for cpu in self._cpus()}

    def read(self) -> tuple[RawEvents, int]:
        """All recorded events, and how many the buffer dropped."""
        dropped = self.dropped()
        pages = {}
        for cpu, path in self._files().items():
            size = os.path.getsize(path) if os.path.exists(path) else 0
            # mapped, not read: a CPU's pages are touched once, while that CPU is decoded
            pages[cpu] = np.memmap(path, np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        events = read_cpu_buffers(pages, self.formats)
        events.stats["lost_events"] = dropped
        return events, dropped

    def windows(self, chunk_rows: int | None) -> FtraceWindows | None:
        """The recording in time windows (`ingest.ftrace_raw.FtraceWindows`) if it has more events
        than are read whole (`ingest.windows.streamed`), else None; its page files stay where they
        are (the caller's `pages` directory) for the windows to read."""
        files = self._files()
        rows = streamed(most_events(files, self.formats), chunk_rows)
        if rows is None:
            return None
        windows = FtraceWindows({c: f for c, f in files.items() if os.path.exists(f)}, self.formats, rows)
        if streamed(windows.events, chunk_rows) is None:
            return None
        windows.stats["lost_events"] = self.dropped()
        return windows

    def __exit__(self, *exc) -> None:
        try:
            self._write("tracing_on", "0")
            for tp in self.tracepoints:
                group, name = tp.split(":", 1)
                try:
                    with open(os.path.join(self.root, "events", group, name, "enable"), "w") as fh:
                        fh.write("0")
                except OSError:
                    pass
        finally:
            try:
                os.rmdir(self.root)
            except OSError:
                pass


TRACEFS = "/sys/kernel/tracing"


def ensure_tracefs() -> str:
    """The tracefs events directory, mounting tracefs if this is root and it is not mounted."""
    for base in (TRACEFS, "/sys/kernel/debug/tracing"):
        if os.path.isdir(os.path.join(base, "events")):
            return base
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
        if os.path.isdir(os.path.join(TRACEFS, "events")):
            return TRACEFS
        raise UserError(f"tracefs is not mounted and mounting it failed; run `mount -t tracefs nodev {TRACEFS}`")
    raise UserError(
        "recording scheduler tracepoints needs root: run `sudo scalestack record ...` "
        f"(tracefs at {TRACEFS} is not readable by this user)"
    )


def available_tracepoints(tracefs: str, wanted: Sequence[str]) -> tuple[list[str], list[str]]:
    have, missing = [], []
    for tp in wanted:
        group, name = tp.split(":", 1)
        (have if os.path.isdir(os.path.join(tracefs, "events", group, name)) else missing).append(tp)
    return have, missing


def collect(tracefs, tracepoints, command, pid, duration, *, hold: contextlib.ExitStack | None = None,
            chunk_rows: int | None = None) -> Run:
    """A private ftrace instance around the command (or for `duration` s), read afterwards. With
    `hold`, a recording of more than 4 `chunk_rows` events (default: `windows.STREAM_EVENTS`) is
    not read: the Run's `windows` reads its page files a window at a time, kept until `hold` closes."""
    with contextlib.ExitStack() as own:
        tmp = (hold or own).enter_context(tempfile.TemporaryDirectory(prefix="scalestack-rec-"))
        pages = os.path.join(tmp, "pages")
        os.mkdir(pages)
        with TracefsInstance(tracefs, tracepoints, pages) as inst:
            pidfile = os.path.join(tmp, "pid")
            with sigint_for_the_program():
                inst.start()
                rc = run_or_watch(command, pid, duration, pidfile)
                inst.stop()
            root = root_pid(pidfile) if command is not None else None
            windows = inst.windows(chunk_rows) if hold is not None else None
            if windows is None:
                events, dropped = inst.read()
            else:
                events, dropped = None, windows.stats["lost_events"]
    warnings = [f"the ftrace buffer dropped {dropped} events"] if dropped else []
    return Run(events, rc, root, {"ftrace_buffer_kb": inst.buffer_kb}, warnings, windows=windows)
