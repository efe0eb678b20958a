"""Work shared among threads: the compiled passes release the GIL, so a pass split into parts
that touch nothing in common runs on every CPU the process may use."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np


def on_threads(n: int, work: Callable[[int], None]) -> None:
    """work(0) ... work(n - 1), each on its own thread; the first error is raised in the caller's."""
    if n == 1:
        work(0)
        return
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:  # raised in the caller's thread below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]


def balanced(work: np.ndarray, parts: int) -> list[np.ndarray]:
    """The indices of `work` in at most `parts` groups of about equal sums (largest first, each to
    the group with the least so far), each group in increasing order."""
    parts = max(1, min(parts, len(work)))
    if parts == 1:
        return [np.arange(len(work), dtype=np.int64)]
    load = [0] * parts
    groups: list[list[int]] = [[] for _ in range(parts)]
    for j in np.argsort(-np.asarray(work), kind="stable").tolist():
        k = load.index(min(load))
        groups[k].append(j)
        load[k] += int(work[j])
    return [np.asarray(sorted(g), np.int64) for g in groups if g]
