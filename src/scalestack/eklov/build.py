"""Compile the C parts of the Eklov tooling (shim, pirate, streamer) on first use.

They are tiny, so they are built with the gcc every supported machine has, keyed by a hash of
the sources and the compiler flags, into the user's cache directory: no build step before
`pip install`, and a changed source is rebuilt automatically.
"""

from __future__ import annotations

from importlib import resources

from scalestack.errors import UserError
from scalestack.tools import build_cached, c_compiler

# name -> (sources, whether it is a shared library, extra link flags)
_TARGETS: dict[str, tuple[tuple[str, ...], bool, tuple[str, ...]]] = {
    "shim": (("shim.c",), True, ("-ldl", "-pthread")),
    "pirate": (("pirate.c",), False, ("-pthread",)),
    "streamer": (("streamer.c",), False, ("-pthread",)),
}
_HEADERS = ("pirate_ctl.h",)


def build(name: str, force: bool = False) -> str:
    """Path of the compiled `name` (a key of _TARGETS), compiled now if needed."""
    if name not in _TARGETS:
        raise ValueError(f"unknown C target {name!r}")
    sources, shared, ldflags = _TARGETS[name]
    gcc = c_compiler()
    if gcc is None:
        raise UserError("gcc is needed to build scalestack's timing shim and pirate; install gcc")
    src_dir = resources.files("scalestack.eklov") / "c"
    texts = {s: (src_dir / s).read_bytes() for s in sources + _HEADERS}
    cflags = ["-O2", "-Wall", "-fPIC", "-shared"] if shared else ["-O2", "-Wall"]
    out = f"lib{name}.so" if shared else name
    argv = [gcc, *cflags, "-I", "{dir}", *[f"{{dir}}/{s}" for s in sources], "-o", f"{{dir}}/{out}.{{tmp}}", *ldflags]
    return build_cached("eklov", texts, " ".join(cflags + list(ldflags)).encode(), [(argv, None)], [out],
                        name, force=force)[0]
