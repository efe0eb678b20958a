"""Compile the C parts of the Eklov tooling (shim, pirate, streamer) on first use.

They are tiny, so they are built with the gcc every supported machine has, keyed by a hash of
the sources and the compiler flags, into the user's cache directory: no build step before
`pip install`, and a changed source is rebuilt automatically.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from importlib import resources

from scalestack.errors import UserError

# name -> (sources, whether it is a shared library, extra link flags)
_TARGETS: dict[str, tuple[tuple[str, ...], bool, tuple[str, ...]]] = {
    "shim": (("shim.c",), True, ("-ldl", "-pthread")),
    "pirate": (("pirate.c",), False, ("-pthread",)),
    "streamer": (("streamer.c",), False, ("-pthread",)),
}
_HEADERS = ("pirate_ctl.h",)


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "scalestack", "eklov")


def build(name: str, force: bool = False) -> str:
    """Path of the compiled `name` (a key of _TARGETS), compiled now if needed."""
    if name not in _TARGETS:
        raise ValueError(f"unknown C target {name!r}")
    sources, shared, ldflags = _TARGETS[name]
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise UserError("gcc is needed to build scalestack's timing shim and pirate; install gcc")
    src_dir = resources.files("scalestack.eklov") / "c"
    texts = [(src_dir / s).read_bytes() for s in sources + _HEADERS]
    cflags = ["-O2", "-Wall", "-fPIC", "-shared"] if shared else ["-O2", "-Wall"]
    key = hashlib.sha256(b"\0".join(texts) + " ".join(cflags + list(ldflags)).encode()).hexdigest()[:16]
    out_dir = os.path.join(_cache_dir(), key)
    out = os.path.join(out_dir, f"lib{name}.so" if shared else name)
    if os.path.exists(out) and not force:
        return out
    os.makedirs(out_dir, exist_ok=True)
    for fname, text in zip(sources + _HEADERS, texts, strict=True):
        with open(os.path.join(out_dir, fname), "wb") as fh:
            fh.write(text)
    tmp = f"{out}.{os.getpid()}"
    argv = [gcc, *cflags, "-I", out_dir, *[os.path.join(out_dir, s) for s in sources], "-o", tmp, *ldflags]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise UserError(f"building {name} failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
    os.replace(tmp, out)  # whole or not at all: a concurrent build may be reading it
    return out
