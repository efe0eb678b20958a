"""A gzip stream compressed on every core, as pigz makes one: the input cut in 1 MiB blocks, each
deflated on its own (primed with the 32 KiB before it, so the ratio is nearly a single stream's)
and ended on a byte boundary by a sync flush, the blocks' outputs joined in order behind one gzip
header and closed by an empty last block and the trailer. One gzip member: Python's gzip module
and a browser's DecompressionStream("gzip") read it as any other. zlib releases the GIL while it
compresses, so the blocks go to threads; at most two blocks a thread are held at once."""

from __future__ import annotations

import os
import struct
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

BLOCK = 1 << 20
WINDOW = 1 << 15  # deflate's window: the dictionary a block is primed with
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, mtime 0, OS unknown
_LAST = b"\x03\x00"  # an empty final fixed-Huffman block


class ParallelGzip:
    """write() bytes-like pieces in order, then finish() for the gzip bytes."""

    def __init__(self, level: int = 6, threads: int | None = None, block: int = BLOCK):
        self.level, self.block = level, max(int(block), 1)
        self.threads = max(1, threads or len(os.sched_getaffinity(0)))
        self.pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None
        self.out = [_HEADER]
        self.waiting: deque = deque()
        self.pending = bytearray()
        self.before = b""  # the last WINDOW bytes of the block before
        self.crc = 0
        self.size = 0

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        self.crc = zlib.crc32(view, self.crc)
        self.size += len(view)
        if self.pending:
            take = min(self.block - len(self.pending), len(view))
            self.pending += view[:take]
            view = view[take:]
            if len(self.pending) < self.block:
                return
            self._block(bytes(self.pending))
            self.pending = bytearray()
        while len(view) >= self.block:
            self._block(view[:self.block].tobytes())
            view = view[self.block:]
        self.pending += view

    def finish(self) -> bytes:
        if self.pending:
            self._block(bytes(self.pending))
            self.pending = bytearray()
        while self.waiting:
            self._collect()
        if self.pool is not None:
            self.pool.shutdown()
        self.out += [_LAST, struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF)]
        return b"".join(self.out)

    def _block(self, block: bytes) -> None:
        before, self.before = self.before, (self.before + block)[-WINDOW:] if len(block) < WINDOW else block[-WINDOW:]
        if self.pool is None:
            self.out.append(_deflate(block, before, self.level))
            return
        self.waiting.append(self.pool.submit(_deflate, block, before, self.level))
        while len(self.waiting) > 2 * self.threads:
            self._collect()

    def _collect(self) -> None:
        self.out.append(self.waiting.popleft().result())


def _deflate(block: bytes, before: bytes, level: int) -> bytes:
    """The block as raw deflate ending on a byte boundary, back-references reaching into `before`."""
    z = zlib.compressobj(level, zlib.DEFLATED, -15, zdict=before) if before else \
        zlib.compressobj(level, zlib.DEFLATED, -15)
    return z.compress(block) + z.flush(zlib.Z_SYNC_FLUSH)
