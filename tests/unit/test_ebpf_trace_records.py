"""The eBPF trace collector's record file, read without the kernel."""

from __future__ import annotations

import numpy as np
import pytest

from scalestack.collect.ebpf import RECORD, read_records
from scalestack.errors import UserError
from scalestack.trace.events import Kind


def _write(path, rows):
    rec = np.zeros(len(rows), RECORD)
    for i, (t, cpu, tid, pid, kind, a0, a1, a2, c0, c1) in enumerate(rows):
        rec[i] = (t, a0, a1, a2, cpu, tid, pid, kind, c0, c1)
    rec.tofile(path)


def test_records_become_raw_events_sorted_with_one_string_table(tmp_path):
    f = tmp_path / "events.bin"
    _write(f, [
        (30, 1, 12, 10, Kind.SWITCH, 12, 0, 1, b"worker", b"swapper/1"),
        (10, 0, 10, 10, Kind.FUTEX_ENTER, 0xABC, 128, 0, b"", b""),
        (20, 0, 10, 10, Kind.RENAME, 12, 0, 0, b"worker", b"main"),
        (30, 1, 12, 10, Kind.RUN_DELAY, 12, 5000, 3, b"", b""),
        (40, 0, 10, 10, Kind.WAKEUP, 12, 1, 0, b"worker", b""),
    ])
    ev = read_records(str(f))
    assert ev.time.tolist() == [10, 20, 30, 30, 40]  # the ring buffer interleaves CPUs: sorted, stable
    assert ev.kind.tolist() == [Kind.FUTEX_ENTER, Kind.RENAME, Kind.SWITCH, Kind.RUN_DELAY, Kind.WAKEUP]
    assert ev.arg0.tolist() == [0xABC, 12, 12, 12, 12] and ev.arg1.tolist() == [128, 0, 0, 5000, 1]
    assert ev.pid.tolist() == [10] * 5 and ev.tid.tolist() == [10, 10, 12, 12, 10] and ev.cpu.tolist() == [0, 0, 1, 1, 0]
    names = [(ev.comm(a), ev.comm(b)) for a, b in zip(ev.comm0, ev.comm1, strict=True)]
    # futex and run-delay records carry no name; only switch, fork and rename carry two
    assert names == [("", ""), ("worker", "main"), ("worker", "swapper/1"), ("", ""), ("worker", "")]
    assert ev.comm0[0] == -1 and ev.comm1[4] == -1


def test_a_file_cut_mid_record_is_one_clear_error(tmp_path):
    f = tmp_path / "events.bin"
    _write(f, [(1, 0, 1, 1, Kind.EXIT, 1, 0, 0, b"x", b"")])
    f.write_bytes(f.read_bytes() + b"\0" * 7)
    with pytest.raises(UserError, match="not a whole number of 80-byte eBPF records"):
        read_records(str(f))
