from hypothesis import given
from hypothesis import strategies as st

from scalestack.analysis.classify import classify, scalability_class
from scalestack.analysis.speedup import stack_from_times


def test_thresholds_at_16_threads():
    assert scalability_class(10.0, 16) == "good"
    assert scalability_class(9.99, 16) == "moderate"
    assert scalability_class(5.0, 16) == "moderate"
    assert scalability_class(4.99, 16) == "poor"


def test_largest_delimiters_first():
    s = stack_from_times(4, 1.2, 0.6, sync=0.3, imb=0.15, cont=0.06)
    cls, top = classify(s)
    assert cls == "moderate" and top == ["other", "sync", "imb"]


@given(st.floats(0, 64), st.integers(1, 64))
def test_class_is_monotone_in_speedup(s, n):
    order = {"poor": 0, "moderate": 1, "good": 2}
    assert order[scalability_class(s, n)] <= order[scalability_class(s + 1, n)]
