"""Trace format, errors naming the line, and the lackey converter on real programs."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from scalestack.errors import TraceFormatError
from scalestack.hwsim import (
    HwConfig,
    account,
    convert_lackey,
    from_arrays,
    generate,
    mix,
    read_text,
    write_text,
)
from scalestack.hwsim.traces import trace_program


def test_round_trip(tmp_path):
    tr = from_arrays([generate("random", 50, 1 << 16, seed=1), generate("stream", 30, 1 << 12)], separate=False)
    write_text(tr, tmp_path / "t.txt")
    back = read_text(tmp_path / "t.txt")
    assert back.threads == 2
    np.testing.assert_array_equal(back.addrs, tr.addrs)
    np.testing.assert_array_equal(back.gaps, tr.gaps)
    np.testing.assert_array_equal(back.stores, tr.stores)


def test_malformed_line_named(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("0 1 L 40\n0 2 X 80\n")
    with pytest.raises(TraceFormatError, match=r"bad.txt:2: malformed"):
        read_text(p)


def test_truncated_line_named(tmp_path):
    p = tmp_path / "trunc.txt"
    p.write_text("0 1 L 40\n0 2 L 8")
    with pytest.raises(TraceFormatError, match=r"trunc.txt:2: truncated"):
        read_text(p)


def test_lackey_lines(tmp_path):
    lines = ["==1== Lackey\n", "I  04001000,3\n", "I  04001003,2\n", " L 1ffefff000,8\n", " M 0421a000,4\n",
             "I  04001005,1\n", " S 0421a040,8\n"]
    n = convert_lackey(lines, tmp_path / "o.txt")
    assert n == 4
    tr = read_text(tmp_path / "o.txt")
    assert tr.gaps.tolist() == [2, 1, 1, 1]
    assert tr.stores.tolist() == [0, 0, 1, 1]
    assert tr.addrs[0] == 0x1FFEFFF000


def test_lackey_garbage_named(tmp_path):
    with pytest.raises(TraceFormatError, match=":2: malformed lackey"):
        convert_lackey(["I  0400,1\n", " L zz,8\n"], tmp_path / "o.txt")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_real_programs_traced_and_mixed(tmp_path):
    """gzip and sort traced by valgrind lackey, then run as a 2-program mix."""
    data = tmp_path / "in.txt"
    data.write_text("\n".join(str((i * 7919) % 1000) for i in range(3000)))
    progs = {"gzip": ["gzip", "-c", str(data)], "sort": ["sort", str(data)]}
    traces = []
    for name, argv in progs.items():
        if shutil.which(argv[0]) is None:
            pytest.skip(f"{argv[0]} missing")
        n = trace_program(argv, tmp_path / f"{name}.txt", max_accesses=40_000)
        assert n > 1000
        traces.append(read_text(tmp_path / f"{name}.txt"))
    r = account(mix(traces), HwConfig())
    assert len(r.threads) == 2
    for t in r.threads:
        assert t.instructions > 1000 and t.isolated_measured > 0 and abs(t.error) < 1.0


def test_cli_bad_trace_one_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("0 1 L 40\nnonsense\n")
    res = subprocess.run([sys.executable, "-m", "scalestack.cli", "hwsim", "run", str(p)], capture_output=True, text=True)
    assert res.returncode != 0
    assert "bad.txt:2" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_cli_impossible_geometry(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text("llc_bytes: 3000000\n")
    res = subprocess.run([sys.executable, "-m", "scalestack.cli", "hwsim", "run", "--config", str(cfg), "--gen",
                          "random:1M:1000"], capture_output=True, text=True)
    assert res.returncode != 0
    assert "impossible geometry" in res.stderr


def test_cli_run_json(tmp_path):
    import json

    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "scalestack.cli", "hwsim", "run", "--gen", "random:1M:3000",
                          "--gen", "stream:4M:3000", "-o", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    d = json.loads(out.read_text())
    assert len(d["threads"]) == 2


def test_cli_mix_json():
    import json

    res = subprocess.run([sys.executable, "-m", "scalestack.cli", "hwsim", "mix", "--cores", "1", "--slice", "20000",
                          "--gen", "random:1M:3000", "--gen", "stream:64K:3000", "--json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert [x["policy"] for x in d] == ["round-robin", "progress-aware"]
    assert all(0 <= x["fairness"] <= 1 for x in d)
