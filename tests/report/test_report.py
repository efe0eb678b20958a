"""Every renderer on one reference trace: figures are real images, the HTML opens in Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.dom.minidom

import pytest

import scalestack
from scalestack.report import ReportOptions, build_report, write_report
from scalestack.report.terminal import print_report
from scalestack.trace import make_trace

from ..analysis.fig32 import fig32_trace


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    tr = fig32_trace()
    tr = make_trace(
        {"tid": tr.threads.tid, "name": ["main", "GC Thread#0", "C2 CompilerThre", "worker-1"],
         "start_ns": tr.threads.start_ns, "end_ns": tr.threads.end_ns},
        tr.states.columns(), meta={"source": "test", "command": ["fig32"], "root_tid": 10,
                                   "warnings": ["a test warning <b>escaped</b>"]},
    )
    out = tmp_path_factory.mktemp("report")
    report = build_report(tr, ReportOptions(window="4ms", group_by=None))
    written = write_report(report, str(out))
    return out, written, report


def test_every_figure_is_a_valid_image(report_dir):
    out, written, _ = report_dir
    for name in ("criticality", "bottle", "bottle-windows"):
        png = (out / f"{name}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
        svg = (out / f"{name}.svg").read_text()
        doc = xml.dom.minidom.parseString(svg.encode())
        assert doc.documentElement.tagName == "svg" and len(doc.getElementsByTagName("path")) > 3


def test_json_holds_every_section(report_dir):
    out, _, _ = report_dir
    data = json.loads((out / "report.json").read_text())
    assert set(data["sections"]) == {"threads", "criticality", "advice", "bottle"}
    crit = [f for f in data["sections"]["advice"]["findings"] if f["kind"] == "critical-thread"]
    assert crit[0]["tid"] == 10  # fig 3.2: thread 0
    crit = data["sections"]["criticality"]
    assert [t["criticality_ns"] for t in crit["threads"]][0] == pytest.approx(6.5e6)
    assert len(data["sections"]["bottle"]["windows"]["windows"]) == 6


def test_terminal_report(report_dir, capsys):
    from rich.console import Console

    _, _, report = report_dir
    print_report(report, Console(width=120, force_terminal=False))
    text = capsys.readouterr().out
    assert "Criticality stack" in text and "main" in text and "29.55" in text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (make test installs it as root)")
def test_html_opens_in_headless_chromium(report_dir, tmp_path):
    out, _, _ = report_dir
    html_path = out / "report.html"
    import re

    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html_path.read_text())  # nothing fetched
    proc = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", "--dump-dom",
         html_path.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert dom.count("<svg") == 3 and "<table" in dom and "Bottle graph" in dom
    assert "&lt;b&gt;escaped&lt;/b&gt;" in dom
    assert "CONSOLE" not in proc.stderr and "Uncaught" not in proc.stderr


def test_cli_report_crit_bottle(tmp_path):
    tr = fig32_trace()
    path = tmp_path / "f.trace"
    scalestack.save(tr, path)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True)

    proc = run("report", str(path), "-o", str(tmp_path / "rep"), "--window", "5ms", "--group-by", "T[12]=pool")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rep" / "report.html").exists() and (tmp_path / "rep" / "bottle-windows.svg").exists()
    assert "Criticality stack" in proc.stdout
    proc = run("crit", str(path), "--json")
    assert json.loads(proc.stdout)["most_critical_tid"] == 10
    proc = run("bottle", str(path), "-o", str(tmp_path / "b.svg"))
    assert proc.returncode == 0 and (tmp_path / "b.svg").read_text().lstrip().startswith("<?xml")
    proc = run("bottle", str(path), "-o", str(tmp_path / "b.txt"))
    assert proc.returncode == 2 and "cannot tell the format" in proc.stderr
    proc = run("report", str(path), "--between", "1ms", "0.5ms")
    assert proc.returncode == 2 and proc.stderr.startswith("scalestack: error:")


def test_terminal_table_wraps_prose_instead_of_cutting_it():
    """The advice's evidence is sentences: in a terminal (or a file) it wraps; numbers stay on one line."""
    from rich.console import Console

    from scalestack.report import Section
    from scalestack.report.terminal import section_table

    advice = ("Of 6 phases, one thread is clearly the critical one in each of these: thread worker-1 (1001) "
              "in 2 (33% of the run); balance the work within each phase, last-word-kept")
    sec = Section("advice", "What to do about it", [], [{"rank": 1, "advice": advice, "gain": "1.14x"}],
                  [("rank", "#"), ("advice", "evidence and advice"), ("gain", "gain")])
    console = Console(width=80, record=True, force_terminal=False)
    console.print(section_table(sec))
    words = [w for w in console.export_text().split() if w not in ("│", "┃")]
    assert "last-word-kept" in words and "1.14x" in words and "worker-1" in words  # nothing cut off


def test_bracketed_names_print_as_written_not_as_style_tags():
    """A stripped library's code, [libz.so.1+0x496e..0x6510], a C++ name's [abi:cxx11] or a thread named
    [worker] read as rich markup vanished from the terminal (the report said "Most critical: `` in libz")."""
    from rich.console import Console

    from scalestack.report import Report, Section

    names = ["[libz.so.1+0x496e..0x6510]", "std::__cxx11::basic_string[abi:cxx11]", "[bold]"]
    sec = Section("functions", "Critical functions", [f"Most critical: `{names[0]}` in libz.so.1, 94.7%."],
                  [{"function": n, "share": 1.0} for n in names], [("function", "function"), ("share", "share")])
    report = Report("prog [x]", {"wall_ns": 10**9, "threads": 2}, ["a frame [red] stays"], [sec])
    console = Console(width=120, record=True, force_terminal=False)
    print_report(report, console)
    text = console.export_text()
    assert f"Most critical: `{names[0]}`" in text and "a frame [red] stays" in text and "prog [x]" in text
    assert all(n in text for n in names), text
