"""`scalestack top` in a real terminal (tmux): thread names and a criticality share appear,
`q` quits cleanly, Ctrl-C leaves the terminal in its normal mode."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid

from tests.top.conftest import requires_ebpf, requires_tmux


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30).stdout


def _wait_for(session: str, pattern: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if re.search(pattern, screen):
            return screen
        time.sleep(0.3)
    raise AssertionError(f"{pattern!r} never appeared; screen:\n{screen}")


def _stop_watched(screen: str) -> None:
    """Safety net: end the watched program by the pid `top` showed (it should be gone already)."""
    m = re.search(r"scalestack top\s+pid (\d+)", screen)
    if m:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(m.group(1)), signal.SIGKILL)


def _session(cmd: list[str], tmp_path) -> str:
    session = f"sstop-{uuid.uuid4().hex[:8]}"
    status = tmp_path / "status"
    stty = tmp_path / "stty"
    # the terminal's own size, not one inherited from the test runner's environment
    line = f"env -u COLUMNS -u LINES {shlex.join(cmd)}; echo $? > {status}; stty -a > {stty}; echo DONE; sleep 120"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "40", line], check=True, timeout=30)
    _tmux("resize-window", "-t", session, "-x", "200", "-y", "40")
    return session


@requires_ebpf
@requires_tmux
def test_top_shows_threads_and_shares_and_q_quits(c_programs, tmp_path):
    prog = str(c_programs["barrier_imbalance"])
    session = _session([sys.executable, "-m", "scalestack.cli", "top", "--", prog, "100000", "2000000", "3"], tmp_path)
    screen = ""
    try:
        screen = _wait_for(session, r"barrier_imbala.*\(\d+\).*\d+\.\d")
        assert "scalestack top" in screen and "crit % win" in screen
        # the slow thread (3x the work) holds the largest share of the last window
        shares = [float(m) for m in re.findall(r"barrier_imbala\S* \(\d+\)\s*│(?:\s*\w+\s*│)?\s*\w+\s*│\s*([\d.]+)",
                                               screen)]
        assert len(shares) >= 2 and max(shares) > 50, screen
        _tmux("send-keys", "-t", session, "q")
        screen = _wait_for(session, "DONE", 30)
        assert (tmp_path / "status").read_text().strip() == "0"
        assert "since start" in screen  # the final summary stays on the normal screen
        assert " icanon " in (tmp_path / "stty").read_text() and " echo " in (tmp_path / "stty").read_text()
    finally:
        _tmux("kill-session", "-t", session)
        _stop_watched(screen)


@requires_ebpf
@requires_tmux
def test_ctrl_c_leaves_the_terminal_clean(c_programs, tmp_path):
    prog = str(c_programs["barrier_imbalance"])
    session = _session([sys.executable, "-m", "scalestack.cli", "top", "--", prog, "100000", "2000000", "3"], tmp_path)
    screen = ""
    try:
        screen = _wait_for(session, r"crit % win")
        _tmux("send-keys", "-t", session, "C-c")
        _wait_for(session, "DONE", 30)
        assert (tmp_path / "status").read_text().strip() == "130"
        stty = (tmp_path / "stty").read_text()
        assert " icanon " in stty and " echo " in stty and "-icanon" not in stty
    finally:
        _tmux("kill-session", "-t", session)
        _stop_watched(screen)
