"""scalestack: why your multi-threaded program does not get faster with more cores.

Public API (mirrors the CLI)::

    import scalestack
    trace = scalestack.load("run.sst")       # or scalestack.record(["./prog", "4"])
    scalestack.criticality(trace).to_frame()
    scalestack.bottle(trace, window="500ms").to_json()
    scalestack.criticality("big.sst")        # a file too big to hold: read in time chunks
    scalestack.save(trace, "copy.sst")
"""

from __future__ import annotations

__version__ = "0.1.0"

import os as _os  # noqa: E402

# Compiled loops are cached next to their source; a user who cannot write there (a root-owned
# install) gets a private cache instead of numba's "no locator available" error at import.
if "NUMBA_CACHE_DIR" not in _os.environ and not _os.access(_os.path.dirname(__file__), _os.W_OK):
    import tempfile as _tempfile

    _os.environ["NUMBA_CACHE_DIR"] = _os.path.join(_tempfile.gettempdir(), f"scalestack-numba-{_os.getuid()}")

from scalestack.trace import State, Trace  # noqa: E402


def load(path: str, between: tuple[int, int] | None = None) -> Trace:
    """Read a Trace saved by `scalestack record` / `scalestack.save`; with `between` = (t0_ns, t1_ns)
    only that part, reading only the rows that may overlap it (big traces)."""
    from scalestack.trace.store import load as _load

    if between is None:
        return _load(path)
    return _load(path, window=(int(between[0]), int(between[1]))).between(int(between[0]), int(between[1]))


def save(trace: Trace, path: str) -> None:
    """Write `trace` to `path` (one file, Parquet tables in a zip; see `scalestack.trace.store`)."""
    from scalestack.trace.store import save as _save

    _save(trace, path)


def criticality(trace: Trace | str | _os.PathLike, **params):
    """Criticality stack of `trace`: each thread's share of the run time (`scalestack.analysis.criticality`).
    Given a trace file's path, it is read in time chunks (`scalestack.analysis.chunked`: memory
    follows the chunk, `max_rows=`, not the trace)."""
    if isinstance(trace, (str, _os.PathLike)):
        from scalestack.analysis.chunked import criticality as _chunked

        return _chunked(trace, **params)
    from scalestack.analysis.criticality import criticality as _criticality

    return _criticality(trace, **params)


def bottle(trace: Trace | str | _os.PathLike, **params):
    """Bottle graph of `trace` (`scalestack.analysis.bottle`): height criticality, width parallelism.
    Given a trace file's path, it is read in time chunks, as `criticality`."""
    if isinstance(trace, (str, _os.PathLike)):
        from scalestack.analysis.chunked import bottle as _chunked

        return _chunked(trace, **params)
    from scalestack.analysis.bottle import bottle as _bottle

    return _bottle(trace, **params)


def record(command: list[str] | None, output: str | None = None, **options) -> Trace:
    """Record `command` (eBPF where it can run, else perf) and return its Trace (saved to `output`
    when given).

    See `scalestack.collect.record.record` for the options (pid/duration to attach, collector,
    mmap_size, role_rules, reader, futex).
    """
    from scalestack.collect.record import record as _record

    return _record(command, output, **options)


__all__ = ["State", "Trace", "bottle", "criticality", "load", "record", "save", "__version__"]
