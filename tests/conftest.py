"""Shared fixtures: real programs compiled by the tests, and the guard for recording tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "workloads"

# Every perf.data a test records or imports is read by both readers (the direct perf.data reader
# and perf script's text) and must give identical events (scalestack.ingest.perf_data.read_events).
os.environ.setdefault("SCALESTACK_CHECK_READERS", "1")


def can_record() -> str | None:
    """None when perf tracepoint recording works here, else the reason it does not."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    if os.geteuid() != 0:
        return "recording needs root"
    if shutil.which("gcc") is None:
        return "gcc is not installed"
    return None


requires_recording = pytest.mark.skipif(can_record() is not None, reason=str(can_record()))

# Tests that record (perf, eBPF, tracefs: system-wide, so a test beside them would be in their
# recording), that run the live view, or that time the machine's caches and cores (the pirate, the
# kernel-accounting bounds) get the `serial` mark: `make test` runs the others on every core first
# (`-n auto`), then these alone.
SERIAL_DIRS = {"eklov", "top", "kernel_accounting", "integration"}


def _is_serial(item) -> bool:
    if item.path.parent.name in SERIAL_DIRS or item.get_closest_marker("root"):
        return True
    return any(m is requires_recording.mark for m in item.iter_markers("skipif"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_serial(item):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def c_programs(tmp_path_factory) -> dict[str, Path]:
    """Every C workload under workloads/c compiled with gcc -O1 -pthread."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    out = tmp_path_factory.mktemp("cbin")
    built = {}
    for src in sorted((WORKLOADS / "c").glob("*.c")):
        exe = out / src.stem
        subprocess.run(["gcc", "-O1", "-Wall", "-pthread", str(src), "-o", str(exe)], check=True)
        built[src.stem] = exe
    return built


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory) -> Path:
    """workloads/java compiled with javac; the directory to put on the class path."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("java/javac are not installed")
    out = tmp_path_factory.mktemp("jclasses")
    sources = [str(p) for p in (WORKLOADS / "java").glob("*.java")]
    subprocess.run(["javac", "-d", str(out), *sources], check=True)
    return out
