"""`scalestack scale --pirate`: the Eklov stack (isolation + cache pirate) measured beside the
thread-count sweep, saved with it, and shown in the same report as the trace-based speedup stacks."""

import json
import os

import pytest
from click.testing import CliRunner

from scalestack.commands.scale import command
from scalestack.eklov.pirate import llc_info
from scalestack.report.eklov_section import load
from tests.conftest import requires_recording


@requires_recording
def test_scale_with_pirate_puts_both_stacks_in_one_report(c_programs, tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("isolation with a pirate needs 2 cores")
    out, rep = tmp_path / "sweep", tmp_path / "rep"
    r = CliRunner().invoke(command, ["--threads", "1,2", "--pirate", "--pirate-repeat", "1", "--pirate-cache-size",
                                     "measured", "-o", str(out), "--report", str(rep), "--",
                                     str(c_programs["ub_tiny"]), "{threads}", "10"])
    assert r.exit_code == 0, r.output
    assert "S_pirate" in r.output and "N = 2: from the traces" in r.output
    saved = load(str(out / "pirate_stack.json"))
    assert [row["n"] for row in saved.rows()] == [1, 2]
    # C is what the pirate measured it keeps resident, not sysfs's (a VM's may be its host's)
    assert 1 << 20 <= saved.cache_bytes <= llc_info(0).size_bytes
    data = json.loads((rep / "report.json").read_text())
    assert list(data["sections"])[:2] == ["speedup", "eklov"]
    eklov = data["sections"]["eklov"]
    assert any(line.startswith("N = 2: from the traces") for line in eklov["summary"])
    for name in ("speedup-stacks", "eklov-stacks", "eklov-curves"):
        assert (rep / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (rep / "report.html").read_text()
    assert "Speedup stacks" in html and "cache pirating" in html
    # recomputed from the saved directory: the same rows, from the saved repeats
    again = CliRunner().invoke(command, ["--from", str(out), "--json"])
    assert again.exit_code == 0, again.output
    d = json.loads(again.output)
    assert [s["n"] for s in d["stacks"]] == [1, 2]
    for a, b in zip(d["pirate_stack"]["rows"], saved.rows(), strict=True):
        assert a == pytest.approx(b, nan_ok=True)


def test_saved_result_round_trips(tmp_path):
    from scalestack.eklov.driver import PirateStackResult
    from scalestack.eklov.stack import EklovStack
    from scalestack.report.eklov_section import save

    stack = EklovStack.from_runs([100.0, 104.0], {1: [100.0], 2: [60.0, 62.0]}, {1: [100.0], 2: [55.0]},
                                 {1: [101.0], 2: [70.0, 72.0]}, discarded={2: 1})
    res = PirateStackResult(stack=stack, command=("prog", "{threads}"), cache_bytes=2**25, llc_source="sysfs",
                            pirate=True, profile="all", thread0_ns={2: (58.0,)}, runs=({"n": 2, "kind": "real"},),
                            warnings=("a caveat",))
    save(res, str(tmp_path / "p.json"))
    back = load(str(tmp_path / "p.json"))
    assert back == res
    inst = EklovStack.from_runs([10.0], {1: [10.0], 2: [12.0]}, None, {1: [10.0], 2: [13.0]}, mode="instances")
    save(inst, str(tmp_path / "i.json"))
    assert load(str(tmp_path / "i.json")) == inst


@pytest.mark.parametrize("content, says", [
    (None, "no such file"),
    ("{not json", "not a readable JSON file"),
    ('{"rows": []}', "not a pirate-stack result"),
    ('{"stack": {"t1_ns": []}}', "missing or malformed"),
])
def test_bad_pirate_from_is_one_line(tmp_path, content, says):
    p = tmp_path / "x.json"
    if content is not None:
        p.write_text(content)
    r = CliRunner().invoke(command, ["--pirate-from", str(p), "--from", str(tmp_path)])
    assert r.exit_code != 0 and says in str(r.exception), r.exception


def test_pirate_cache_size_needs_pirate(tmp_path):
    r = CliRunner().invoke(command, ["--threads", "1,2", "--pirate-cache-size", "8M", "-o", str(tmp_path / "s"),
                                     "--", "true", "{threads}"])
    assert r.exit_code != 0 and "--pirate-cache-size applies only with --pirate" in str(r.exception)
    assert not (tmp_path / "s").exists()


def test_pirate_needs_a_count_above_one(tmp_path):
    r = CliRunner().invoke(command, ["--threads", "1", "--pirate", "-o", str(tmp_path / "s"), "--", "true",
                                     "{threads}"])
    assert r.exit_code != 0 and "--pirate needs a thread count between 2" in str(r.exception)
    assert not (tmp_path / "s").exists()  # refused before anything was recorded
