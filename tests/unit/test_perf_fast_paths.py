"""The perf.data reader's fast paths against the plain statements they replace: the sample-id
table, samples read at a fixed layout, and comm interning by word loads."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.ingest.perf_abi import (
    S_ADDR,
    S_CPU,
    S_ID,
    S_IDENTIFIER,
    S_IP,
    S_PERIOD,
    S_RAW,
    S_READ,
    S_STREAM_ID,
    S_TID,
    S_TIME,
)
from scalestack.ingest.perf_data import _sample, event_of, id_table, sample_layout
from scalestack.ingest.tracepoint import Strings, intern_at, strings_full


def test_event_of_worked_example():
    keys, events = id_table(np.array([5, 9, (1 << 63) + 7], np.uint64), np.array([0, 2, 1], np.int64))
    assert [int(event_of(np.uint64(s), keys, events)) for s in (5, 9, (1 << 63) + 7, 6, 0)] == [0, 2, 1, -1, -1]


@given(st.dictionaries(st.integers(0, (1 << 64) - 1), st.integers(0, 50), max_size=80),
       st.lists(st.integers(0, (1 << 64) - 1), max_size=20))
def test_event_of_is_a_dict_lookup(events_by_id, others):
    ids = np.array(sorted(events_by_id), np.uint64)
    keys, events = id_table(ids, np.array([events_by_id[i] for i in sorted(events_by_id)], np.int64))
    for sid in [*events_by_id, *others]:
        assert event_of(np.uint64(sid), keys, events) == events_by_id.get(sid, -1)


_FIELDS = [S_IDENTIFIER, S_IP, S_TID, S_TIME, S_ADDR, S_ID, S_STREAM_ID, S_CPU, S_PERIOD, S_READ, S_RAW]


@settings(deadline=None)  # the first example compiles _sample
@given(st.sets(st.sampled_from(_FIELDS)), st.sets(st.sampled_from([1, 2, 4, 16])), st.binary(min_size=200, max_size=200),
       st.integers(0, 40))
def test_fixed_layout_reads_what_sample_reads(bits, read_bits, noise, raw_len):
    sample_type, read_format = sum(bits), sum(read_bits)
    tid_at, time_at, cpu_at, raw_at, least = sample_layout(sample_type, read_format)
    size = least + raw_len if raw_at >= 0 else least
    rec = bytearray(noise[:size].ljust(size, b"\0"))
    rec[0:8] = struct.pack("<IHH", 9, 0, size)
    if raw_at >= 0:
        rec[raw_at:raw_at + 4] = struct.pack("<I", raw_len)
    buf = np.frombuffer(bytes(rec), np.uint8)
    empty = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    types, formats = np.array([sample_type], np.int64), np.array([read_format], np.int64)
    code, a, pid, tid, time, cpu, r_off, r_len = _sample(buf, 0, size, True, *empty, types, formats)
    assert (code, a) == (0, 0)
    assert (pid, tid) == (struct.unpack_from("<ii", rec, tid_at) if tid_at >= 0 else (-1, -1))
    assert time == (struct.unpack_from("<q", rec, time_at)[0] if time_at >= 0 else 0)
    assert cpu == (struct.unpack_from("<I", rec, cpu_at)[0] if cpu_at >= 0 else -1)
    assert (r_off, r_len) == ((raw_at + 4, raw_len) if raw_at >= 0 else (-1, 0))
    # the layout's least size is _sample's: one byte fewer, or a raw length past the end, is short
    assert _sample(buf, 0, least - 1, True, *empty, types, formats)[0] == 4
    if raw_at >= 0:
        rec[raw_at:raw_at + 4] = struct.pack("<I", raw_len + 1)
        assert _sample(np.frombuffer(bytes(rec), np.uint8), 0, size, True, *empty, types, formats)[0] == 4


@settings(deadline=None)  # the first example compiles the interning
@given(st.lists(st.tuples(st.sampled_from([b"prodcons", b"swapper/0", b"kworker/u4:1", b"", b"x" * 15, b"y" * 16,
                                           b"z" * 40]),
                          st.binary(max_size=24), st.integers(0, 48)), min_size=1, max_size=30))
def test_intern_is_the_text_before_the_nul_within_n_bytes(items):
    table = Strings(cap=4)
    seen: dict[bytes, int] = {}
    for text, tail, n in items:
        raw = text + b"\0" + tail
        buf = np.frombuffer(raw, np.uint8)  # the string ends the buffer: word loads must not run past it
        n = min(n, len(raw))
        if strings_full(table.h_id, table.arena, table.used):
            table.grow()
        got = int(intern_at(buf, 0, n, *table.arrays()))
        want = raw[:n].split(b"\0", 1)[0]
        assert got == seen.setdefault(want, len(seen))
    assert table.decoded() == [s.decode() for s in seen]
