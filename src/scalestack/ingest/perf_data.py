"""perf.data files recorded elsewhere, imported through `perf script` for now.

The file is handed to the installed `perf script` and its text read by the compiled parser
(`scalestack.ingest.perf_script`), so any perf.data this machine's perf can read imports. A
direct reader of the binary format (the way past perf script's ~0.4 M events/s) is planned.
Record what scalestack needs with::

    perf record -k CLOCK_MONOTONIC -a -e sched:sched_switch,sched:sched_wakeup,sched:sched_wakeup_new,\\
      sched:sched_process_fork,sched:sched_process_exec,sched:sched_process_exit,task:task_rename,\\
      syscalls:sys_enter_futex,syscalls:sys_exit_futex,sched:sched_stat_runtime,sched:sched_migrate_task
"""

from __future__ import annotations

import os

from scalestack.trace import Trace


def sniff(head: bytes) -> bool:
    return head[:8] in (b"PERFILE2", b"2ELIFREP")


def load(path: str, *, pid: int | None = None, comm: str | None = None, progress=None) -> Trace:
    """Import a system-wide perf.data as the Trace of the process tree of `pid` (or `comm`)."""
    from scalestack.collect.perf import perf_binary, read_events
    from scalestack.state_builder import build_trace

    events = read_events(path, perf_binary(), reader="perf-script")
    return build_trace(events, root_pids=[pid] if pid else None, comm=comm,
                       meta={"source": "perf-data", "input": os.path.abspath(path)})
