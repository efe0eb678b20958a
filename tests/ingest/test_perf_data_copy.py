"""The copy of a perf.data that the stacks pass reads: the chosen processes' records only, without
their maps from before their last exec, on a hand-made file whose every record is known; and perf's
own reader agrees with it where perf is installed."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from scalestack.ingest.perf_data import _header, _opened
from scalestack.ingest.perf_data_copy import copy_for_processes

S_IP, S_TID, S_TIME, S_CPU, S_PERIOD, S_IDENTIFIER = 1, 2, 4, 128, 256, 1 << 16
SAMPLE_TYPE = S_IP | S_TID | S_TIME | S_CPU | S_PERIOD | S_IDENTIFIER
ATTR_SIZE = 136  # perf_event_attr (120 bytes, PERF_ATTR_SIZE_VER7) and the file's (ids offset, size)
IDS = (7, 8)  # one id per event


def _trailer(pid: int, time: int, ident: int) -> bytes:
    """sample_id_all's trailer for SAMPLE_TYPE: pid/tid, time, cpu, identifier."""
    return struct.pack("<iiQIIQ", pid, pid, time, 0, 0, ident)


def _rec(typ: int, body: bytes, misc: int = 0) -> bytes:
    return struct.pack("<IHH", typ, misc, 8 + len(body)) + body


def _mmap2(pid: int, start: int, name: str, time: int | None) -> bytes:
    body = struct.pack("<iiQQQIIQQII", pid, pid, start, 0x1000, 0, 0, 0, 0, 0, 5, 2)
    body += name.encode().ljust((len(name) // 8 + 1) * 8, b"\0")
    return _rec(10, body + (_trailer(pid, time, IDS[1]) if time is not None else b"\0" * 32))


def _comm(pid: int, name: str, time: int | None, exec_: bool) -> bytes:
    body = struct.pack("<ii", pid, pid) + name.encode().ljust(16, b"\0")
    return _rec(3, body + (_trailer(pid, time, IDS[1]) if time is not None else b"\0" * 32), 0x2000 if exec_ else 0)


def _sample(pid: int, time: int) -> bytes:
    return _rec(9, struct.pack("<QQiiQIIQ", IDS[0], 0x401000, pid, pid, time, 0, 0, 1))


def _perf_data(records: list[bytes]) -> bytes:
    """A perf.data of two software events (cpu-clock sampling, and perf's dummy side-band event),
    the given data records, and a hostname feature."""
    attrs = b""
    ids_at = 104
    ids = b"".join(struct.pack("<Q", i) for i in IDS)
    attrs_at = ids_at + len(ids)
    for k, (config, flags) in enumerate(((0, 1 << 18), (9, 1 << 18 | 1 << 8))):  # sample_id_all; mmap for the dummy
        attr = struct.pack("<IIQQQQQ", 1, 120, config, 1000000, SAMPLE_TYPE, 0, flags).ljust(120, b"\0")
        attrs += attr + struct.pack("<QQ", ids_at + 8 * k, 8)
    data_at = attrs_at + len(attrs)
    data = b"".join(records)
    host = b"box".ljust(8, b"\0")
    host = struct.pack("<I", len(host)) + host
    table_at = data_at + len(data)
    feature = struct.pack("<QQ", table_at + 16, len(host))
    head = b"PERFILE2" + struct.pack("<QQQQQQQQ", 104, ATTR_SIZE, attrs_at, len(attrs), data_at, len(data), 0, 0)
    head += (1 << 3).to_bytes(32, "little")  # HEADER_HOSTNAME
    return head + ids + attrs + data + feature + host


def _copy(src, dst, pids) -> bool:
    with _opened(str(src)) as (size, get, _read):
        info = _header(get, size, str(src))
    return copy_for_processes(str(src), str(dst), pids, info)


def _records_of(path) -> list[bytes]:
    with _opened(str(path)) as (size, get, _read):
        info = _header(get, size, str(path))
    data = open(path, "rb").read()[info.data_offset:info.data_offset + info.data_size]
    out, pos = [], 0
    while pos < len(data):
        n = struct.unpack_from("<H", data, pos + 6)[0]
        out.append(data[pos:pos + n])
        pos += n
    return out


def test_copy_keeps_the_processes_records_and_their_maps_after_their_exec(tmp_path):
    before_exec = [_mmap2(100, 0x7F0000000000, "/usr/bin/perf", None),  # perf's synthesized maps of its child
                   _comm(100, "sh", 5, True), _mmap2(100, 0x7F1000000000, "/usr/bin/dash", 6)]
    kept = [_mmap2(-1, 0xFFFFFFFF81000000, "[kernel.kallsyms]_text", None), _comm(100, "app", 10, True),
            _mmap2(100, 0x7F2000000000, "/usr/lib/libc.so.6", 11), _sample(100, 12), _rec(68, b""),
            _mmap2(101, 0x7F3000000000, "/usr/lib/libc.so.6", 13)]  # a child that never execs keeps its maps
    others = [_mmap2(200, 0x7F4000000000, "/usr/bin/other", 3), _comm(200, "other", 4, False), _sample(200, 12)]
    order = [before_exec[0], others[0], kept[0], before_exec[1], others[1], before_exec[2], kept[1], kept[2],
             others[2], kept[3], kept[4], kept[5]]
    src, dst = tmp_path / "in.data", tmp_path / "out.data"
    src.write_bytes(_perf_data(order))
    assert _records_of(src) == order  # the file is what this test says it is
    assert _copy(src, dst, [100, 101])
    # the maps from before the last exec go (perf's, then the shell's); names and exits stay
    assert _records_of(dst) == [kept[0], before_exec[1], *kept[1:]]
    with _opened(str(dst)) as (size, get, _read):
        info = _header(get, size, str(dst))
    assert info.features["hostname"] == "box"  # the features moved with the shorter data section
    # a process that does not exec keeps every map; one not chosen keeps nothing
    assert _copy(src, dst, [200])
    assert _records_of(dst) == [others[0], kept[0], others[1], others[2], kept[4]]


def test_what_cannot_be_copied_is_not(tmp_path):
    src = tmp_path / "in.data"
    src.write_bytes(_perf_data([_sample(100, 1)]))
    assert not _copy(src, tmp_path / "out.data", [])
    assert not (tmp_path / "out.data").exists()


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_perf_reads_the_copy(tmp_path):
    src, dst = tmp_path / "in.data", tmp_path / "out.data"
    src.write_bytes(_perf_data([_comm(100, "app", 10, True), _mmap2(100, 0x400000, "/usr/bin/app", 11),
                                _sample(100, 12), _sample(200, 13)]))
    assert _copy(src, dst, [100])
    out = subprocess.run(["perf", "script", "-i", str(dst), "-F", "pid,time"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines() if line.strip()] == ["100"]
