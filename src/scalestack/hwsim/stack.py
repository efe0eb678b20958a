"""Hardware speedup stacks (thesis Sec. 3.4 / 6.2, eq. 3.8) from the simulator's counters.

Ŝ = N − Σ_i Σ_j O_ij / T_p + Σ_i P_i / T_p, with per-thread overheads O_ij: negative LLC
interference (inter-thread misses, extrapolated from the sampled ATD sets), memory interference
(bus, bank, row-buffer and prefetch waiting), detected spinning, yielding, and imbalance (the
last thread's end minus this thread's end); P_i is positive LLC interference. Stack height is N:
base + positive + net negative LLC + memory + spinning + yielding + imbalance.

Truth: the measured speedup S = T_s / T_p, T_s being the same work run as one sequential thread
on the same machine (`traces.without_sync`). Error as in the thesis: (Ŝ − S) / N.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from scalestack.hwsim import engine as E
from scalestack.hwsim.accounting import estimate, simulate
from scalestack.hwsim.config import HwConfig
from scalestack.hwsim.traces import MemTrace, without_sync
from scalestack.results import Result

STACK_COMPONENTS = ("positive", "net_negative_llc", "memory", "spinning", "yielding", "imbalance")
DELIMITERS = ("net_negative_llc", "memory", "spinning", "yielding", "imbalance")


@dataclasses.dataclass(frozen=True)
class HwSpeedupStack(Result):
    """One stack in speedup units; `estimated` = base + positive; `speedup` the measured truth."""

    kind = "hwsim-speedup-stack"
    name: str
    n: int
    t_parallel: float
    t_single: float | None
    speedup: float | None
    estimated: float
    base: float
    positive: float
    net_negative_llc: float
    memory: float
    spinning: float
    yielding: float
    imbalance: float
    spin_actual: float

    @property
    def error(self) -> float | None:
        """(Ŝ − S) / N."""
        return None if self.speedup is None else (self.estimated - self.speedup) / self.n

    def total(self) -> float:
        return self.base + sum(getattr(self, c) for c in STACK_COMPONENTS)

    def rows(self) -> list[dict[str, Any]]:
        return [{"name": self.name, "n": self.n, "speedup": self.speedup, "estimated": self.estimated,
                 "base": self.base, **{c: getattr(self, c) for c in STACK_COMPONENTS},
                 "error_pct": None if self.error is None else 100 * self.error}]


def stack_from_counters(cnt: np.ndarray, name: str = "", t_single: float | None = None) -> HwSpeedupStack:
    """Eq. 3.8 from the per-thread counter matrix of one parallel run (float64[N, NC])."""
    n = cnt.shape[0]
    tp = float(cnt[:, E.C_CYC].max())
    neg = mem = pos = 0.0
    for t in range(n):
        e = estimate(cnt[t])
        neg += e["inter"]
        mem += e["wait"]
        pos += e["positive"]
    spin = float(cnt[:, E.C_SPIND].sum())
    yld = float(cnt[:, E.C_YIELD].sum())
    imb = float((tp - cnt[:, E.C_CYC]).sum())
    over = neg + mem + spin + yld + imb
    base = n - over / tp
    return HwSpeedupStack(
        name=name, n=n, t_parallel=tp, t_single=t_single,
        speedup=None if t_single is None else t_single / tp,
        estimated=base + pos / tp, base=base, positive=pos / tp, net_negative_llc=(neg - pos) / tp,
        memory=mem / tp, spinning=spin / tp, yielding=yld / tp, imbalance=imb / tp,
        spin_actual=float(cnt[:, E.C_SPIN].sum()) / tp,
    )


def speedup_stack(trace: MemTrace, config: HwConfig | None = None, truth: bool = True,
                  name: str = "") -> HwSpeedupStack:
    """Run a multi-threaded trace (one thread per core) and build its hardware speedup stack.

    Parameters
    ----------
    trace : per-thread streams with lock/barrier events (`traces.parallel_kernel` or a text trace).
    config : the machine; `spin_limit`, `spin_detect`, `wake_cycles` set the waiting behaviour.
    truth : also run the sequential version to measure S = T_s / T_p.

    References
    ----------
    Thesis Sec. 3.4, 6.2 (eq. 3.8); spec `thesis-methods.md` Sec. 3.
    """
    cfg = (config or HwConfig()).validate()
    cnt = simulate(trace, cfg)
    ts = float(simulate(without_sync(trace), cfg)[0, E.C_CYC]) if truth else None
    return stack_from_counters(cnt, name or ",".join(sorted({x.split(":")[0] for x in trace.names})), ts)


def negligible(value: float, n: int) -> bool:
    """Spec §4 [our choice]: below 0.5 speedup units or below 3% of N."""
    return value < 0.5 or value < 0.03 * n


def classify_stacks(stacks: list[HwSpeedupStack], depth: int = 3) -> dict[str, Any]:
    """The §4 classification tree: class (good/moderate/poor), then the largest, second and third
    delimiters (negligible ones end the branch); leaves list (name, speedup)."""
    from scalestack.analysis.classify import scalability_class

    tree: dict[str, Any] = {}
    for s in stacks:
        sp = s.speedup if s.speedup is not None else s.estimated
        node = tree.setdefault(scalability_class(sp, s.n), {})
        parts = sorted(((getattr(s, c), c) for c in DELIMITERS), reverse=True)
        for v, c in parts[:depth]:
            if negligible(v, s.n):
                break
            node = node.setdefault(c, {})
        node.setdefault("_leaves", []).append((s.name, round(sp, 2)))
    return tree


def render_tree(tree: dict[str, Any], indent: int = 0) -> str:
    lines = []
    for k, v in tree.items():
        if k == "_leaves":
            lines.append(" " * indent + ", ".join(f"{n} ({sp:.2f})" for n, sp in v))
        else:
            lines.append(" " * indent + k)
            lines.append(render_tree(v, indent + 2))
    return "\n".join(x for x in lines if x)
