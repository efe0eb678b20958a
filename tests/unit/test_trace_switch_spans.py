"""A recording's Trace carries on-CPU spans at switch instants; criticality takes C_j from them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

import scalestack
from scalestack.analysis.criticality import criticality_from_spans
from scalestack.ingest.perf_data import read_perf_data
from scalestack.trace import State, SwitchSpanTable
from scalestack.trace.builder import build_trace
from scalestack.trace.switch_spans import switch_spans

DATA = Path(__file__).resolve().parents[1] / "data"


def _trace():
    events = read_perf_data(DATA / "barrier.perf.data")
    return events, build_trace(events, comm="bi")


def test_spans_made_saved_windowed_and_used(tmp_path):
    events, tr = _trace()
    sp = tr.switch_spans
    assert len(sp) > 0 and set(np.unique(sp.tid)) <= set(tr.threads.tid.tolist())
    assert np.all(sp.end_ns > sp.start_ns) and sp.start_ns.min() >= tr.start_ns and sp.end_ns.max() <= tr.end_ns
    # criticality: C_j from the spans (as an independent sweep over the same events), Run_j from RUNNING
    crit = scalestack.criticality(tr)
    ref = criticality_from_spans(tr, switch_spans(events, tr.threads.tid, tr.start_ns, tr.end_ns))
    np.testing.assert_allclose(crit.criticality_ns, ref.criticality_ns, rtol=1e-12)
    run = tr.time_in_states()[:, State.RUNNING]
    np.testing.assert_allclose(crit.running_ns, run)
    assert abs(crit.criticality_ns.sum() + crit.idle_ns - crit.span_ns) <= 1
    # without spans (simulated/imported traces) criticality uses RUNNING, as before
    plain = scalestack.criticality(dataclasses.replace(tr, switch_spans=SwitchSpanTable.empty()))
    assert abs(plain.criticality_ns.sum() + plain.idle_ns - plain.span_ns) <= 1
    # saved and loaded with the trace
    path = tmp_path / "t.trace"
    scalestack.save(tr, str(path))
    back = scalestack.load(str(path))
    assert back.switch_spans == tr.switch_spans and back.equals(tr)
    # a window keeps the spans inside it, clipped
    mid = (tr.start_ns + tr.end_ns) // 2
    w = tr.between(tr.start_ns, mid)
    assert len(w.switch_spans) and w.switch_spans.end_ns.max() <= mid
