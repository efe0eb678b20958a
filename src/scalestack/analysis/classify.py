"""Benchmark classification (thesis-methods §4): scalability class, then the largest delimiters."""

from __future__ import annotations

from scalestack.analysis.speedup import COMPONENTS, SpeedupStack


def scalability_class(speedup: float, n: int) -> str:
    """good if S ≥ 10/16·N, poor if S < 5/16·N, else moderate (thesis §4)."""
    if speedup >= 10 / 16 * n:
        return "good"
    if speedup < 5 / 16 * n:
        return "poor"
    return "moderate"


def classify(stack: SpeedupStack, top: int = 3) -> tuple[str, list[str]]:
    """The class of the stack's speedup and its `top` largest positive components, largest first."""
    parts = sorted(((getattr(stack, c), c) for c in COMPONENTS), reverse=True)
    return scalability_class(stack.speedup, stack.n), [c for v, c in parts[:top] if v > 0]
