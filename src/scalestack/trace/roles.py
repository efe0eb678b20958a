"""Thread roles from thread names: which threads are the application, and which the runtime.

Speedup stacks and bottle graphs colour and group threads by role (the papers draw GC threads
brown, the JIT green, the main thread turquoise). Roles come from ordered regex rules on the
thread's latest name; the first match wins. Built-in presets cover HotSpot, Go, CPython and
OpenMP; users add `regex=role` rules (`--threads-as-roles`), which take precedence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from scalestack.errors import UserError

ROLES = ("main", "app", "gc", "jit", "runtime", "other")

# Each preset: ordered (regex, role). Names are Linux comms (at most 15 characters).
PRESETS: dict[str, list[tuple[str, str]]] = {
    "hotspot": [
        (r"^GC Thread#\d+$", "gc"),
        (r"^G1 (Conc|Refine|Main Marker|Service|Young RemSet)", "gc"),
        (r"^(ZDirector|ZStat|ZUnmapper|ZWorker|ZDriver|ZThread|ZRuntime)", "gc"),
        (r"^Shenandoah", "gc"),
        (r"^(PSScavenge|ParGC|Parallel GC)", "gc"),
        (r"^VM Thread$", "gc"),
        (r"^(C1|C2) Compiler", "jit"),
        (r"^(C1|C2) CompilerThre", "jit"),
        (r"^Sweeper thread$", "jit"),
        (r"^(Reference Handl|Finalizer|Signal Dispatch|Service Thread|Common-Cleaner|"
         r"VM Periodic Tas|Notification Th|Monitor Deflati|Attach Listener|process reaper)", "runtime"),
        (r"^java$", "main"),
    ],
    "go": [],  # Go's OS threads are all named after the binary; roles need runtime/trace events
    "cpython": [(r"^(python[\d.]*|MainThread)$", "main")],
    "openmp": [],
}


class RoleRules:
    """Ordered regex → role rules; the first match wins, unmatched threads are `app`."""

    def __init__(self, rules: Sequence[tuple[str, str]] = (), presets: Iterable[str] = ("hotspot",)):
        self.rules: list[tuple[re.Pattern[str], str]] = []
        for pattern, role in rules:
            self.rules.append((_compile(pattern), role))
        for name in presets:
            if name not in PRESETS:
                raise UserError(f"unknown role preset {name!r}; choose from {', '.join(PRESETS)}")
            self.rules.extend((re.compile(p), r) for p, r in PRESETS[name])

    @classmethod
    def parse(cls, text: str | None, presets: Iterable[str] = ("hotspot",)) -> RoleRules:
        """From a comma-separated `regex=role` list, e.g. ``'^worker-=pool,^io=runtime'``."""
        rules: list[tuple[str, str]] = []
        for part in (text or "").split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise UserError(f"role rule {part!r} must look like REGEX=ROLE, e.g. '^worker=app'")
            pattern, role = part.rsplit("=", 1)
            if not role.strip():
                raise UserError(f"role rule {part!r} has an empty role")
            rules.append((pattern, role.strip()))
        return cls(rules, presets)

    def role_of(self, name: str) -> str | None:
        for pattern, role in self.rules:
            if pattern.search(name):
                return role
        return None

    def to_list(self) -> list[list[str]]:
        return [[p.pattern, r] for p, r in self.rules]


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UserError(f"bad regular expression {pattern!r} in role rules: {exc}") from None


def assign_roles(trace: Any, rules: RoleRules | str | None = None) -> np.ndarray:
    """Role per thread row of `trace` (a Trace; not imported here, since the model calls this).
    The first thread of the traced root process is `main` unless a rule
    says otherwise; everything unmatched is `app`."""
    if rules is None:
        saved = trace.meta.get("role_rules")
        rules = RoleRules([tuple(r) for r in saved], presets=()) if saved else RoleRules()
    elif isinstance(rules, str):
        rules = RoleRules.parse(rules)
    th = trace.threads
    roles = np.empty(len(th), dtype=object)
    root = trace.meta.get("root_tid")
    for i, (tid, name) in enumerate(zip(th.tid, th.name, strict=True)):
        role = rules.role_of(str(name))
        if role is None:
            role = "main" if (root is not None and int(tid) == int(root)) else "app"
        roles[i] = role
    return roles
