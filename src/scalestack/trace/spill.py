"""Rows kept on disk by key while a recording is read, read back a range of keys at a time.

The streaming builder's walk emits each window's intervals for every thread; the passes after it
work thread by thread. Spilling the rows by thread (the key: the thread's slot) lets those passes
hold a few threads' rows at a time instead of all of them (36 bytes a row: 1.35 GB at 10^8 events).
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import shutil
import tempfile
import threading

import numpy as np


class ColumnFiles:
    """One file per fixed-width column, in a temporary directory of its own next to what is being
    made (`directory`), appended to and read back at any row; `close` (or the `with` block, on
    success or error) removes the directory, even where a full device fails the last flush.

    Where `behind` (a class's choice: chunks of a window's size), the appends are written by a thread
    of the spill's own, one chunk behind the caller: once a GB or two is dirty the page cache takes
    writes at the disk's pace (~0.4 GB/s on a VM), and the caller meanwhile works on its next window.
    An error writing (a full device) is then raised by the next append or read. Memory: two chunks
    more (one queued, one being written)."""

    behind = False

    def __init__(self, names, directory: str | os.PathLike | None = None):
        self._dir = tempfile.mkdtemp(prefix=".scalestack-spill-", dir=directory)
        self._files: dict = {}
        try:
            for name in names:
                self._files[name] = open(os.path.join(self._dir, name), "w+b")  # closed by close()
        except BaseException:
            self.close()
            raise
        self._rows = 0
        self._writes: queue.Queue = queue.Queue(maxsize=1)  # (a chunk in it, one being written: no more)
        self._writer: threading.Thread | None = None
        self._failed: BaseException | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return self._rows

    def close(self) -> None:
        """Remove the temporary directory; nothing is held after."""
        if self._writer is not None:
            self._failed = self._failed or ValueError("the spill is closed")  # (chunks still queued are not written)
            self._writes.put(None)
            self._writer.join()
            self._writer = None
        for fh in self._files.values():
            with contextlib.suppress(OSError):  # a full device fails the flush: the files go anyway
                fh.close()
        self._files = {}
        shutil.rmtree(self._dir, ignore_errors=True)

    def _append(self, column, n: int, order: np.ndarray | None = None) -> None:
        """Append n rows to every file: `column(name)` (its rows in `order`, if given); written
        behind, a copy (the caller may change its arrays once this returns)."""
        self._raise_failed()
        chunk = [(fh, column(name) if order is None else column(name)[order]) for name, fh in self._files.items()]
        if not self.behind:
            _write_chunk(chunk)
        else:
            if order is None:
                chunk = [(fh, np.array(col, copy=True)) for fh, col in chunk]
            if self._writer is None:
                self._writer = threading.Thread(target=self._write, name="scalestack-spill", daemon=True)
                self._writer.start()
            self._writes.put(chunk)
        self._rows += n

    def _write(self) -> None:
        while (chunk := self._writes.get()) is not None:
            if self._failed is None:
                try:
                    _write_chunk(chunk)
                except BaseException as exc:  # raised in the caller's thread by its next append or read
                    self._failed = exc
            del chunk
            self._writes.task_done()
        self._writes.task_done()

    def _raise_failed(self) -> None:
        if self._failed is not None:
            raise self._failed

    def _flushed(self) -> None:
        """Flush what was written, to be read back (ValueError once closed)."""
        if not self._files:
            raise ValueError("the spill is closed")
        self._writes.join()
        self._raise_failed()
        for fh in self._files.values():
            fh.flush()


def _write_chunk(chunk) -> None:
    for fh, col in chunk:
        fh.write(np.ascontiguousarray(col).view(np.uint8))


class ColumnSpill(ColumnFiles):
    """Fixed-width columns appended chunk by chunk, each chunk's rows stably ordered by the key
    column and written to one file per column (the key's own is not written: the index knows each
    run's key); `read(lo, hi)` gives the rows of keys in [lo, hi) in key order, a key's rows in
    the order they were added. Memory: O(chunks x keys) for the index, never the rows."""

    behind = True

    def __init__(self, dtypes: dict[str, np.dtype], key: str, n_keys: int, directory: str | os.PathLike | None = None):
        if key not in dtypes or len(dtypes) < 2:
            raise ValueError(f"the key column {key!r} is not one of {list(dtypes)}, or the only one")
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        self.key = key
        self.n_keys = int(n_keys)
        super().__init__([name for name in self.dtypes if name != key], directory)
        self._counts = np.zeros(self.n_keys, np.int64)
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # per chunk: file row of each key's first row, rows

    def counts(self) -> np.ndarray:
        """Rows of each key so far."""
        return self._counts.copy()

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Append a chunk: every column, of equal lengths, keys in [0, n_keys)."""
        if not self._files:
            raise ValueError("the spill is closed")
        keys = np.asarray(columns[self.key])
        n = len(keys)
        if n == 0:
            return
        if keys.min() < 0 or keys.max() >= self.n_keys:
            raise ValueError(f"a key outside [0, {self.n_keys})")
        per_key = np.bincount(keys, minlength=self.n_keys).astype(np.int64)
        ordered = bool(np.all(keys[1:] >= keys[:-1]))
        # (keys that fit 16 bits sort by radix: a third of the time of a 32-bit key's merge sort)
        order = None if ordered else np.argsort(keys.astype(np.int16) if self.n_keys <= 1 << 15 else keys, kind="stable")
        cols = {name: np.asarray(columns[name], self.dtypes[name]) for name in self._files}  # (not the key)
        for name, col in cols.items():
            if len(col) != n:
                raise ValueError(f"column {name!r} has {len(col)} rows, the key {n}")
        first = self._rows + np.r_[0, np.cumsum(per_key)[:-1]]
        self._append(cols.__getitem__, n, order)
        self._runs.append((first, per_key))
        self._counts += per_key

    def read(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """The rows of keys in [lo, hi), in key order; a key's rows in the order added."""
        self._flushed()
        total = int(self._counts[lo:hi].sum())
        out = {name: np.empty(total, dt) for name, dt in self.dtypes.items()}
        at = 0
        for k in range(lo, hi):  # a key's runs, chunk by chunk
            for first, rows in self._runs:
                m = int(rows[k])
                if m:
                    for name, fh in self._files.items():
                        pread_into(fh, out[name][at:at + m], int(first[k]))
                    out[self.key][at:at + m] = k
                    at += m
        return out

    def read_rows(self, key: int, lo: int, hi: int, names=None) -> dict[str, np.ndarray]:
        """Rows [lo, hi) of one key (in the order added), of the columns `names` (default: all):
        a part of a key too big to read whole."""
        self._flushed()
        names = list(self.dtypes) if names is None else list(names)
        lo, hi = max(int(lo), 0), min(int(hi), int(self._counts[key]))
        out = {name: np.empty(max(hi - lo, 0), self.dtypes[name]) for name in names}
        seen = at = 0  # the key's rows before this chunk's run; rows written
        for first, rows in self._runs:
            m = int(rows[key])
            a, b = max(lo, seen), min(hi, seen + m)
            if b > a:
                for name in names:
                    if name == self.key:
                        out[name][at:at + b - a] = key
                    else:
                        pread_into(self._files[name], out[name][at:at + b - a], int(first[key]) + a - seen)
                at += b - a
            seen += m
            if seen >= hi:
                break
        return out

    def batches(self, budget: int) -> list[tuple[int, int]]:
        """Consecutive key ranges [lo, hi) of at most `budget` rows each, but a key with more rows
        alone in its range; keys with no rows fall in a neighbour's range."""
        out, lo, acc = [], 0, 0
        for k, c in enumerate(self._counts.tolist()):
            if acc and acc + c > budget:
                out.append((lo, k))
                lo, acc = k, 0
            acc += c
        if acc or not out:
            out.append((lo, self.n_keys))
        else:
            out[-1] = (out[-1][0], self.n_keys)
        return out


def pread_into(fh, out: np.ndarray, row: int) -> None:
    """Rows [row, row + len(out)) of a column file, read into `out`."""
    view = memoryview(out.view(np.uint8))
    offset = row * out.itemsize
    while len(view):
        got = os.preadv(fh.fileno(), [view], offset)
        if got == 0:
            raise OSError(errno.EIO, f"spill file {fh.name} ends early")
        view, offset = view[got:], offset + got


class ColumnLog(ColumnFiles):
    """Fixed-width columns appended in order and read back in that order, `rows` at a time: the
    few events a later pass reads again (`trace.streaming`), without decoding the recording again."""

    behind = True

    def __init__(self, dtypes: dict[str, np.dtype], directory: str | os.PathLike | None = None):
        self.dtypes = {k: np.dtype(v) for k, v in dtypes.items()}
        super().__init__(self.dtypes, directory)

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Append rows: every column, of equal lengths."""
        if not self._files:
            raise ValueError("the log is closed")
        n = {len(columns[name]) for name in self._files}
        if len(n) != 1:
            raise ValueError(f"columns of different lengths: {sorted(n)}")
        self._append(lambda name: np.asarray(columns[name], self.dtypes[name]), n.pop())

    def chunks(self, rows: int):
        """The rows in the order added, `rows` at a time: a dict of columns each."""
        self._flushed()
        for lo in range(0, self._rows, rows):
            m = min(rows, self._rows - lo)
            out = {}
            for name, fh in self._files.items():
                out[name] = np.empty(m, self.dtypes[name])
                pread_into(fh, out[name], lo)
            yield out
