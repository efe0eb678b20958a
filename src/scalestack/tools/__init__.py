"""External tools scalestack runs (perf, bpftrace, bpftool, clang, gcc, valgrind): found, version-checked
and compiled for in one place, so that a missing or broken tool is one clear error everywhere."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence

from scalestack.errors import UserError


def which(tool: str) -> str | None:
    """`tool` on PATH, or in /usr/sbin and /sbin (bpftool lives there and root's PATH may lack them)."""
    return shutil.which(tool) or next((p for d in ("/usr/sbin", "/sbin") if os.path.exists(p := f"{d}/{tool}")), None)


def c_compiler() -> str | None:
    return which("gcc") or which("cc")


def perf_binary() -> str:
    path = shutil.which("perf")
    if path is None:
        raise UserError("perf is not installed; install it with `apt-get install linux-perf` (Debian/Ubuntu)")
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"perf at {path} does not run: {exc}") from None
    if out.returncode != 0 or "perf version" not in out.stdout:
        hint = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no version output"
        raise UserError(f"perf at {path} does not work ({hint}); install the linux-perf package matching your kernel")
    return path


def perf_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    return out.stdout.strip().replace("perf version ", "")


def last_line(raw: bytes) -> str:
    lines = [ln.strip() for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def cache_dir(*parts: str) -> str:
    """Where compiled helpers are cached: $XDG_CACHE_HOME/scalestack/... (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "scalestack", *parts)


def build_cached(kind: str, sources: dict[str, bytes], salt: bytes,
                 steps: Sequence[tuple[list[str], str | None]], outputs: Sequence[str], what: str,
                 hint: str = "", force: bool = False) -> list[str]:
    """Compile once per content: write `sources` into a cache directory keyed by their hash and
    `salt`, run `steps` there and return the paths of `outputs`.

    Each step is (argv, stdout file or None); in argv, "{dir}" is the cache directory and "{tmp}"
    a per-process suffix. Every output is first written as NAME.{tmp} by the steps and renamed
    into place only when all steps succeed, so a concurrent reader never sees half a file.
    """
    key = hashlib.sha256(b"\0".join(sources[k] for k in sorted(sources)) + salt).hexdigest()[:16]
    out = cache_dir(kind, key)
    paths = [os.path.join(out, name) for name in outputs]
    if not force and all(os.path.exists(p) for p in paths):
        return paths
    os.makedirs(out, exist_ok=True)
    for name, text in sources.items():
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(text)
    tmp = str(os.getpid())
    for argv, stdout_name in steps:
        argv = [a.replace("{dir}", out).replace("{tmp}", tmp) for a in argv]
        dest = open(os.path.join(out, f"{stdout_name}.{tmp}"), "wb") if stdout_name else subprocess.DEVNULL
        res = None
        try:
            res = subprocess.run(argv, stdout=dest, stderr=subprocess.PIPE, timeout=300)
        except OSError as exc:
            raise UserError(f"building {what} failed: {argv[0]}: {exc.strerror}{hint}") from None
        finally:
            if stdout_name:
                dest.close()
                if res is not None and res.returncode == 0:
                    os.replace(dest.name, os.path.join(out, stdout_name))
        if res.returncode != 0:
            raise UserError(f"building {what} failed at `{os.path.basename(argv[0])}`: {last_line(res.stderr)}{hint}")
    for p in paths:
        os.replace(f"{p}.{tmp}", p)
    return paths
