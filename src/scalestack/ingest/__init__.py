"""Importers: traces recorded elsewhere, in other formats, turned into a Trace.

Each importer declares a name, a `sniff(head: bytes) -> bool` that recognises the format
from the first bytes of a file, and a `load(path, **options) -> Trace`. `scalestack import
FILE` tries the sniffers in order when no format is named (Perfetto's trace-type detection).
Linux tokenizers (perf.data, perf script text) produce `RawEvents` and end in the shared
`scalestack.trace.builder`, so every source gives the same Trace for the same run.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

from scalestack.errors import UserError


@dataclasses.dataclass(frozen=True)
class Importer:
    name: str
    module: str  # module defining `sniff(head: bytes) -> bool` and `load(path, **options) -> Trace`
    description: str

    def _mod(self):
        return importlib.import_module(self.module)

    @property
    def sniff(self) -> Callable[[bytes], bool]:
        return self._mod().sniff

    @property
    def load(self) -> Callable[..., object]:
        return self._mod().load


IMPORTERS: dict[str, Importer] = {
    imp.name: imp
    for imp in [
        Importer("perf-data", "scalestack.ingest.perf_data", "perf.data from `perf record -a -e sched:...` (read directly)"),
        Importer("perf-script", "scalestack.ingest.perf_script", "text output of `perf script` for such a perf.data"),
        Importer("chrome", "scalestack.ingest.chrome", "Chrome / Perfetto JSON trace events"),
    ]
}


def sniff_format(path: str) -> str:
    """Name of the importer that recognises the file, or a UserError listing the formats."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    for imp in IMPORTERS.values():
        try:
            if imp.sniff(head):
                return imp.name
        except ImportError:
            continue
    raise UserError(f"{path}: unrecognised format; name one of: {', '.join(IMPORTERS)}")
