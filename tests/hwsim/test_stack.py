"""Synchronization in the compiled model (hand-computed timelines) and hardware speedup stacks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestack.errors import UserError
from scalestack.hwsim import HwConfig, from_arrays, read_text, write_text
from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import simulate
from scalestack.hwsim.stack import classify_stacks, render_tree, speedup_stack, stack_from_counters
from scalestack.hwsim.traces import parallel_kernel, without_sync

A, R, B = E.S_ACQUIRE, E.S_RELEASE, E.S_BARRIER


def sync_trace(t0, t1):
    return from_arrays([(np.array([g for g, _, _ in t]), np.array([a for _, a, _ in t]),
                         np.array([c for _, _, c in t], np.uint8)) for t in (t0, t1)], separate=False)


def test_lock_contention_spins():
    # t0 acquires at 1 cycle (gap 4 / W 4), releases at 1 + 400/4 = 101; t1 tries at 2, spins 99
    # cycles, gets the lock at 101 and releases it at 102
    tr = sync_trace([(4, 7, A), (400, 7, R)], [(8, 7, A), (4, 7, R)])
    c = simulate(tr, HwConfig(spin_detect=50))
    assert c[:, E.C_CYC] == pytest.approx([101, 102])
    assert c[1, E.C_SPIN] == pytest.approx(99)
    assert c[1, E.C_SPIND] == pytest.approx(99)
    assert c[1, E.C_YIELD] == 0


def test_short_spin_not_detected_and_long_wait_yields():
    tr = sync_trace([(4, 7, A), (400, 7, R)], [(8, 7, A), (4, 7, R)])
    c = simulate(tr, HwConfig(spin_detect=100))
    assert c[1, E.C_SPIN] == pytest.approx(99) and c[1, E.C_SPIND] == 0
    # spin 20 cycles, then yield: 79 more cycles of waiting + 30 to wake up -> lock at 131
    c = simulate(tr, HwConfig(spin_limit=20, wake_cycles=30, spin_detect=10))
    assert c[1, E.C_SPIN] == pytest.approx(20)
    assert c[1, E.C_YIELD] == pytest.approx(109)
    assert c[1, E.C_CYC] == pytest.approx(132)


def test_barrier_waits_for_the_last_thread():
    tr = sync_trace([(400, 3, B), (4, 0, E.S_LOAD)], [(4, 3, B), (4, 0, E.S_LOAD)])
    c = simulate(tr, HwConfig(spin_detect=0, prefetch=False))
    assert c[1, E.C_SPIN] == pytest.approx(99)
    assert c[0, E.C_SPIN] == 0


def test_deadlock_is_refused():
    tr = sync_trace([(4, 1, A)], [(4, 1, A)])
    with pytest.raises(UserError, match="deadlock"):
        simulate(tr)


def test_text_format_sync_roundtrip(tmp_path):
    tr = parallel_kernel("random", 2, 300, 1 << 16, locks=1, lock_every=50, barriers=2)
    write_text(tr, tmp_path / "k.txt")
    back = read_text(tmp_path / "k.txt")
    assert np.array_equal(back.stores, tr.stores) and np.array_equal(back.addrs, tr.addrs)
    (tmp_path / "bad.txt").write_text("0 4 L 10\n1 3 X 5\n")
    with pytest.raises(UserError, match="bad.txt:2"):
        read_text(tmp_path / "bad.txt")


def test_sequential_version_keeps_instructions():
    tr = parallel_kernel("stream", 3, 500, 1 << 16, locks=2, lock_every=100, barriers=1)
    seq = without_sync(tr)
    assert seq.threads == 1 and not np.any(seq.stores >= A)
    assert seq.gaps.sum() == tr.gaps.sum() - tr.gaps[-1] * (tr.stores[-1] >= A)


def test_independent_compute_scales_perfectly():
    # each thread re-reads its own line (own DRAM bank): L1 hits after one cold miss -> S = N
    n = 4
    tr = from_arrays([(np.full(2000, 8), np.full(2000, 4096 * t), np.zeros(2000, np.uint8)) for t in range(n)],
                     separate=True)
    s = speedup_stack(tr)
    assert s.speedup == pytest.approx(n, rel=0.01)
    assert s.estimated == pytest.approx(n, rel=0.01)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 6), kind=st.sampled_from(["stream", "random", "chase"]), locks=st.integers(0, 2),
       barriers=st.integers(0, 3), imb=st.floats(0, 1))
def test_stack_height_is_n(n, kind, locks, barriers, imb):
    tr = parallel_kernel(kind, n, 400, 1 << 18, locks=locks, lock_every=60, barriers=barriers, imbalance=imb)
    s = speedup_stack(tr)
    assert s.total() == pytest.approx(n)
    assert s.estimated == pytest.approx(s.base + s.positive)
    assert s.spinning >= 0 and s.yielding >= 0 and s.imbalance >= 0


def test_classification_tree():
    def stack(name, n, tp, spin, yld):
        c = np.zeros((n, E.NC))
        c[:, E.C_CYC] = tp
        c[:, E.C_SPIND] = spin
        c[:, E.C_YIELD] = yld
        return stack_from_counters(c, name, t_single=None)

    good = stack("g", 16, 100.0, 0, 0)  # S^ = 16: good, no delimiter
    spin = stack("s", 16, 100.0, 40, 10)  # 16 - 6.4 - 1.6 = 8: moderate, spinning > yielding
    poor = stack("p", 16, 100.0, 0, 80)  # 16 - 12.8 = 3.2: poor, yielding
    tree = classify_stacks([good, spin, poor])
    assert tree["good"]["_leaves"] == [("g", 16.0)]
    assert tree["moderate"]["spinning"]["yielding"]["_leaves"] == [("s", 8.0)]
    assert tree["poor"]["yielding"]["_leaves"] == [("p", 3.2)]
    assert "spinning" in render_tree(tree)


def test_cli_stack_and_run_config(tmp_path):
    import json

    from click.testing import CliRunner

    from scalestack.cli import cli

    r = CliRunner().invoke(cli, ["hwsim", "stack", "--kernel", "random:256K:600", "--threads", "2,4", "--tree",
                                 "--json", "--report", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output[r.output.index("{"):])
    assert [s["n"] for s in data["stacks"]] == [2, 4]
    assert data["tree"] and (tmp_path / "rep" / "report.html").exists()
    tr = parallel_kernel("stream", 2, 200, 1 << 14, barriers=1)
    write_text(tr, tmp_path / "k.txt")
    (tmp_path / "m.yaml").write_text("llc_bytes: 1048576\ntraces: [k.txt]\n")
    r = CliRunner().invoke(cli, ["hwsim", "run", str(tmp_path / "m.yaml"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["config"]["llc_bytes"] == 1 << 20


def test_mix_refuses_synchronizing_programs():
    from scalestack.hwsim import mix

    with pytest.raises(UserError, match="cannot be mixed"):
        mix([parallel_kernel("stream", 2, 100, 1 << 14, barriers=1), parallel_kernel("stream", 1, 100, 1 << 14)])
