"""At a glance: a 500-argument command does not fill the report's first screen or the terminal,
prose is left-aligned, the advice comes first, and the bottle graph's width ticks say something."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scalestack
from scalestack.report import ReportOptions, build_report, write_report
from scalestack.report.figures import parallelism_ticks
from scalestack.report.text import elide, is_text_column, short_command
from scalestack.trace import make_trace

from ..analysis.fig32 import fig32_trace

LONG = ["/usr/lib/jvm/java-17-openjdk-amd64/bin/javac", "-d", "out"] + \
       [f"src/java.base/share/classes/java/util/concurrent/Class{i:03d}.java" for i in range(497)]


def test_short_command_worked_examples():
    assert len(LONG) == 500
    assert short_command(LONG) == "javac -d out … (+497 more arguments)"
    assert short_command(["sort", "--parallel=2", "-S", "64M", "big.txt"]) == "sort --parallel=2 -S 64M big.txt"
    assert short_command(["/usr/bin/xz", "-T2", "-k", "-f", "a" * 80]) == "xz -T2 -k -f … (+1 more argument)"
    assert short_command([]) == "" and short_command(None) == ""
    assert elide("abcdef", 4) == "abc…" and elide("abc", 4) == "abc"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="…"),
                        min_size=1, max_size=90), min_size=1, max_size=600), st.integers(20, 120))
def test_short_command_fits_and_keeps_what_it_shows(args, width):
    out = short_command(args, width)
    assert len(out) <= width
    if len(" ".join(args)) <= width:
        assert out == " ".join(args)
        return
    name = args[0].rsplit("/", 1)[-1] or args[0]
    first, *shown = out.split(" ")
    assert name.startswith(first.removesuffix("…"))
    m = re.search(r" …( \(\+|\+)(\d+)( more arguments?\))?$", out)
    if m:  # the arguments shown are the first ones, and the count of the rest is right
        shown = out[:m.start()].split(" ")[1:]
        assert shown == args[1:1 + len(shown)]
        assert int(m.group(2)) == len(args) - 1 - len(shown)
    else:
        assert shown == args[1:]


@pytest.fixture(scope="module")
def long_report(tmp_path_factory):
    tr = fig32_trace().with_meta(command=LONG)
    out = tmp_path_factory.mktemp("long")
    report = build_report(tr, ReportOptions())
    return tr, report, out, write_report(report, str(out))


def test_html_title_headings_and_cells_stay_short(long_report):
    _, report, out, _ = long_report
    page = (out / "report.html").read_text()
    title = re.search(r"<title>(.*?)</title>", page).group(1)
    assert len(html.unescape(title)) < 100
    h1 = re.search(r"<h1>(.*?)</h1>", page, re.S).group(1)
    shown = re.sub(r"<[^>]+>", "", h1)
    assert len(html.unescape(shown)) < 110 and "(+497 more arguments)" in shown
    assert html.escape(" ".join(LONG), quote=True) in h1  # the whole line, on hover
    for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", page, re.S):
        assert "Class001.java" not in cell
    data = json.loads((out / "report.json").read_text())
    assert data["command_line"] == " ".join(LONG) and data["facts"]["command"] == LONG
    assert len(data["title"]) < 100


def test_terminal_report_lines_fit_the_screen(long_report, capsys):
    from rich.console import Console

    from scalestack.report.terminal import print_report

    _, report, _, _ = long_report
    print_report(report, Console(width=110, force_terminal=False))
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 110
    assert "javac -d out … (+497 more arguments)" in text


def test_info_prints_the_short_command(long_report, tmp_path):
    tr, _, _, _ = long_report
    path = tmp_path / "long.trace"
    scalestack.save(tr, str(path))
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "info", str(path)], capture_output=True, text=True,
                          env={"COLUMNS": "110", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 110
    assert "javac -d out … (+497 more arguments)" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "info", "--json", str(path)], capture_output=True,
                          text=True)
    assert json.loads(proc.stdout)["command"] == LONG


def test_advice_first_and_prose_left_aligned(long_report):
    _, report, out, _ = long_report
    page = (out / "report.html").read_text()
    order = [page.index(f"<section id='{k}'>") for k in ("advice", "timeline", "threads", "criticality", "bottle")]
    assert order == sorted(order)
    advice = page[page.index("<section id='advice'>"):page.index("<section id='timeline'>")]
    assert "<th class='t'>evidence and advice</th>" in advice and "<td class='t'>" in advice
    assert [s.key for s in report.sections][0] == "advice"
    rows = [{"gain": "1.14x", "advice": "balance the work of the threads in each phase"}]
    assert is_text_column("advice", rows) and not is_text_column("gain", rows)


@settings(max_examples=40, deadline=None)
@given(st.integers(110, 160), st.lists(st.floats(0, 1e5, allow_nan=False), min_size=7, max_size=7),
       st.text("abcdefgh ", min_size=1, max_size=60))
def test_terminal_tables_wrap_words_and_keep_every_figure(width, figures, words):
    """A wide table in the report's narrowest terminal (110 columns): its text columns wrap, no figure
    is cut ("11…")."""
    from rich.console import Console

    from scalestack.report import Section
    from scalestack.report.terminal import section_table

    cols = [("lock", "lock"), ("kind", "kind")] + [(f"n{k}", f"figure number {k}") for k in range(7)] + [
        ("at", "waited at")]
    row = {"lock": "thread exit (pthread_join in main)", "kind": "condvar", "at": words,
           **{f"n{k}": x for k, x in enumerate(figures)}}
    console = Console(width=width, record=True)
    console.print(section_table(Section("s", "S", table=[row], columns=cols)))
    text = console.export_text()
    for x in figures:
        assert f"{x:.2f}" in text, (x, text)
    assert "…" not in text.split("━")[-1], text  # nothing in the body cut with an ellipsis
    assert is_text_column("kind", [row]) and is_text_column("at", [{"at": "main"}])
    assert not is_text_column("gain", [{"gain": "1.14x"}, {"gain": "12%"}, {"gain": "3.2 ms"}, {"gain": "–"}])


def test_long_thread_names_are_cut_in_cells_and_whole_on_hover(tmp_path):
    name = "a-very-long-thread-name-from-an-imported-chrome-trace-" * 2
    tr = make_trace({"tid": [1], "name": [name], "start_ns": [0], "end_ns": [1000]},
                    {"tid": [1], "start_ns": [0], "end_ns": [1000], "state": [0]})
    write_report(build_report(tr, ReportOptions()), str(tmp_path))
    page = (tmp_path / "report.html").read_text()
    assert f"title='{name}'" in page
    assert f">{name}<" not in page


def test_parallelism_ticks_worked_examples():
    """`sort --parallel=2` ran with parallelism ~1.3: integer ticks gave a lone 1 on each side."""
    assert parallelism_ticks(1.3) == [0.5, 1.0]
    assert parallelism_ticks(1.0) == [0.25, 0.5, 0.75, 1.0]
    assert parallelism_ticks(3.7) == [1, 2, 3]
    assert parallelism_ticks(8) == [2, 4, 6, 8]
    assert parallelism_ticks(64) == [20, 40, 60]


@given(st.floats(1.0, 5000.0))
def test_parallelism_ticks_are_few_round_and_inside(max_w):
    ticks = parallelism_ticks(max_w)
    assert 1 <= len(ticks) <= 4 and ticks[-1] <= max_w + 1e-6
    step = ticks[0]
    assert all(t == pytest.approx(step * (k + 1)) for k, t in enumerate(ticks))
    mantissa = step / 10 ** int(f"{step:e}".split("e")[1])
    assert round(mantissa, 6) in (1.0, 2.0, 2.5, 5.0)


def test_bottle_graph_axes_say_what_they_measure(long_report):
    _, _, out, _ = long_report
    svg = (out / "bottle.svg").read_text()
    assert "parallelism" in svg and "criticality" in svg


def test_cli_report_without_timeline(tmp_path):
    path = tmp_path / "f.trace"
    scalestack.save(fig32_trace(), str(path))
    for flag, has in (([], True), (["--no-timeline"], False)):
        out = tmp_path / f"rep{len(flag)}"
        proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "report", str(path), "-q", "-o", str(out), *flag],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert ("id='sst-tl'" in (out / "report.html").read_text()) == has
