"""`record -o` onto a full device: one line saying where the recording was kept and how much space
it needs, no traceback, nothing half-written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import scalestack

from ..conftest import ROOT, requires_recording
from ..top.conftest import requires_ebpf

pytestmark = requires_recording


@pytest.fixture
def full_device(tmp_path):
    """A 64 KiB tmpfs (root only), unmounted afterwards."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("collector", [["--collector", "perf"],
                                       pytest.param(["--collector", "ebpf", "--chunk-rows", "2000"], marks=requires_ebpf)],
                         ids=["perf", "ebpf-in-windows"])
def test_full_disk_keeps_the_recording_elsewhere_in_one_line(c_programs, tmp_path, full_device, collector):
    """With the eBPF collector in windows (~10^5 events), the trace written as it is built: the
    device fills, the trace is built again held and kept elsewhere as any other."""
    keep = tmp_path / "keep"
    keep.mkdir()
    out = full_device / "run.trace"
    # leave 8 KiB: a trace of four threads is bigger whatever the machine's load made of the run
    (full_device / "filler").write_bytes(b"\0" * (64 * 1024 - 8 * 1024))
    env = dict(os.environ, TMPDIR=str(keep))
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "record", "-q", *collector, "-o",
                           str(out), "--", str(c_programs["prodcons"]), "20000", "2", "200"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert os.listdir(full_device) == ["filler"]  # neither the trace nor a temporary part of it
    kept = list(keep.glob("scalestack-*.trace"))
    assert len(kept) == 1
    size = kept[0].stat().st_size
    assert size > 8 * 1024
    assert f"kept at {kept[0]}" in lines[0]
    assert f"needs {size / 1e3:.1f} kB" in lines[0] or f"needs {size / 1e6:.1f} MB" in lines[0]
    trace = scalestack.load(kept[0])
    assert len(trace.threads) == 4 and trace.meta["command"][0] == str(c_programs["prodcons"])


def test_import_onto_a_full_device_is_one_line(tmp_path, full_device):
    keep = tmp_path / "keep"
    keep.mkdir()
    (full_device / "filler").write_bytes(b"\0" * (64 * 1024 - 4096))  # leaves less than the trace needs
    data = ROOT / "tests" / "data" / "barrier.perf.data"
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", "perf-data", str(data), "--comm", "bi", "-o",
                           str(full_device / "bi.trace")], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(keep)), cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(os.listdir(full_device)) == ["filler"]
    (kept,) = keep.glob("scalestack-*.trace")
    assert f"the trace was kept at {kept}" in proc.stderr
    assert len(scalestack.load(kept).threads) == 3


def test_import_in_windows_onto_a_full_device_is_one_line(tmp_path, full_device):
    """A recording read in windows is written as it is built, with spills next to the output: a full
    device stops it in one line, and neither the trace nor a spill is left there."""
    (full_device / "filler").write_bytes(b"\0" * (64 * 1024 - 4096))
    data = ROOT / "tests" / "data" / "barrier.perf.data"
    proc = subprocess.run([sys.executable, "-m", "scalestack.cli", "import", "perf-data", str(data), "--comm", "bi",
                           "--chunk-rows", "7", "-o", str(full_device / "bi.trace")], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "no space left on the device of" in proc.stderr and "nothing was written" in proc.stderr
    assert sorted(os.listdir(full_device)) == ["filler"]


def test_tracefs_pages_go_to_tmpdir_and_a_full_one_is_one_line(c_programs, tmp_path, full_device):
    """The tracefs collector writes each CPU's pages to a file in $TMPDIR as it drains them (the
    recording is not held in memory) and removes them; a $TMPDIR with no room is said in one line."""
    room = tmp_path / "room"
    room.mkdir()
    argv = [sys.executable, "-m", "scalestack.cli", "record", "-q", "--collector", "tracefs", "-o",
            str(tmp_path / "t.trace"), "--", str(c_programs["prodcons"]), "20000", "2", "200"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(room)))
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(room) == []  # the pages' files are gone
    assert len(scalestack.load(tmp_path / "t.trace").threads) == 4
    (full_device / "filler").write_bytes(b"\0" * (64 * 1024 - 8192))  # room for the pid file and a page
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(full_device)))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot keep the tracefs recording" in lines[0] and "TMPDIR" in lines[0]
    assert os.listdir(full_device) == ["filler"]



def test_a_pid_file_left_empty_is_one_line(tmp_path):
    """The wrapper's pid file empty (its write failed: a full $TMPDIR) is said, not a ValueError."""
    from scalestack.collect.run import root_pid
    from scalestack.errors import UserError

    (tmp_path / "pid").write_text("")
    with pytest.raises(UserError, match="the command's pid was not written") as err:
        root_pid(str(tmp_path / "pid"))
    assert "TMPDIR" in str(err.value) and "\n" not in str(err.value)
