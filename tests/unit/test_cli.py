"""The CLI: every user error is one line on stderr with a non-zero status, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..ingest.test_perf_script import SAMPLE


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "scalestack.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_help_lists_the_commands():
    proc = run("--help")
    assert proc.returncode == 0
    for name in ("record", "import", "export", "info"):
        assert name in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["info", "missing.trace"], "missing.trace: no such file"),
    (["import", "missing.txt"], "missing.txt: no such file"),
    (["import", "bogus-format", "x"], "no such file"),
    (["record"], "no command given"),
    (["scale", "--threads", "0,2", "--", "true"], "give counts of 1 or more"),
    (["scale", "--threads", "1,x", "--", "true"], "not a comma-separated list"),
    (["pirate-stack", "--instances", "0", "--", "true"], "give counts of 1 or more"),
    # click's own usage errors (their wording is click's): one line, with where to look
    (["export", "pdf", "x.trace"], "; see `scalestack export --help`"),
    (["crit", "--bogus", "x.trace"], "; see `scalestack crit --help`"),
    (["nosuchcommand"], "; see `scalestack --help`"),
])
def test_errors_are_one_line(tmp_path, args, message):
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("scalestack: error: ") and message in lines[0]


def test_import_guesses_the_format_and_asks_for_the_process(tmp_path):
    (tmp_path / "garbage.bin").write_bytes(b"\x00\x01garbage")
    proc = run("import", "garbage.bin", cwd=tmp_path)
    assert proc.returncode == 2 and "unrecognised format" in proc.stderr
    (tmp_path / "p.txt").write_bytes(SAMPLE)
    proc = run("import", "p.txt", cwd=tmp_path)
    assert proc.returncode == 2 and "--pid" in proc.stderr
    proc = run("import", "p.txt", "--pid", "2366", "-o", "p.trace", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    info = run("info", "p.trace", "--json", cwd=tmp_path)
    assert info.returncode == 0 and '"tid": 2368' in info.stdout


def test_garbled_input_names_the_line_and_writes_nothing(tmp_path):
    (tmp_path / "bad.txt").write_bytes(SAMPLE.replace(b"[001]   319.109068661", b"[001]   319,109068661"))
    proc = run("import", "perf-script", "bad.txt", "--pid", "2366", "-o", "bad.trace", cwd=tmp_path)
    assert proc.returncode == 2 and "line 8" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "bad.trace").exists()


def test_outputs_that_cannot_be_written_are_one_line(tmp_path):
    """An output path under a missing directory of a file system where it cannot be made, a file
    where a report's directory should be, a directory where a file should be: one line each, the
    input untouched, no temporary file left."""
    (tmp_path / "p.txt").write_bytes(SAMPLE)
    assert run("import", "p.txt", "--pid", "2366", "-o", "p.trace", cwd=tmp_path).returncode == 0
    (tmp_path / "adir").mkdir()
    for args, message in ((["import", "p.txt", "--pid", "2366", "-o", "/proc/nope/x.trace"], "cannot write /proc/nope"),
                          (["report", "p.trace", "-o", "/proc/nope/r"], "cannot create the report directory"),
                          (["report", "p.trace", "-o", "p.txt"], "a file is there"),
                          (["export", "chrome", "p.trace", "-o", "/proc/nope/x.json"], "cannot write /proc/nope"),
                          (["export", "chrome", "p.trace", "-o", "adir"], "a directory is there")):
        proc = run(*args, cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (args, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "p.trace", "p.txt"]
    assert not list((tmp_path / "adir").iterdir())


def test_between_outside_the_trace_names_the_options_given(tmp_path):
    (tmp_path / "p.txt").write_bytes(SAMPLE)
    assert run("import", "p.txt", "--pid", "2366", "-o", "p.trace", cwd=tmp_path).returncode == 0
    for args, message in ((["crit", "p.trace", "--between", "5s", "1s"], "--between 5s 1s: the end is not after"),
                          (["bottle", "p.trace", "--between", "500s", "600s"], "--between 500s 600s is outside the "
                                                                               "trace, which runs ")):
        proc = run(*args, cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (args, proc.stderr)


def test_record_checks_its_output_before_the_program_runs(tmp_path):
    """A recording with nowhere to go is refused before the command runs (it would be lost after)."""
    proc = run("record", "-o", "/proc/nope/x.trace", "--", "touch", str(tmp_path / "ran"), cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "cannot write /proc/nope/x.trace" in lines[0], proc.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("rules", ["garbage", "[x=pool"])
@pytest.mark.parametrize("aggregate", [[], ["--aggregate"]])
def test_record_checks_its_role_rules_before_the_program_runs(tmp_path, rules, aggregate):
    """A bad --threads-as-roles was said after the program ran, and the recording lost (an
    aggregate recording was kept, with the rule in it, and every later read failed)."""
    proc = run("record", *aggregate, "--threads-as-roles", rules, "-o", "out", "--", "touch", str(tmp_path / "ran"),
               cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "role rule" in lines[0], proc.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_import_of_a_process_that_is_not_in_the_recording_writes_nothing(tmp_path):
    """--pid of no process in the recording was a trace of one thread, unknown throughout, written
    over the output; --pid and --comm together were taken."""
    (tmp_path / "p.txt").write_bytes(SAMPLE)
    (tmp_path / "old.trace").write_bytes(b"kept")
    proc = run("import", "p.txt", "--pid", "999999", "-o", "old.trace", cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "process 999999 has no event in the recording" in lines[0]
    assert (tmp_path / "old.trace").read_bytes() == b"kept"
    proc = run("import", "p.txt", "--pid", "2366", "--comm", "java", cwd=tmp_path)
    assert proc.returncode == 2 and "either --pid or --comm" in proc.stderr
    assert run("import", "p.txt", "--pid", "2366", "-o", "ok.trace", cwd=tmp_path).returncode == 0


def test_a_window_too_small_for_the_run_is_one_line(tmp_path):
    """--window 1ns on a 0.3 s trace asked for 3 x 10^8 bottle graphs and ran out of memory."""
    from scalestack.trace import make_trace
    from scalestack.trace.store import save

    save(make_trace({"tid": [10], "name": ["main"], "start_ns": [0], "end_ns": [10**6]},
                    {"tid": [10], "start_ns": [0], "end_ns": [10**6], "state": [0]}), tmp_path / "t.trace")
    proc = run("bottle", "t.trace", "--window", "1ns", cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "windows; give one of" in lines[0], proc.stderr


def test_a_trace_that_cannot_be_saved_where_asked_is_kept_elsewhere(tmp_path, monkeypatch):
    """The output's directory gone (or never makeable) once the trace is built: kept in the
    temporary directory, and the one line says where."""
    import tempfile

    import scalestack
    from scalestack.errors import UserError
    from scalestack.trace import store

    from .test_trace import small_trace

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(UserError, match="cannot write /proc/nope/x.trace: No such file or directory; the trace was "
                                        "kept at ") as err:
        store.save_or_keep(small_trace(), "/proc/nope/x.trace")
    kept = str(err.value).rsplit(" ", 1)[1]
    assert kept.startswith(str(tmp_path)) and len(scalestack.load(kept).states) == len(small_trace().states)


def test_import_list_shows_the_processes(tmp_path):
    (tmp_path / "p.txt").write_bytes(SAMPLE)
    proc = run("import", "p.txt", "--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[1]
    assert first.split()[0] == "2366" and first.endswith("C2 CompilerThre")  # the leader's latest name


def test_info_shows_the_running_the_scheduler_charges_after_the_trace(tmp_path):
    """A thread still running at the trace's end (a part of a recording): its RUNNING after its last
    runtime report stays, and `info` shows it beside the kernel's figure."""
    from scalestack.trace.builder import build_trace
    from scalestack.trace.events import Kind, RawEvents
    from scalestack.trace.store import save

    rows = [(0, 0, 100, 100, int(Kind.SWITCH), 0, 100, 0, -1, -1),
            (2_000_000, 0, 100, 100, int(Kind.STAT_RUNTIME), 100, 2_000_000, 0, -1, -1),
            (2_500_000, 0, 100, 100, int(Kind.FUTEX_ENTER), 0xA0, 1, 0, -1, -1)]
    trace = build_trace(RawEvents.from_rows(rows), root_pids=[100], start_ns=0, end_ns=5_000_000)
    assert trace.meta["running_unreported_ns"] == {"100": 3_000_000}
    assert not trace.meta["warnings"]  # the kernel runtime check leaves that stretch out
    save(trace, tmp_path / "t.trace")
    proc = run("info", "t.trace", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2.0 +3.0" in proc.stdout and "charges after it" in proc.stdout


@pytest.mark.parametrize("env,huge", [({}, False), ({"NUMPY_MADVISE_HUGEPAGE": "1"}, True)])
def test_the_command_keeps_numpy_arrays_in_small_pages_unless_told(env, huge):
    """Fresh memory in huge pages costs 3-4x as much on the VMs this runs on; a user's
    NUMPY_MADVISE_HUGEPAGE is kept."""
    import os

    code = ("import scalestack.cli as c, numpy._core.multiarray as m\n"
            "try:\n    c.main(['--version'])\nexcept SystemExit:\n    pass\nprint(m._get_madvise_hugepage())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"} | env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(huge)


def test_numbas_array_library_loads_without_scipys_linear_algebra_which_stays_importable():
    """numba's np.* library imports scipy.linalg (0.1 s of each command's start) to learn whether
    np.cov may use BLAS; the command makes that one import fail, and only while numba loads."""
    code = ("import sys, numpy as np\n"
            "from scalestack.cli import skip_blas_probe\n"
            "skip_blas_probe()\n"
            "from numba import njit\n"
            "assert njit(lambda a: a.sum())(np.arange(4.0)) == 6.0\n"
            "import numba.np.arraymath as am\n"
            "print(am._HAVE_BLAS, 'scipy.linalg' in sys.modules)\n"
            "import scipy.linalg\n"
            "from sklearn.cluster import KMeans\n"
            "print(float(njit(lambda a, b: np.dot(a, b))(np.ones(3), np.ones(3))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "3.0"]
    # without it, numba does import it (the probe the command skips)
    proc = subprocess.run([sys.executable, "-c", "import sys, numba.np.arraymath as am\n"
                           "print(am._HAVE_BLAS, 'scipy.linalg' in sys.modules)"], capture_output=True, text=True)
    assert proc.stdout.split() == ["True", "True"], proc.stderr


def test_a_first_compile_is_announced_once_on_a_terminal(tmp_path):
    """Compiling (not loading from numba's cache) says so once, before numba's minute of silence;
    nothing where stderr is captured, and nothing when the compiled code is loaded from the cache."""
    import os
    import pty

    (tmp_path / "kernels.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n\n"
                                         "@numba.njit(cache=True)\ndef g(x):\n    return x * 2\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import scalestack.cli as c; c.notice_compiles()\n"
            "import kernels; kernels.f(1); kernels.g(2); kernels.f(1.5)\nprint('done', file=sys.stderr)")

    def stderr_of(tty: bool) -> str:
        if not tty:
            return subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True).stderr
        main, sub = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stderr=sub)
        os.close(sub)
        out = b""
        while True:
            try:
                got = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                break
            if not got:
                break
            out += got
        os.close(main)
        assert proc.wait() == 0
        return out.decode()

    first = stderr_of(tty=True).splitlines()
    notices = [line for line in first if "compiling" in line]  # three functions compiled, one line
    assert len(notices) == 1 and "once" in notices[0] and first[-1].strip() == "done"
    assert stderr_of(tty=True).split() == ["done"]  # loaded from the cache
    (tmp_path / "kernels.py").write_text((tmp_path / "kernels.py").read_text() + "\n")  # new source: compiled again
    assert stderr_of(tty=False).strip() == "done"


def test_ctrl_c_inside_a_compiled_pass_is_one_line(monkeypatch, capsys):
    """Ctrl-C while a compiled pass runs without the GIL reaches Python as a SystemError caused by the
    KeyboardInterrupt (numba returns with the interrupt set): the same one line and status as any
    Ctrl-C; a SystemError of another cause stays a bug's traceback."""
    from scalestack import cli

    def interrupted(**_kw):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(<function _names_chunk>) returned a result with an exception set") from exc

    monkeypatch.setattr(cli.cli, "main", interrupted)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["info", "x.trace"])
    assert exit_.value.code == 130 and capsys.readouterr().err == "scalestack: aborted\n"

    def broken(**_kw):
        raise SystemError("a bug")

    monkeypatch.setattr(cli.cli, "main", broken)
    with pytest.raises(SystemError, match="a bug"):
        cli.main(["info", "x.trace"])
