"""Short forms of long texts for titles, headings and table cells: a command line of several
hundred file names must not push the report's first screen (or a terminal line) off the page.

The full text stays available: in report.json (``facts.command``, ``command_line``) and, in the
HTML page, as the ``title`` attribute (shown on hover) of the shortened text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

MAX_TITLE = 72


def command_line(cmd: Sequence[str] | str | None) -> str:
    """The whole command as one line (arguments joined by spaces)."""
    if not cmd:
        return ""
    return cmd if isinstance(cmd, str) else " ".join(str(a) for a in cmd)


def short_command(cmd: Sequence[str] | str | None, max_chars: int = MAX_TITLE) -> str:
    """Program name (without its directory) and as many first arguments as fit in `max_chars`,
    then how many were left out: ``javac -d out … (+497 more arguments)``.

    A command that fits is returned whole (the program keeps its path). A program name or an
    argument longer than the room left is cut with an ellipsis; the result never exceeds `max_chars`.
    """
    if not cmd:
        return ""
    args = cmd.split() if isinstance(cmd, str) else [str(a) for a in cmd]
    whole = " ".join(args)
    if len(whole) <= max_chars:
        return whole

    def tail(k: int) -> str:
        if not k:
            return ""
        return f" … (+{k} more argument{'s' if k != 1 else ''})" if max_chars >= 40 else f" …+{k}"

    name = os.path.basename(args[0]) or args[0]
    out = elide(name, max(1, min(max_chars // 2, max_chars - len(tail(len(args) - 1)))))
    shown = 1
    for a in args[1:]:
        if len(out) + 1 + len(a) + len(tail(len(args) - shown - 1)) > max_chars:
            break
        out += " " + a
        shown += 1
    return out + tail(len(args) - shown)


def elide(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` characters, ending in "…" when it was cut."""
    text = str(text)
    if max_chars < 2 or len(text) <= max_chars:
        return text[:max(max_chars, 0)] if max_chars < 2 else text
    return text[:max_chars - 1] + "…"


NAME_KEYS = ("name", "label", "role", "box", "finding", "advice", "code", "phase_name")


def is_text_column(key: str, rows: Sequence[dict]) -> bool:
    """Left-aligned: names and prose. A column is prose when it holds a string that is not a short
    number-like token (numbers and "1.14x" stay right-aligned, so their digits line up)."""
    if key in NAME_KEYS:
        return True
    return any(isinstance(row.get(key), str) and row[key] and not NUMBER_LIKE.match(row[key]) for row in rows)


NUMBER_LIKE = re.compile(r"^[-+]?[\d.,]+\s*(x|%|[a-zµ]{1,2})?$|^[–-]$")  # 1.14x, 12%, 3.2 ms, a dash
