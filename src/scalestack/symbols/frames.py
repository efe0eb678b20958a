"""What the frames of a stacks pass could not name, and the caller the frame-pointer walk skips.

* **Unnamed frames** (``[unknown]``) keep their raw address; one note per cause: a stripped
  binary with no debug file by build-id, a binary deleted or replaced before the symbols were
  read, JIT-compiled code (perf names anonymous executable memory after ``/tmp/perf-PID.map``)
  whose perf map is missing, and addresses no symbol covers.
* **The skipped caller of a lock function.** glibc's ``pthread_mutex_lock`` and ``__lll_lock_wait``
  set up no frame pointer: when a futex wait's stack is walked by frame pointers, the frame-pointer
  register still holds the frame of the function that called ``pthread_mutex_lock``, so the walk
  goes from glibc straight to *that function's* caller, and the function itself is missing. The
  frame after glibc's is a return address in the caller's caller, right after a ``call``; when that
  is a direct ``call rel32`` to a function of the same binary, the callee is the missing frame
  (`elf.direct_callee`). It is put back in the stack, at the start of the function.
"""

from __future__ import annotations

import os
import re

from elftools.elf.elffile import ELFFile

from scalestack.symbols.elf import direct_callee, symbols_for

C_LIBRARY = re.compile(r"/(libc|libpthread)[.-][^/]*$|/libc\.so")
JIT_MAP = re.compile(r"^/tmp/perf-(\d+)\.map$")
DEBUG_DIRS = ("/usr/lib/debug/.build-id",)


def restore_skipped_callers(frames: list[tuple]) -> tuple[list[tuple], bool]:
    """`frames` (ip, symbol, offset, binary), leaf first, with the function the frame-pointer walk
    skipped after the C library put back (see the module docstring); and whether one was."""
    for i in range(1, len(frames)):
        if not C_LIBRARY.search(frames[i - 1][3]):
            continue
        ip, symbol, offset, binary = frames[i]
        if C_LIBRARY.search(binary) or not binary.startswith("/") or symbol == "[unknown]":
            continue
        callee = _callee(binary, symbol, offset)
        if callee is None or callee[0] == frames[i - 1][1]:
            return frames, False
        name, delta = callee
        return [*frames[:i], (ip + delta, name, 0, binary), *frames[i:]], True
    return frames, False


_CALLEES: dict = {}


def _callee(binary: str, symbol: str, offset: int):
    key = (binary, symbol, offset)
    if key not in _CALLEES:
        _CALLEES[key] = direct_callee(binary, symbol, offset)
    return _CALLEES[key]


def unnamed_frame_notes(frames) -> list[str]:
    """One note per binary whose frames stay raw addresses, saying why. `frames`: (symbol, binary)."""
    counts: dict[str, int] = {}
    for symbol, binary in frames:
        if symbol == "[unknown]" and binary:
            counts[binary] = counts.get(binary, 0) + 1
    notes = []
    for binary, n in sorted(counts.items()):
        frames_txt, stay = (f"{n} frames", "stay") if n != 1 else ("1 frame", "stays")
        jit = JIT_MAP.match(binary)
        if jit:
            if not os.path.exists(binary):
                notes.append(f"process {jit.group(1)}: JIT-compiled code without a perf map ({binary} was not "
                             f"written or is gone): {frames_txt} {stay} raw addresses")
            continue  # a map that covers most JIT code leaves its stubs unnamed: not worth a note
        if not binary.startswith("/") or binary.startswith("//"):
            notes.append(f"{frames_txt} in {binary} (anonymous memory perf could not map, e.g. JIT code) {stay} raw "
                         "addresses")
            continue
        syms = symbols_for(binary)
        if syms is None:
            notes.append(f"{binary}: not readable any more (deleted or replaced) when the symbols were read: "
                         f"{frames_txt} {stay} raw addresses")
            continue
        if not _has_symtab(binary) and not _has_debug_file(binary):
            base = binary.rsplit('/', 1)[-1]
            notes.append(f"{binary}: stripped (no .symtab) and no debug file by build-id: {frames_txt} {stay} "
                         f"unnamed, each shown as the stretch of code between the symbols it exports that it lies in "
                         f"[{base}+0xSTART..0xEND], or as its address [{base}+0xADDR] where there are none")
        else:
            notes.append(f"{binary}: {frames_txt} at addresses no symbol covers {stay} raw addresses")
    return notes


def _has_symtab(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return ELFFile(fh).get_section_by_name(".symtab") is not None
    except Exception:  # noqa: BLE001 - unreadable: no symbol table to use
        return False


def _has_debug_file(path: str) -> bool:
    bid = build_id(path)
    return bool(bid) and any(os.path.exists(f"{d}/{bid[:2]}/{bid[2:]}.debug") for d in DEBUG_DIRS)


def build_id(path: str) -> str | None:
    """The GNU build-id of an ELF file, as hex (None: none, or unreadable)."""
    try:
        with open(path, "rb") as fh:
            for sec in ELFFile(fh).iter_sections():
                if sec.header["sh_type"] != "SHT_NOTE":
                    continue
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        return str(note["n_desc"])
    except Exception:  # noqa: BLE001 - an unreadable file has no build-id
        return None
    return None
