"""The one exception type a user should ever see as a message rather than a traceback.

Anything the user can fix (bad path, missing perf, garbled input, no permission) is raised
as `UserError` with a single line saying what is wrong and what to do. The CLI prints it on
stderr and exits non-zero; `--debug` shows the traceback. Everything else is a bug.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:  # one line, always
        return " ".join(str(self.args[0]).split("\n"))


class TraceFormatError(UserError):
    """Input file could not be parsed; the message names the line or byte offset."""
