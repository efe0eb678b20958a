"""The resolved overhead's statistics (benchmarks/speed/overhead_aggregate.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "speed"))

from overhead_aggregate import median_ci  # noqa: E402


def test_median_ci_of_a_constant_is_the_constant():
    assert median_ci([0.4] * 9) == pytest.approx((0.4, 0.4, 0.4))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=3, max_size=40))
def test_median_ci_brackets_the_median_within_the_data(x):
    m, lo, hi = median_ci(x)
    assert m == pytest.approx(float(np.median(x)))
    assert min(x) - 1e-9 <= lo <= m + 1e-9 and m - 1e-9 <= hi <= max(x) + 1e-9


def test_median_ci_narrows_with_more_pairs():
    rng = np.random.default_rng(0)
    few = median_ci(list(rng.normal(1.0, 0.5, 7)))
    many = median_ci(list(rng.normal(1.0, 0.5, 200)))
    assert many[2] - many[1] < few[2] - few[1]
    assert many[1] < 1.0 < many[2]
