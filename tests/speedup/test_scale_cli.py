import json
import math

from click.testing import CliRunner

from scalestack.commands.scale import command
from tests.conftest import requires_recording


@requires_recording
def test_scale_records_a_sweep_and_recomputes_from_it(c_programs, tmp_path):
    out = tmp_path / "sweep"
    r = CliRunner().invoke(command, ["--threads", "1,2,4", "-o", str(out), "--json", "--",
                                     str(c_programs["balanced"]), "{threads}"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "sweep.json").read_text())
    assert [run["threads"] for run in manifest["runs"]] == [1, 2, 4]
    again = CliRunner().invoke(command, ["--from", str(out), "--json"])
    stacks = json.loads(again.output)
    assert [s["n"] for s in stacks] == [1, 2, 4]
    for s in stacks:
        total = s["speedup"] + sum(s[c] for c in ("gc", "seq", "sync", "imb", "cont", "other"))
        assert math.isclose(total, s["n"], rel_tol=1e-9)
    assert stacks[2]["cont"] > 0.2     # 4 busy threads on 2 cores queue for a CPU
    rep = tmp_path / "rep"
    again = CliRunner().invoke(command, ["--from", str(out), "--report", str(rep)])
    assert again.exit_code == 0, again.output
    data = json.loads((rep / "report.json").read_text())
    assert list(data["sections"])[0] == "speedup" and len(data["sections"]["speedup"]["stacks"]) == 3
    for name in ("speedup-stacks", "speedup-curve"):
        assert (rep / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (rep / f"{name}.svg").read_text()
    assert "Speedup stacks" in (rep / "report.html").read_text()


def test_scale_without_command_is_a_user_error():
    r = CliRunner().invoke(command, [])
    assert r.exit_code != 0
