"""The Eklov stack's arithmetic: the spec's worked example and the invariant N = sum of the stack."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalestack.eklov.stack import EklovStack, nosync_time, pirate_size


def test_403gcc_multi_instance_example():
    # spec §1: CPI 1.18 / 1.25 / 1.32 with 8 / 4 / 2 MB; aggregate IPC 0.85 / 1.60 / 3.03 for 1 / 2 / 4 copies.
    # Fixed-work runs: time is proportional to CPI, so a copy alone takes 1.18 and with a 4 MB share 1.25.
    per_copy_meas = {2: 2 / 1.60, 4: 4 / 3.03}  # time of one copy when N run together (1 / IPC_i)
    s = EklovStack.from_runs([1 / 0.85], {2: [1.25 / 1.18 / 0.85], 4: [1.32 / 1.18 / 0.85]}, None,
                             {n: [t] for n, t in per_copy_meas.items()}, mode="instances")
    assert s.s_pirate(2) == pytest.approx(2 * 1.18 / 1.25)
    assert s.s_pirate(4) == pytest.approx(4 * 1.18 / 1.32)
    assert s.s_meas(2) == pytest.approx(1.60 / 0.85)
    assert s.s_meas(4) == pytest.approx(3.03 / 0.85)
    assert s.cache(4) == pytest.approx(4 - 3.576, abs=1e-3)
    assert s.memory(4) == pytest.approx(3.576 - 3.565, abs=2e-3)
    assert s.sync(4) == 0.0


def test_threads_stack_and_spread():
    s = EklovStack.from_runs([100.0], {2: [60.0, 50.0, 55.0]}, {2: [62.0]}, {2: [80.0, 70.0, 75.0]})
    assert s.s_pirate(2) == pytest.approx(100 / 55)
    assert s.cache(2) == pytest.approx(2 - 100 / 55)
    assert s.memory(2) == pytest.approx(100 / 55 - 100 / 62)
    assert s.sync(2) == pytest.approx(100 / 62 - 100 / 75)
    lo, hi = s.component_range("cache", 2)
    assert lo == pytest.approx(2 - 100 / 50) and hi == pytest.approx(2 - 100 / 60)
    lo, hi = s.component_range("sync", 2)
    assert lo == pytest.approx(100 / 62 - 100 / 70) and hi == pytest.approx(100 / 62 - 100 / 80)
    assert s.to_frame()["n"].tolist() == [2]


def test_helpers_and_missing_inputs():
    assert pirate_size(8 << 20, 1) == 0 and pirate_size(8 << 20, 2) == 4 << 20 and pirate_size(8 << 20, 4) == 6 << 20
    assert nosync_time([10, 12, 9], [3, 1, 0]) == 11
    with pytest.raises(ValueError):
        EklovStack.from_runs([1.0], {2: [1.0]}, {}, {2: [1.0]})


times = st.lists(st.floats(1.0, 1e9), min_size=1, max_size=5)


@given(t1=times, p=times, q=times, m=times, n=st.integers(1, 64), instances=st.booleans())
def test_stack_sums_to_n(t1, p, q, m, n, instances):
    s = EklovStack.from_runs(t1, {n: p}, {n: q}, {n: m}, mode="instances" if instances else "threads")
    # exact up to the rounding of the largest term (curves reach 64e9 here, whose rounding exceeds 1e-6)
    scale = max(1.0, abs(s.s_pirate(n)), abs(s.s_nosync(n)), abs(s.s_meas(n)))
    assert s.cache(n) + s.memory(n) + s.sync(n) + s.s_meas(n) == pytest.approx(n, rel=1e-9, abs=1e-14 * scale + 1e-9)
    for comp in ("cache", "memory", "sync"):
        lo, hi = s.component_range(comp, n)
        assert lo <= getattr(s, comp)(n) + 1e-9 * max(1.0, abs(lo)) and getattr(s, comp)(n) <= hi + 1e-9 * max(1.0, abs(hi))


def test_baseline_warning_when_t1_moves():
    steady = EklovStack.from_runs([100e6, 110e6, 120e6], {2: [60e6]}, None, {2: [70e6]})
    assert steady.baseline_warning() is None  # 1.2x: within the 1.25x limit
    moved = EklovStack.from_runs([100e6, 250e6, 120e6], {2: [60e6]}, None, {2: [70e6]}, mode="instances")
    text = moved.baseline_warning()
    assert "100.0 to 250.0 ms over 3 repeats (2.50x)" in text and "one instance alone" in text
    assert EklovStack.from_runs([100e6], {2: [60e6]}, None, {2: [70e6]}).baseline_warning() is None


def test_report_shows_the_baseline_warning_of_a_multi_instance_stack():
    from scalestack.report.eklov_section import table_lines

    moved = EklovStack.from_runs([100e6, 250e6, 120e6], {2: [60e6, 61e6, 62e6]}, None, {2: [70e6] * 3},
                                 mode="instances")
    assert "warning: the baseline T(1) (one instance alone) took 100.0 to 250.0 ms" in "\n".join(table_lines(moved))


def test_cache_moved_beyond_the_measurements_jitter(monkeypatch):
    from scalestack.eklov import pirate

    monkeypatch.setattr(pirate, "effective_llc_bytes", lambda cpu=0: (now[0], {}))
    now = [12 << 20]
    assert pirate.cache_moved(11 << 20, cpu=0) is None  # 1 MiB: jitter
    assert pirate.cache_moved(10 << 20, cpu=0) is None  # 2 MiB: still within
    now = [19 << 20]
    assert "moved from 12 to 19 MiB during the runs" in pirate.cache_moved(12 << 20, cpu=0)
    now = [60 << 20]
    assert pirate.cache_moved(50 << 20, cpu=0) is None  # a fifth of 50 MiB is 10 MiB


def test_a_moved_cache_is_a_warning_of_the_result_and_survives_json(monkeypatch):
    from scalestack.commands import pirate_stack
    from scalestack.eklov import pirate
    from scalestack.report.eklov_section import table_lines

    monkeypatch.setattr(pirate, "cache_moved", lambda c0: f"the measured cache moved from {c0 >> 20} to 19 MiB")
    s = EklovStack.from_runs([100e6, 101e6], {2: [60e6, 61e6]}, None, {2: [70e6, 71e6]}, mode="instances")
    assert pirate_stack.cache_checked(s, "16M", 16 << 20) is s  # a size given, not measured: nothing to check
    checked = pirate_stack.cache_checked(s, "measured", 12 << 20)
    assert checked.warnings == ("the measured cache moved from 12 to 19 MiB",)
    assert "warning: the measured cache moved from 12 to 19 MiB" in "\n".join(table_lines(checked))
    assert EklovStack.from_dict(checked.to_dict()).warnings == checked.warnings
