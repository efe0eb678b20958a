import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scalestack.analysis.power import PowerModel, dvfs_states, voltage


def test_spec_voltage_table():
    # dep-burst.md §3.1: (1, 0.737) ... (4, 1.07)
    for f, v in [(1, 0.737), (1.5, 0.791), (2, 0.845), (2.5, 0.899), (3, 0.958), (3.5, 1.012), (4, 1.07)]:
        assert abs(voltage(f) - v) <= 0.0061  # the linear fit vs the table


def test_states():
    assert len(dvfs_states()) == 25 and dvfs_states()[0] == 1.0 and dvfs_states()[-1] == 4.0
    assert len(dvfs_states(0.5)) == 7


def test_energy_reference_point():
    pm = PowerModel(dynamic_w=4.0, static_w=1.5)
    # one core busy 1 s at the reference frequency, one idle core at the same supply
    e = pm.energy_j({4.0: 1e9}, 1e9, cores=2, idle_ghz=4.0)
    assert abs(e - (4.0 + 2 * 1.5)) < 1e-9


@given(st.floats(1.0, 3.99))
def test_lower_frequency_saves_power(f):
    pm = PowerModel()
    assert pm.dynamic_power(f) < pm.dynamic_power(4.0)
    assert pm.static_power(f) < pm.static_power(4.0)
    # the same work (cycles) at lower f takes longer but costs less dynamic energy (∝ V²)
    t_hi, t_lo = 1.0 / 4.0, 1.0 / f
    assert pm.dynamic_power(f) * t_lo < pm.dynamic_power(4.0) * t_hi
    assert np.isclose(pm.dynamic_power(f) * t_lo / (pm.dynamic_power(4.0) * t_hi), (voltage(f) / voltage(4.0)) ** 2)
