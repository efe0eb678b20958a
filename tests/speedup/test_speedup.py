import math

from hypothesis import given
from hypothesis import strategies as st

from scalestack.analysis.speedup import stack_from_times


def test_paper_fig2_worked_example():
    # T_s = 1.2, N = 4, T_p = 0.6 -> S = 2 (spec §1 worked example)
    s = stack_from_times(4, 1.2, 0.6, sync=0.3, imb=0.15)
    assert math.isclose(s.speedup, 2.0)
    assert math.isclose(s.sync, 0.5) and math.isclose(s.imb, 0.25)
    assert math.isclose(s.other, 1.25)
    assert math.isclose(s.total(), 4.0)


pos = st.floats(0.01, 100.0)
nonneg = st.floats(0.0, 100.0)


@given(st.integers(1, 64), pos, pos, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg, nonneg)
def test_components_add_up_to_n(n, ts, tp, g1, g2, s1, s2, sy, im, co):
    s = stack_from_times(n, ts, tp, gc_st=g1, gc_mt=g2, seq_st=s1, seq_mt=s2,
                         sync=sy, imb=im, cont=co)
    assert math.isclose(s.total(), n, rel_tol=1e-9, abs_tol=1e-6)
