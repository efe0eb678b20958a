"""The pieces the windowed readers share: rows by time and one string table from the threads'."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.ingest.tracepoint import Strings, intern_at, strings_full
from scalestack.ingest.windows import rank_by_time, shared_strings, thread_count
from scalestack.trace.parallel import on_threads


def test_rank_worked_example():
    assert rank_by_time(np.array([3, 1, 2, 1], np.int64)).tolist() == [3, 0, 2, 1]
    assert len(rank_by_time(np.array([1, 1, 2], np.int64))) == 0  # in order already: no ranks


@given(st.lists(st.integers(-5, 5), max_size=60))
def test_rank_places_each_event_where_a_stable_sort_does(times):
    t = np.array(times, np.int64)
    rank = rank_by_time(t.copy())
    if len(rank) == 0:
        assert np.all(t[1:] >= t[:-1])
        return
    placed = np.empty_like(t)
    placed[rank] = np.arange(len(t))
    assert placed.tolist() == np.argsort(t, kind="stable").tolist()


def _intern(table: Strings, text: bytes) -> int:
    buf = np.frombuffer(text + b"\0" * 17, np.uint8)
    return int(intern_at(buf, 0, len(text) + 1, *table.arrays()))


@settings(deadline=None)  # the first example compiles the interning
@given(st.lists(st.lists(st.sampled_from(["a", "bash", "x" * 16, "y" * 40, "prodcons", ""]), max_size=12),
                min_size=1, max_size=4))
def test_shared_strings_map_each_threads_ids_to_the_same_text(per_thread):
    n = len(per_thread)
    tables = [Strings(cap=4) for _ in range(n)]
    cols, texts = [], []
    for k, words in enumerate(per_thread):
        for w in words:
            if strings_full(tables[k].h_id, tables[k].arena, tables[k].used):
                tables[k].grow()
            cols.append(_intern(tables[k], w.encode()) * n + k)
            texts.append(w)
    col = np.array(cols + [-1], np.int32)
    shared = shared_strings(tables, col)
    assert [shared[c] for c in col[:-1]] == texts and col[-1] == -1
    assert len(shared) == len(set(texts))


def test_threads_and_their_errors():
    seen = []
    on_threads(3, seen.append)
    assert sorted(seen) == [0, 1, 2]
    assert thread_count(1, None) == 1 and thread_count(100, 3) == 3

    def fail(k):
        if k == 1:
            raise ValueError("window 1")

    try:
        on_threads(2, fail)
    except ValueError as exc:
        assert str(exc) == "window 1"
    else:
        raise AssertionError("the worker's error was lost")
