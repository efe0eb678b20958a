"""ELF symbol tables through pyelftools (maintained, pure Python, reads .symtab/.dynsym and program
headers of any ELF without running a tool); C++ names demangled through cxxfilt (the C++ runtime's
own ``abi::__cxa_demangle``).

An address in a process becomes an ELF virtual address through the load bias of its binary: the
bias is the mapping's start minus the virtual address of the PT_LOAD segment its file offset
falls in (0 for a non-PIE executable). Data symbols (.data, .bss) then resolve like functions,
including .bss in the anonymous mapping after the file-backed ones.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import os

import numpy as np
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile


def demangle(name: str) -> str:
    if not name.startswith("_Z"):
        return name
    try:
        import cxxfilt

        return cxxfilt.demangle(name)
    except Exception:  # noqa: BLE001 - an undemanglable name stays as it is
        return name


@dataclasses.dataclass(frozen=True)
class Symbol:
    name: str
    offset: int
    size: int
    kind: str  # "object" (data) or "func"


class ElfSymbols:
    """The symbols and loadable segments of one ELF file."""

    def __init__(self, path: str):
        self.path = path
        self.segments: list[tuple[int, int, int, int]] = []  # (p_offset, p_vaddr, p_filesz, p_memsz)
        self.stripped = True
        self._starts: list[int] | None = None
        self._funcs: dict[str, list[int]] | None = None
        self._func_at: dict[int, str] = {}
        self._unwound: list[int] = []
        self._unwound_ends: list[int] = []
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            self.pie = elf.header["e_type"] == "ET_DYN"
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD":
                    self.segments.append((seg["p_offset"], seg["p_vaddr"], seg["p_filesz"], seg["p_memsz"]))

    def _load(self) -> None:
        """Read the symbol tables (on first lookup: large libraries take seconds)."""
        starts, syms = [], []
        with open(self.path, "rb") as fh:
            elf = ELFFile(fh)
            found = {}
            for section_name in (".symtab", ".dynsym"):
                sec = elf.get_section_by_name(section_name)
                if sec is None:
                    continue
                if section_name == ".symtab":
                    self.stripped = False
                for sym in sec.iter_symbols():
                    kind = sym["st_info"]["type"]
                    if kind not in ("STT_OBJECT", "STT_TLS") or sym["st_shndx"] == "SHN_UNDEF":
                        continue
                    value = sym["st_value"]
                    size = max(int(sym["st_size"]), 1)
                    # several names at one address (``__TMC_END__`` and ``_PyRuntime``): keep the largest
                    if value and sym.name and (value not in found or found[value][1] < size):
                        found[value] = (sym.name, size, "object" if kind != "STT_FUNC" else "func")
            for value in sorted(found):
                starts.append(value)
                syms.append(found[value])
        self._starts, self._syms = starts, syms

    def bias(self, map_start: int, pgoff: int) -> int | None:
        """Load bias of this file given one of its mappings (start address, file offset)."""
        if not self.pie:
            return 0
        for p_offset, p_vaddr, p_filesz, _ in self.segments:
            if p_offset - (p_offset % 4096) <= pgoff < p_offset + max(p_filesz, 1):
                return map_start - (p_vaddr - (p_offset - pgoff))
        return None

    def _load_functions(self) -> None:
        funcs: dict[str, list[int]] = {}
        at: dict[int, str] = {}
        spans: list[tuple[int, int]] = []
        with open(self.path, "rb") as fh:
            elf = ELFFile(fh)
            for section_name in (".symtab", ".dynsym"):
                sec = elf.get_section_by_name(section_name)
                if sec is None:
                    continue
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] != "STT_FUNC" or sym["st_shndx"] == "SHN_UNDEF" or not sym.name:
                        continue
                    funcs.setdefault(sym.name, []).append(int(sym["st_value"]))
                    spans.append((int(sym["st_value"]), int(sym["st_value"]) + max(int(sym["st_size"]), 1)))
                    if sym.name.startswith("_Z"):  # perf prints frames demangled
                        funcs.setdefault(demangle(sym.name), []).append(int(sym["st_value"]))
                    at.setdefault(int(sym["st_value"]), sym.name)
            self._unwound, self._unwound_ends = _unwound_functions(elf)
        self._funcs, self._func_at = funcs, at
        spans.sort()
        self._span_starts = [a for a, _ in spans]
        self._span_ends = list(itertools.accumulate((b for _, b in spans), max))  # the furthest end so far

    def unnamed_range(self, vaddr: int) -> tuple[int, int] | None:
        """The stretch of code around `vaddr` that no function symbol covers. Inside a function the
        unwind table lists (.eh_frame_hdr, kept by `strip`), that function; elsewhere the gap between
        the functions around it, symbols or unwind entries. A stripped library's static functions
        (zlib's longest_match) and a stripped program's functions are so named once: samples
        anywhere in one are one row, not one per instruction. None outside the file's segments,
        inside a known function, or in a gap bounded on one side only (GNU sort exports only its
        `_obstack_*` functions, after all of its code: the gap before them is the whole program)."""
        if self._funcs is None:
            self._load_functions()
        seg = next(((v, v + m) for _, v, _, m in self.segments if v <= vaddr < v + m), None)
        if seg is None:
            return None
        i = bisect.bisect_right(self._span_starts, vaddr)
        if i and self._span_ends[i - 1] > vaddr:
            return None
        sym_lo = self._span_ends[i - 1] if i else None
        sym_hi = self._span_starts[i] if i < len(self._span_starts) else None
        k = bisect.bisect_right(self._unwound, vaddr) - 1
        if k >= 0 and vaddr < self._unwound_ends[k]:  # in a function the unwind table knows
            lo = max(self._unwound[k], sym_lo or seg[0], seg[0])
            hi = min(self._unwound_ends[k], sym_hi or seg[1], seg[1])
            return lo, max(hi, vaddr + 1)
        below = [b for b in (sym_lo, self._unwound_ends[k] if k >= 0 else None) if b is not None and b >= seg[0]]
        above = [b for b in (sym_hi, self._unwound[k + 1] if k + 1 < len(self._unwound) else None)
                 if b is not None and b <= seg[1]]
        if not below or not above:
            return None
        return max(below), max(min(above), vaddr + 1)

    def function_starts(self, name: str) -> list[int]:
        """Virtual addresses of the functions called `name` (several for static functions of one name)."""
        if self._funcs is None:
            self._load_functions()
        return self._funcs.get(name, [])

    def function_at(self, vaddr: int) -> str | None:
        """The function starting exactly at `vaddr`, if any."""
        if self._funcs is None:
            self._load_functions()
        return self._func_at.get(vaddr)

    def read(self, vaddr: int, n: int) -> bytes | None:
        """`n` bytes of the file's loaded image at virtual address `vaddr` (None outside its file data)."""
        for p_offset, p_vaddr, p_filesz, _ in self.segments:
            if p_vaddr <= vaddr and vaddr + n <= p_vaddr + p_filesz:
                with open(self.path, "rb") as fh:
                    fh.seek(p_offset + vaddr - p_vaddr)
                    data = fh.read(n)
                return data if len(data) == n else None
        return None

    def contains(self, vaddr: int) -> bool:
        return any(v <= vaddr < v + m for _, v, _, m in self.segments)

    def lookup(self, vaddr: int) -> Symbol | None:
        if self._starts is None:
            self._load()
        i = bisect.bisect_right(self._starts, vaddr) - 1
        # the nearest symbol below may be a small one that ends before vaddr while a larger one
        # further down contains it (a struct with other symbols placed after its start)
        for j in range(i, max(i - 256, -1), -1):
            name, size, kind = self._syms[j]
            off = vaddr - self._starts[j]
            if off < size:
                return Symbol(demangle(name), off, size, kind)
        return None


@functools.lru_cache(maxsize=64)
def elf_symbols(path: str, mtime_ns: int) -> ElfSymbols | None:
    try:
        return ElfSymbols(path)
    except (OSError, ELFError, ValueError):
        return None


def symbols_for(path: str) -> ElfSymbols | None:
    """Cached symbols of the ELF at `path` (None: gone, unreadable or not ELF)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return elf_symbols(path, st.st_mtime_ns)


CALL_REL32 = 0xE8  # x86-64 `call rel32`: 5 bytes, the target relative to the next instruction


def direct_callee(path: str, symbol: str, offset: int) -> tuple[str, int] | None:
    """The function of `path` called by a direct ``call rel32`` that returns to ``symbol+offset``
    (a return address as the frame-pointer walk gives it, or one less as the DWARF walk gives it),
    with its distance from that address: (name, target - (symbol start + offset)). None when the
    instruction there is no direct call, or its target is no function start of the same file (a PLT
    stub, another library): checked at every start of `symbol` in the file."""
    syms = symbols_for(path)
    if syms is None:
        return None
    try:
        starts = syms.function_starts(symbol)
        for start in starts:
            at = start + offset
            for ret in (at, at + 1):
                code = syms.read(ret - 5, 5)
                if code is None or code[0] != CALL_REL32:
                    continue
                target = ret + int.from_bytes(code[1:], "little", signed=True)
                name = syms.function_at(target)
                if name is not None:
                    return demangle(name), target - at
    except (OSError, ELFError, ValueError):
        return None
    return None


_EH_SIZES = {0x02: 2, 0x03: 4, 0x04: 8, 0x0A: 2, 0x0B: 4, 0x0C: 8}  # DW_EH_PE_ value formats: bytes


def _unwound_functions(elf: ELFFile) -> tuple[list[int], list[int]]:
    """Sorted (starts, ends) of the functions .eh_frame_hdr's search table lists (every function
    with unwind information: `strip` keeps it, since exceptions and backtraces need it). Read
    straight from the table, a pair of 4-byte offsets per function, and each entry's pc_begin and
    pc_range (pyelftools' full CFI parse takes seconds on a large program); an end is the next
    start where an entry is not laid out as GCC and Clang write them. ([], []) when the section is
    absent or encoded otherwise."""
    sec = elf.get_section_by_name(".eh_frame_hdr")
    if sec is None:
        return [], []
    data = sec.data()
    if len(data) < 4 or data[0] != 1:
        return [], []
    ptr_enc, count_enc, table_enc = data[1], data[2], data[3]
    n_ptr = _EH_SIZES.get(ptr_enc & 0x0F)
    if n_ptr is None or count_enc != 0x03 or table_enc != 0x3B:  # udata4 count, datarel|sdata4 table
        return [], []
    at = 4 + n_ptr
    if len(data) < at + 4:
        return [], []
    count = min(int.from_bytes(data[at:at + 4], "little"), (len(data) - at - 4) // 8)
    table = np.frombuffer(data, dtype="<i4", count=2 * count, offset=at + 4).astype(np.int64) + int(sec["sh_addr"])
    starts, fde = table[0::2], table[1::2]
    order = np.argsort(starts, kind="stable")
    starts, fde = starts[order], fde[order]
    ends = np.append(starts[1:], starts[-1:] + 1) if count else starts
    frame = elf.get_section_by_name(".eh_frame")
    if frame is not None and count:
        body = np.frombuffer(frame.data(), np.uint8)
        o = fde - int(frame["sh_addr"])
        if o.min() >= 0 and o.max() + 16 <= len(body):
            def word(off):
                return (body[off].astype(np.int64) | body[off + 1].astype(np.int64) << 8
                        | body[off + 2].astype(np.int64) << 16 | body[off + 3].astype(np.int64) << 24)
            pc = word(o + 8)
            pc = np.where(pc >= 1 << 31, pc - (1 << 32), pc) + fde + 8  # pcrel|sdata4, as the table's
            if np.array_equal(pc, starts):  # entries as read: their ranges are the functions' ends
                ends = starts + word(o + 12)
    return starts.tolist(), ends.tolist()
