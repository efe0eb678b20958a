"""scalestack: why your multi-threaded program does not get faster with more cores.

Public API (mirrors the CLI)::

    import scalestack
    trace = scalestack.load("run.sst")       # or scalestack.record(["./prog", "4"])
    trace.criticality().to_frame()
    trace.bottle(window="500ms").to_json()
"""

from __future__ import annotations

__version__ = "0.1.0"

from scalestack.trace import State, Trace  # noqa: E402


def load(path: str) -> Trace:
    """Read a Trace saved by `scalestack record` / `Trace.save`."""
    from scalestack.store import load as _load

    return _load(path)


def record(command: list[str] | None, output: str | None = None, **options) -> Trace:
    """Record `command` (eBPF where it can run, else perf) and return its Trace (saved to `output`
    when given).

    See `scalestack.collect.perf.record` for the options (pid/duration to attach, collector,
    mmap_size, role_rules, reader, futex).
    """
    from scalestack.collect.perf import record as _record

    return _record(command, output, **options)


__all__ = ["State", "Trace", "load", "record", "__version__"]
