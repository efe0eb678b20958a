"""Guards for the eBPF tests: they need root, BTF, clang/libbpf/bpftool (and perf, tmux, gcc)."""

from __future__ import annotations

import shutil

import pytest


def ebpf_reason() -> str | None:
    from scalestack.collect.aggregator import unavailable

    return unavailable()


requires_ebpf = pytest.mark.skipif(ebpf_reason() is not None, reason=f"eBPF unavailable: {ebpf_reason()}")
requires_perf = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
requires_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
