"""What both eBPF programs (the aggregator and the trace collector) need: whether eBPF can run
here, one sentence when it cannot, their build for this kernel (clang against the kernel's own
BTF, cached by `scalestack.tools.build_cached`) and the start of their loader."""

from __future__ import annotations

import os
import platform
import select
import subprocess
from importlib import resources

from scalestack.errors import UserError
from scalestack.tools import build_cached, c_compiler, which

ARCH = {"x86_64": "x86", "aarch64": "arm64"}
HINT = "; use `scalestack record` (perf) instead"
MIN_KERNEL = (5, 18)  # sched_switch passes prev_state to BTF programs from 5.18 on


def unavailable(what: str = "the eBPF aggregator", hint: str = HINT) -> str | None:
    """None when `what` (the aggregator, or the trace collector) can run here, else one line
    saying why not, ending with `hint` (what to use instead)."""
    reason = _reason(what)
    return None if reason is None else reason + hint


def _reason(what: str) -> str | None:
    if platform.system() != "Linux":
        return "eBPF needs Linux"
    if platform.machine() not in ARCH:
        return f"{what} supports x86_64 and aarch64, not {platform.machine()}"
    if os.geteuid() != 0:
        return "eBPF needs root (CAP_BPF and CAP_PERFMON): run with sudo"
    try:
        release = tuple(int(x) for x in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        release = MIN_KERNEL
    if release < MIN_KERNEL:
        return f"kernel {platform.release()} is too old for {what} (needs {MIN_KERNEL[0]}.{MIN_KERNEL[1]} or newer)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "this kernel has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)"
    try:
        with open("/sys/kernel/security/lockdown") as fh:
            if "[confidentiality]" in fh.read():
                return "the kernel is locked down (lockdown=confidentiality forbids reading kernel memory)"
    except OSError:
        pass
    missing = [tool for tool in ("clang", "bpftool") if not which(tool)]
    if not os.path.exists("/usr/include/bpf/libbpf.h"):
        missing.append("libbpf-dev")
    if not which("gcc") and not which("cc"):
        missing.append("gcc")
    if missing:
        return f"building {what} needs {', '.join(missing)} (apt-get install clang libbpf-dev bpftool)"
    return None


def check() -> None:
    """Raise one clear UserError when eBPF cannot be used here."""
    reason = unavailable()
    if reason:
        raise UserError(reason)


# program -> (BPF source, loader source, loader binary)
PROGRAMS = {
    "aggregate": ("aggregate.bpf.c", "loader.c", "scalestack-agg"),
    "trace": ("trace.bpf.c", "trace_loader.c", "scalestack-trace"),
}


def build(force: bool = False, program: str = "aggregate") -> tuple[str, str]:
    """The BPF object and its loader (`program`: a key of PROGRAMS), compiled for this kernel on
    first use and cached."""
    check()
    bpf_name, loader_name, binary = PROGRAMS[program]
    src = resources.files("scalestack.collect") / "bpf"
    sources = {bpf_name: (src / bpf_name).read_bytes(), loader_name: (src / loader_name).read_bytes()}
    obj_name = bpf_name.replace(".c", ".o")
    arch = ARCH[platform.machine()]
    steps = [
        ([which("bpftool"), "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"], "vmlinux.h"),
        (["clang", "-O2", "-g", "-target", "bpf", "-mcpu=v3", f"-D__TARGET_ARCH_{arch}", "-I", "{dir}", "-c",
          f"{{dir}}/{bpf_name}", "-o", f"{{dir}}/{obj_name}.{{tmp}}"], None),
        ([c_compiler() or "cc", "-O2", f"{{dir}}/{loader_name}", "-o", f"{{dir}}/{binary}.{{tmp}}", "-lbpf"], None),
    ]
    obj, loader = build_cached("bpf", sources, (platform.release() + platform.version()).encode(), steps,
                               [obj_name, binary], f"the eBPF {program} program", HINT, force)
    return obj, loader


def start_loader(argv: list[str], timeout: float, what: str, hint: str) -> subprocess.Popen:
    """Start a loader (line protocol on stdin/stdout) and wait for its "ready"; one clear error
    with the loader's last message if it does not come."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            bufsize=1)
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        err = proc.stderr.read().strip().splitlines()
        raise UserError(f"{what} did not start: " + (err[-1] if err else "no message") + hint)
    return proc
