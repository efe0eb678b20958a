"""One event counter on a running program, read whenever the caller wants (perf_event_open).

The one-run pirate curve needs the work a program did in each window of a few hundred ms. Where the
machine counts instructions, that is the paper's measure; `perf stat -I` prints on its own clock,
not at the pirate's size changes, so the counter is opened here directly and read at each change.
On a VM without hardware counters, opening fails and the caller gets one line saying so.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

from scalestack.errors import UserError

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_TYPE_HARDWARE, _TYPE_SOFTWARE = 0, 1
# name -> (type, config): the events a window's work can be counted in
EVENTS = {"instructions": (_TYPE_HARDWARE, 1), "task-clock": (_TYPE_SOFTWARE, 1)}
_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7; the kernel accepts any size it knows up to its own
_INHERIT, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 1, 1 << 5, 1 << 6
_FLAG_FD_CLOEXEC = 8

_libc = ctypes.CDLL(None, use_errno=True)


class EventCounter:
    """Counts `event` in process `pid` and the threads it creates from now on, user mode only."""

    def __init__(self, pid: int, event: str):
        if event not in EVENTS:
            raise ValueError(f"event must be one of {', '.join(EVENTS)}, not {event!r}")
        nr = _PERF_EVENT_OPEN.get(platform.machine())
        if nr is None:
            raise UserError(f"counting {event} is not supported on {platform.machine()}: use --progress io")
        kind, config = EVENTS[event]
        attr = ctypes.create_string_buffer(_ATTR_SIZE)
        struct.pack_into("<IIQ", attr, 0, kind, _ATTR_SIZE, config)
        struct.pack_into("<Q", attr, 40, _INHERIT | _EXCLUDE_KERNEL | _EXCLUDE_HV)  # the flags word
        fd = _libc.syscall(nr, attr, ctypes.c_int(pid), ctypes.c_int(-1), ctypes.c_int(-1),
                           ctypes.c_ulong(_FLAG_FD_CLOEXEC))
        if fd < 0:
            err = ctypes.get_errno()
            why = ("the machine has no such counter (a VM?)" if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV)
                   else "no permission (run as root or lower kernel.perf_event_paranoid)" if err in (errno.EACCES, errno.EPERM)
                   else os.strerror(err))
            raise UserError(f"cannot count {event}: {why} (perf_event_open: {os.strerror(err)}); use --progress io")
        self.fd, self.event = fd, event

    def read(self) -> int:
        return struct.unpack("<Q", os.read(self.fd, 8))[0]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> EventCounter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
