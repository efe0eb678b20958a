"""Writing files so that an interrupted write never leaves a half-written one behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

from scalestack.errors import UserError


def output_dir(path: str | os.PathLike, what: str = "the output directory") -> str:
    """`path` made a directory if it is not one yet (and its parents); a path that cannot be one
    (a file is there, a parent is missing on a read-only or virtual file system, no permission) is
    the user's error, in one line."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"cannot write {what} {path}: a file is there; give a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {what} {path}: {exc.strerror or exc}") from None
    return path


def check_writable(path: str | os.PathLike) -> None:
    """That `path` can be written (its directory made, a file created there), before minutes of work
    whose result would have nowhere to go; nothing is left behind but the directory."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: a directory is there; give a file name")
    fd, tmp = _temporary_beside(path)
    os.close(fd)
    os.unlink(tmp)


def parent_dir(path: str | os.PathLike) -> str:
    """The directory a file `path` goes in, made if missing; one line if it cannot be."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    return directory


def _temporary_beside(path: str) -> tuple[int, str]:
    """A new temporary file in `path`'s directory (made if missing), open: (fd, its path)."""
    directory = parent_dir(path)
    try:
        return tempfile.mkstemp(prefix=".scalestack-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file handle whose content replaces `path` only when the block completes. A path
    that cannot be written (its directory cannot be made, a directory is there) is the user's
    error, in one line; the block's own errors are raised as they are."""
    path = os.fspath(path)
    fd, tmp = _temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, IsADirectoryError) and exc.filename == tmp:  # (os.replace names both paths)
            raise UserError(f"cannot write {path}: a directory is there; give a file name") from None
        raise


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    with atomic_output(path) as fh:
        fh.write(data)
