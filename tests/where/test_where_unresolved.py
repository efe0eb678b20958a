"""What cannot be named stays a raw address with one note per cause (a stripped binary, a binary
deleted before the symbols were read, JIT code without a perf map, a process that exited during the
recording), and the caller of pthread_mutex_lock that the frame-pointer walk skips is put back from
the call instruction (`scalestack.symbols.frames`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

import scalestack
from scalestack.analysis.where import where
from scalestack.symbols.frames import restore_skipped_callers, unnamed_frame_notes

from ..conftest import ROOT, requires_recording

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objdump") is None,
                               reason="gcc and binutils are needed")


def _build(tmp_path, name="where_locks", strip=False):
    exe = tmp_path / name
    # a build-id of its own: perf's build-id cache (~/.debug) must hold no unstripped copy of it
    subprocess.run(["gcc", "-O1", "-fno-omit-frame-pointer", "-pthread", f"-Wl,--build-id=0x{os.urandom(20).hex()}",
                    str(ROOT / "workloads/c/where_locks.c"), "-o", str(exe)], check=True)
    if strip:
        subprocess.run(["strip", str(exe)], check=True)
    return exe


def _return_sites(exe) -> dict[tuple[str, str], int]:
    """(function, callee) -> offset in the function of the instruction after its call to callee."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True, text=True,
                         check=True).stdout
    out, func, start, pending = {}, None, 0, None
    for line in dis.splitlines():
        head = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if head:
            func, start, pending = head.group(2), int(head.group(1), 16), None
            continue
        ins = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if not ins or func is None:
            continue
        if pending is not None:
            out.setdefault((func, pending), int(ins.group(1), 16) - start)
            pending = None
        call = re.match(r"call\s+[0-9a-f]+ <(.+)>", f"{ins.group(2)} {ins.group(3)}")
        if call:
            pending = call.group(1)
    return out


@needs_gcc
def test_skipped_caller_of_the_lock_function_is_put_back(tmp_path):
    exe = str(_build(tmp_path))
    sites = _return_sites(exe)
    at = sites[("worker", "push_job")]  # worker's return address from push_job
    nm = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout
    addr = {ln.split()[2]: int(ln.split()[0], 16) for ln in nm.splitlines() if len(ln.split()) == 3}
    leaf = (0x7F0000001234, "__lll_lock_wait", 0x30, LIBC)
    root = (0x7F0000005678, "start_thread", 0x100, LIBC)
    ip = 0x555500000000 + addr["worker"] + at
    # the frame-pointer walk: from glibc straight to worker (push_job's frame is skipped)
    fixed, done = restore_skipped_callers([leaf, (ip, "worker", at, exe), root])
    assert done and fixed[1] == (0x555500000000 + addr["push_job"], "push_job", 0, exe)
    assert fixed[0] == leaf and fixed[2][1] == "worker" and len(fixed) == 4
    # the DWARF walk gives return addresses minus one
    fixed, done = restore_skipped_callers([leaf, (ip - 1, "worker", at - 1, exe), root])
    assert done and fixed[1][1] == "push_job" and fixed[1][0] == 0x555500000000 + addr["push_job"]
    # a complete stack (push_job's call goes to the PLT, not a function of the program): unchanged
    in_push = next(v for (f, c), v in sites.items() if f == "push_job" and c.startswith("pthread_mutex_lock"))
    whole = [leaf, (1, "push_job", in_push, exe), (ip, "worker", at, exe), root]
    assert restore_skipped_callers(whole) == (whole, False)
    # no C library frame before the program's, or an offset that is no return site: unchanged
    own = [(ip, "worker", at, exe), root]
    assert restore_skipped_callers(own) == (own, False)
    odd = [leaf, (ip, "worker", 0, exe)]
    assert restore_skipped_callers(odd) == (odd, False)


@needs_gcc
def test_each_unnamed_frame_gets_one_note_with_its_cause(tmp_path):
    stripped = _build(tmp_path, "stripped", strip=True)
    plain = _build(tmp_path, "plain")
    notes = unnamed_frame_notes([("[unknown]", str(stripped)), ("[unknown]", str(stripped)),
                                 ("[unknown]", str(tmp_path / "deleted")),
                                 ("[unknown]", "/tmp/perf-999999999.map"), ("[unknown]", "//anon"),
                                 ("[unknown]", str(plain)), ("push_job", str(plain))])
    assert len(notes) == 5, notes
    text = "\n".join(notes)
    assert f"{stripped}: stripped (no .symtab) and no debug file by build-id: 2 frames" in text
    assert f"{tmp_path / 'deleted'}: not readable any more (deleted or replaced)" in text
    assert "process 999999999: JIT-compiled code without a perf map" in text
    assert "1 frame in //anon" in text and f"{plain}: 1 frame at addresses no symbol covers" in text
    assert unnamed_frame_notes([("main", str(plain))]) == []


LIBRARY = r"""
static volatile unsigned sink;
__attribute__((noinline)) static unsigned hidden_loop(unsigned n) {
    unsigned x = 1;
    for (unsigned i = 0; i < n; i++) x = x * 33 + i;
    return x;
}
unsigned exported_before(unsigned n) { return n + 1; }
unsigned exported_after(unsigned n) { sink = hidden_loop(n); return sink; }
"""


@needs_gcc
def test_a_stripped_librarys_static_function_is_one_stretch_between_its_exports(tmp_path):
    """libz's longest_match is no exported symbol: every sampled instruction in it was a row of its own.
    A frame in a stripped library is named by the gap between the function symbols around it, the same
    for every address in that gap; outside the file's segments or in a known function there is none."""
    from elftools.elf.elffile import ELFFile

    from scalestack.analysis.where import unnamed_frame_name
    from scalestack.symbols.elf import ElfSymbols

    src = tmp_path / "lib.c"
    src.write_text(LIBRARY)
    lib = tmp_path / "libhid.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    nm = subprocess.run(["nm", str(lib)], capture_output=True, text=True, check=True).stdout
    hidden = next(int(ln.split()[0], 16) for ln in nm.splitlines() if ln.endswith(" hidden_loop"))
    subprocess.run(["strip", str(lib)], check=True)
    with open(lib, "rb") as fh:
        dyn = {s.name: (s["st_value"], s["st_size"]) for s in ELFFile(fh).get_section_by_name(".dynsym").iter_symbols()
               if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"}
    assert "hidden_loop" not in dyn and {"exported_before", "exported_after"} <= set(dyn)
    syms = ElfSymbols(str(lib))
    lo, hi = syms.unnamed_range(hidden)
    assert lo <= hidden < hi
    # bounded by function symbols (or the segment), and no exported function overlaps the stretch
    assert all(v + max(n, 1) <= lo or v >= hi for v, n in dyn.values())
    assert {syms.unnamed_range(a) for a in (hidden, hidden + 1, hi - 1)} == {(lo, hi)}
    assert unnamed_frame_name(str(lib), hidden + 3) == f"[libhid.so+{lo:#x}..{hi:#x}]"
    assert syms.unnamed_range(dyn["exported_after"][0]) is None  # inside a named function
    assert syms.unnamed_range(1 << 40) is None
    assert unnamed_frame_name(str(tmp_path / "gone.so"), 0x1234) == "[gone.so+0x1234]"


@needs_gcc
def test_a_stripped_programs_functions_are_their_unwind_entries(tmp_path):
    """A stripped executable keeps no function symbol (GNU sort exports only `_obstack_*`, after all
    of its code): its functions are bounded by .eh_frame_hdr's table, each stretch starting where the
    function does, and the code before the first entry, bounded on one side only, has no stretch."""
    from scalestack.symbols.elf import ElfSymbols

    plain = _build(tmp_path, "plain")
    nm = subprocess.run(["nm", "-S", "--defined-only", str(plain)], capture_output=True, text=True, check=True).stdout
    funcs = {f[3]: (int(f[0], 16), int(f[1], 16)) for f in (ln.split() for ln in nm.splitlines())
             if len(f) == 4 and f[2] in "tT" and int(f[1], 16) > 0}
    stripped = tmp_path / "stripped"
    shutil.copy(plain, stripped)
    subprocess.run(["strip", str(stripped)], check=True)
    syms = ElfSymbols(str(stripped))
    for name in ("update_table", "push_job", "main"):
        start, size = funcs[name]
        lo, hi = syms.unnamed_range(start + size // 2)
        assert lo == start and start + size <= hi, (name, hex(lo), hex(hi), hex(start), size)
        assert not any(start < a < hi for a, _ in funcs.values() if a != start), name  # no other function inside
    first = min(syms._unwound)
    assert syms.unnamed_range(first - 1) is None or syms.unnamed_range(first - 1)[1] <= first


@requires_recording
@pytest.mark.root
def test_stripped_program_keeps_raw_addresses_with_a_note(tmp_path):
    exe = _build(tmp_path, "where_locks.stripped", strip=True)
    trace = scalestack.record([str(exe), "3", "40", "big"], None, stacks=True)
    res = where(trace)
    assert any(f"{exe}: stripped" in n for n in res.notes), res.notes
    # its functions: each the stretch its unwind entry begins (strip keeps .eh_frame_hdr)
    assert any(re.fullmatch(r"\[where_locks\.stripped\+0x[0-9a-f]+\.\.0x[0-9a-f]+\]", f["function"])
               for f in res.functions[:3]), res.functions[:3]
    # its global mutex: named by its address in the file
    assert any(re.fullmatch(r"where_locks\.stripped\+0x[0-9a-f]+", lk["name"]) for lk in res.locks), res.locks


@requires_recording
@pytest.mark.root
def test_process_that_exited_is_named_and_a_deleted_binary_noted(tmp_path):
    exe = _build(tmp_path)
    gone = tmp_path / "gone_locks"
    shutil.copy(exe, gone)
    # two short-lived processes: one exits long before the recording ends, the other's binary is
    # deleted before the symbols are read
    script = f"{exe} 3 40 big; {gone} 3 40 big; rm {gone}; sleep 0.3"
    trace = scalestack.record(["sh", "-c", script], None, stacks=True)
    res = where(trace)
    assert "update_table" in [f["function"] for f in res.functions[:4]], res.functions[:4]
    assert "big_lock" in [lk["name"] for lk in res.locks], res.locks
    assert any(f"{gone}: not readable any more" in n for n in res.notes), res.notes
    assert any(re.fullmatch(r"\[gone_locks\+0x[0-9a-f]+\]", f["function"]) for f in res.functions), res.functions


@requires_recording
@pytest.mark.root
@pytest.mark.skipif(shutil.which("javac") is None, reason="java/javac are not installed")
def test_jit_without_perf_map_keeps_raw_addresses_with_a_note(tmp_path):
    from .test_where_record import JAVA_PROGRAM

    (tmp_path / "HotLoop.java").write_text(JAVA_PROGRAM)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "HotLoop.java")], check=True)
    # started through a shell, the JVM gets no perf-map flags: its JIT code has no map
    trace = scalestack.record(["sh", "-c", f"java -Xmx64m -cp {tmp_path} HotLoop"], None, stacks=True)
    res = where(trace)
    assert any("JIT-compiled code without a perf map" in n for n in res.notes), res.notes
    jit = [f for f in res.functions if f["binary"].startswith("/tmp/perf-")]
    assert jit and all(re.fullmatch(r"\[perf-\d+\.map\+0x[0-9a-f]+\]", f["function"]) for f in jit), jit


@requires_recording
@pytest.mark.root
def test_heap_lock_named_by_its_wait_call_site_through_frame_pointers(tmp_path):
    exe = _build(tmp_path)
    trace = scalestack.record([str(exe), "4", "60"], None, stacks="fp")
    res = where(trace)
    # the queue lock lives on the heap: no symbol names it, the call site of its waits does (one or
    # both of the threads that push jobs may wait on it, as the scheduler has them meet)
    heap = [lk["name"] for lk in res.locks if lk["how"] == "call-site"]
    assert "lock waited at push_job" in heap, [(lk["name"], lk["how"], lk["waiters"], lk["waits"]) for lk in res.locks]
    assert any("put back from the call instruction" in n for n in res.notes), res.notes
