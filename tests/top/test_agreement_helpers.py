"""The agreement harness's own arithmetic: time a thread ran beside other threads' rebuilt spans."""

import numpy as np

from scalestack.trace import SwitchSpanTable
from tests.top.agreement import beside_rebuilt_ns


def _table(rows):
    tid, a, b, rep = (np.array(c) for c in zip(*rows, strict=True))
    return SwitchSpanTable(tid=tid.astype(np.int32), start_ns=a.astype(np.int64), end_ns=b.astype(np.int64),
                           repaired=rep.astype(bool))


def test_beside_rebuilt_counts_overlap_with_others_rebuilt_spans_only():
    spans = _table([(1, 0, 100, False), (1, 200, 300, False),
                    (2, 50, 110, True), (2, 110, 250, True),  # adjacent rebuilt spans: union [50, 250)
                    (3, 0, 400, True)])  # a rebuilt span of thread 3 covers everything
    got = beside_rebuilt_ns(spans)
    assert got[1] == 100 + 100  # beside 3 throughout its 200 ns (2's spans add nothing new)
    assert got[2] == 200  # beside 3 only: [50, 250)
    assert got[3] == 200  # beside 2's union [50, 250); 1's spans are not rebuilt
