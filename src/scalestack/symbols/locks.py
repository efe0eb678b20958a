"""Names for futex words: what a programmer calls the lock a thread waits on.

* A futex inside a mapped binary's loaded segments (.data/.bss of the program or a library) is
  named by its ELF symbol and offset: a global ``pthread_mutex_t big_lock`` is ``big_lock``
  (a condition variable's futex words lie inside it, at ``name+0x28``).
* Known runtimes: a futex inside CPython's ``_PyRuntime`` at the offsets of the GIL is
  "the CPython GIL" (offsets measured: 3.11's gil_runtime_state at +360, 208 bytes, its cond's
  futex words at +0x1b0/+0x1b4 and its mutex at +0x1b8; 3.13.0's, the main interpreter's
  `ceval.gil` embedded in ``_PyRuntime``, the same struct at +0x17768: words at
  +0x177b0/+0x177b4/+0x177b8).
* Anything else (heap, stack, anonymous memory) is left to the analysis, which names it by the
  call site of its waits (`scalestack.analysis.where`).

The mappings come from the recording itself (perf's MMAP2 records, which perf also synthesizes
for processes already running when it starts), so a process that exited before the recording
ended is still named, as long as its binaries are still on disk.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from scalestack.symbols.elf import symbols_for

# CPython versions whose GIL lives inside _PyRuntime, and where: [start, end) offsets
CPYTHON_GIL = {(3, 11): (360, 568), (3, 13): (0x17768, 0x17768 + 208)}
PYTHON_RE = re.compile(r"python(\d)\.(\d+)")


@dataclasses.dataclass(frozen=True)
class Mapping:
    """One executable file mapping of a process (from perf's MMAP2 records)."""

    pid: int
    start: int
    size: int
    pgoff: int
    path: str


def name_futexes(addrs: Iterable[tuple[int, int]], mappings: Iterable[Mapping]) -> tuple[dict[int, dict], list[str]]:
    """Names of the futex words (pid, addr) that lie inside a mapped binary.

    Returns {addr: {"name", "binary", "symbol", "offset", "kind"}} (kind: "global", "cpython-gil",
    "unnamed-global" for a stripped binary) and the notes for the cases that could not be named.
    """
    by_pid: dict[int, list[Mapping]] = {}
    for m in mappings:
        if m.path.startswith("/") and not m.path.startswith(("//", "/memfd:")):
            by_pid.setdefault(m.pid, []).append(m)
    names: dict[int, dict] = {}
    notes: set[str] = set()
    for pid, addr in addrs:
        if addr in names:
            continue
        for path, bias in _binaries(by_pid.get(pid, ()), notes):
            syms = symbols_for(path)
            if syms is None or bias is None or not syms.contains(addr - bias):
                continue
            vaddr = addr - bias
            sym = syms.lookup(vaddr)
            if sym is None:
                why = "stripped" if syms.stripped else "no symbol covers it"
                names[addr] = {"name": f"{_short(path)}+{vaddr:#x}", "binary": path, "symbol": None,
                               "offset": vaddr, "kind": "unnamed-global"}
                notes.add(f"{path}: {why}; its locks are named by address in the file")
                break
            names[addr] = _named(sym.name, sym.offset, path)
            break
    return names, sorted(notes)


def _named(symbol: str, offset: int, path: str) -> dict:
    entry = {"name": symbol if offset == 0 else f"{symbol}+{offset:#x}", "binary": path, "symbol": symbol,
             "offset": offset, "kind": "global"}
    if symbol == "_PyRuntime":
        m = PYTHON_RE.search(path)
        version = (int(m.group(1)), int(m.group(2))) if m else None
        gil = CPYTHON_GIL.get(version)
        if gil and gil[0] <= offset < gil[1]:
            entry.update(name="the CPython GIL", kind="cpython-gil")
        else:
            entry["note"] = (f"inside CPython's runtime state; the GIL's offsets are known for "
                             f"{', '.join(f'{v[0]}.{v[1]}' for v in CPYTHON_GIL)} only")
    return entry


def _binaries(maps: Iterable[Mapping], notes: set[str]):
    """(path, load bias) of each binary mapped by one process."""
    seen = set()
    for m in maps:
        if m.path in seen:
            continue
        seen.add(m.path)
        syms = symbols_for(m.path)
        if syms is None:
            notes.add(f"{m.path}: not readable any more (deleted or replaced); its addresses stay raw")
            continue
        yield m.path, syms.bias(m.start, m.pgoff)


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]
