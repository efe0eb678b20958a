"""The ftrace ring-buffer page walker and tracepoint decoder on hand-built pages."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.ingest.ftrace_raw import read_cpu_buffers
from scalestack.ingest.tracepoint import parse_format, preempt_flag
from scalestack.trace.events import Kind

SWITCH_FORMAT = """name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), "|", { 0x00000001, "S" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio
"""

FORK_FORMAT = """name: sched_process_fork
ID: 300
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] child_comm;\toffset:16;\tsize:4;\tsigned:0;
\tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;

print fmt: "comm=%s pid=%d child_comm=%s child_pid=%d"
"""


def switch_record(pid, prev, nxt, state, prev_comm=b"a", next_comm=b"b"):
    return struct.pack("<HBBi16sii q16sii", 372, 0, 0, pid, prev_comm, prev, 120, state, next_comm, nxt, 120)


def fork_record(parent, child):
    strings = b"main\0" + b"worker-1\0"
    head = struct.pack("<HBBiIiIi", 300, 0, 0, parent, (5 << 16) | 24, parent, (9 << 16) | 29, child)
    return head + strings + b"\0" * ((-len(head + strings)) % 4)


def page(ts, records):
    """A 4096-byte ring-buffer page: records are (delta, payload) or ("extend", delta)."""
    body = b""
    for rec in records:
        if rec[0] == "extend":
            delta = rec[1]
            body += struct.pack("<II", 30 | ((delta & ((1 << 27) - 1)) << 5), delta >> 27)
            continue
        delta, payload = rec
        if len(payload) % 4 == 0 and len(payload) // 4 <= 28:
            body += struct.pack("<I", (len(payload) // 4) | (delta << 5)) + payload
        else:
            pad = payload + b"\0" * ((-len(payload)) % 4)
            body += struct.pack("<II", 0 | (delta << 5), len(pad) + 4) + pad
    head = struct.pack("<Qq", ts, len(body))
    return (head + body).ljust(4096, b"\0")


FORMATS = {372: parse_format(SWITCH_FORMAT, "sched"), 300: parse_format(FORK_FORMAT, "sched")}


def test_preempt_flag_is_read_from_the_print_fmt():
    assert preempt_flag(FORMATS[372]) == 0x100


def test_records_times_and_fields():
    p0 = page(1_000, [(5, switch_record(10, 10, 11, 1, b"main", b"worker")), ("extend", 1 << 30),
                      (7, switch_record(11, 11, 0, 0x100)), (0, fork_record(10, 12))])
    ev = read_cpu_buffers({1: p0}, FORMATS)
    assert ev.time.tolist() == [1_005, 1_005 + (1 << 30) + 7, 1_005 + (1 << 30) + 7]
    assert ev.kind.tolist() == [Kind.SWITCH, Kind.SWITCH, Kind.FORK]
    assert ev.cpu.tolist() == [1, 1, 1] and ev.tid.tolist() == [10, 11, 10]
    assert ev.arg0.tolist()[:2] == [10, 11] and ev.arg1.tolist()[:2] == [11, 0]
    assert ev.arg2.tolist()[:2] == [1, 0]  # S, and R+ (preempted) -> runnable
    assert ev.comm(ev.comm0[0]) == "main" and ev.comm(ev.comm1[0]) == "worker"
    assert (ev.arg0[2], ev.arg1[2]) == (10, 12)
    assert ev.comm(ev.comm0[2]) == "worker-1" and ev.comm(ev.comm1[2]) == "main"


def test_two_cpus_are_merged_in_time_order():
    ev = read_cpu_buffers({0: page(100, [(1, switch_record(1, 1, 2, 1))]), 1: page(50, [(1, switch_record(3, 3, 4, 1))])},
                          FORMATS)
    assert ev.time.tolist() == [51, 101] and ev.cpu.tolist() == [1, 0]


def test_corrupt_page_names_the_offset():
    bad = bytearray(page(0, [(1, switch_record(1, 1, 2, 1))]))
    bad[8:16] = struct.pack("<q", 5000)  # commit larger than the page
    with pytest.raises(UserError, match="byte 8"):
        read_cpu_buffers({0: bytes(bad)}, FORMATS)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=4096 * 2))
def test_random_pages_give_events_or_one_clear_error(data):
    data = data[: len(data) - len(data) % 4096]
    try:
        ev = read_cpu_buffers({0: data}, FORMATS)
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    assert np.all(np.diff(ev.time) >= 0) or len(ev) < 2


@st.composite
def cpu_pages(draw):
    """1-3 CPUs, each 1-4 pages of switches and forks (names from a few), times that may tie
    across CPUs; pages of one CPU need not be in time order."""
    out = {}
    for cpu in range(draw(st.integers(1, 3))):
        pages = []
        for _ in range(draw(st.integers(1, 4))):
            recs = []
            for _ in range(draw(st.integers(0, 12))):
                if draw(st.booleans()):
                    recs.append((draw(st.integers(0, 3)), fork_record(draw(st.integers(1, 9)), draw(st.integers(1, 9)))))
                else:
                    name = draw(st.sampled_from([b"a", b"main", b"w"]))
                    recs.append((draw(st.integers(0, 3)), switch_record(1, 1, 2, 1, name, b"b")))
            pages.append(page(draw(st.integers(0, 60)), recs))
        out[cpu] = b"".join(pages)
    return out


@settings(max_examples=150, deadline=None)
@given(cpu_pages(), st.integers(1, 30), st.integers(1, 3))
def test_windows_of_page_files_are_the_whole_read(tmp_path_factory, pages, max_rows, chunk_pages):
    """`FtraceWindows` over each CPU's file of pages, walked `chunk_pages` at a time: windows in time
    order, one time's events in one window, concatenated the whole read (`read_cpu_buffers`)."""
    from scalestack.ingest import ftrace_raw
    from scalestack.trace.events import concat_events

    d = tmp_path_factory.mktemp("pages")
    files = {}
    for cpu, data in pages.items():
        (d / f"cpu{cpu}").write_bytes(data)
        files[cpu] = str(d / f"cpu{cpu}")
    whole = read_cpu_buffers(pages, FORMATS)
    saved, ftrace_raw.CHUNK_PAGES = ftrace_raw.CHUNK_PAGES, chunk_pages
    try:
        windows = ftrace_raw.FtraceWindows(files, FORMATS, max_rows)
        parts = list(windows)
    finally:
        ftrace_raw.CHUNK_PAGES = saved
    assert windows.events == len(whole) and windows.stats["unknown_events"] == whole.stats["unknown_events"]
    for a, b in zip(parts, parts[1:], strict=False):
        assert a.time[-1] < b.time[0] and a.stats["window_ns"][1] <= b.stats["window_ns"][0]
    cat = concat_events(parts, whole.stats) if parts else whole
    assert cat.equals(whole)
