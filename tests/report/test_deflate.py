"""The gzip stream compressed on several cores decodes to its input, however it is cut."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.report import deflate
from scalestack.report.deflate import ParallelGzip


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(0, 2 * deflate.WINDOW + 7), max_size=8), threads=st.integers(1, 3),
       level=st.sampled_from([1, 4, 6]), seed=st.integers(0, 2**31),
       block=st.sampled_from([1000, deflate.WINDOW - 1, deflate.WINDOW + 5]))
def test_any_cutting_decodes_to_the_input(sizes, threads, level, seed, block):
    """Pieces of any size (empty, within a block, across several), compressible or not, in blocks
    shorter and longer than deflate's window."""
    rng = np.random.default_rng(seed)
    pieces = [rng.integers(0, 4, n, dtype=np.uint8) if k % 2 else rng.integers(0, 256, n, dtype=np.uint8)
              for k, n in enumerate(sizes)]
    z = ParallelGzip(level, threads, block=block)
    for p in pieces:
        z.write(p)
    out = z.finish()
    data = b"".join(p.tobytes() for p in pieces)
    assert gzip.decompress(out) == data
    d = zlib.decompressobj(31)  # one gzip member, nothing after it
    assert d.decompress(out) == data and d.eof and d.unused_data == b""


def test_a_big_array_keeps_nearly_a_single_streams_ratio():
    """Blocks primed with the 32 KiB before them: within 2% of one zlib stream at the same level."""
    rng = np.random.default_rng(1)
    walk = np.cumsum(rng.integers(-3, 4, 3 << 20)).astype(np.int32)  # 12 MB, like the page's times
    z = ParallelGzip(6, 2)
    z.write(walk)
    out = z.finish()
    assert gzip.decompress(out) == walk.tobytes()
    assert len(out) <= 1.02 * len(zlib.compress(walk.tobytes(), 6))

