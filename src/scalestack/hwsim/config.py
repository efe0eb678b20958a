"""Machine parameters of the trace-driven multicore simulator (thesis Table 6.2 defaults).

Every field can be set from a YAML/JSON config file or from the CLI (`--set key=value`).
Geometry is checked up front so an impossible cache is refused with its reason, not simulated.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from scalestack.errors import UserError


@dataclasses.dataclass(frozen=True)
class HwConfig:
    """Simulated machine; times in core cycles unless named otherwise.

    Defaults follow thesis Table 6.2 (2 GHz core, 64 KB 4-way L1D, 2 MB 8-way shared LLC with
    32 MSHRs, DDR 667 MHz with 8 banks and 4 KB rows, tRP-tRCD-CL = 9-9-9, bus 1333 MT/s x 64 bit).

    References
    ----------
    Thesis Sec. 6.2.2, Table 6.2; spec `thesis-methods.md` Sec. 3 (software simulation design).
    """

    freq_ghz: float = 2.0
    line_bytes: int = 64
    l1_bytes: int = 64 * 1024
    l1_ways: int = 4
    l1_latency: int = 2
    llc_bytes: int = 2 * 1024 * 1024
    llc_ways: int = 8
    llc_latency: int = 10
    mshrs: int = 32
    dispatch_width: int = 4
    rob_size: int = 128
    dram_mhz: float = 667.0
    bus_mts: float = 1333.0
    bus_bytes: int = 8
    banks: int = 8
    row_bytes: int = 4096
    t_rp: int = 9
    t_rcd: int = 9
    t_cl: int = 9
    fixed_latency: bool = False
    fixed_latency_ns: float = 100.0
    prefetch: bool = True
    prefetch_degree: int = 1
    atd_sampled_sets: int = 32
    full_atd: bool = False
    atd_sets: str = "spread"  # which LLC sets the sampled ATD watches: spread (default) or aligned
    wait_model: str = "thesis"
    # an inter-thread miss's waiting behind other cores' DRAM requests: memory term (true) or, as the
    # thesis charges it, part of the inter-thread miss penalty in the LLC term (false)
    inter_wait_to_memory: bool = False
    spin_limit: int = 20000
    spin_detect: int = 200
    wake_cycles: int = 4000
    # ground-truth switches (hwsim/eklov.py): contention removed exactly
    sync_free: bool = False  # locks never block, barriers never wait (sync events stay fences)
    llc_partition: bool = False  # each running thread owns 1/N of the LLC's sets
    private_memory: bool = False  # each core has DRAM banks, row buffers and a bus of its own

    # -- derived -----------------------------------------------------------------------
    @property
    def llc_sets(self) -> int:
        return self.llc_bytes // (self.llc_ways * self.line_bytes)

    @property
    def l1_sets(self) -> int:
        return self.l1_bytes // (self.l1_ways * self.line_bytes)

    def validate(self) -> HwConfig:
        """Refuse impossible geometry with the reason (ways x sets x line size must equal size)."""
        def pow2(x: int) -> bool:
            return x > 0 and (x & (x - 1)) == 0

        if not pow2(self.line_bytes):
            raise UserError(f"line_bytes={self.line_bytes} is not a power of two")
        for name, size, ways in (("l1", self.l1_bytes, self.l1_ways), ("llc", self.llc_bytes, self.llc_ways)):
            if ways <= 0 or size <= 0:
                raise UserError(f"{name}: size and ways must be positive (got {size} B, {ways} ways)")
            sets = size // (ways * self.line_bytes)
            if sets * ways * self.line_bytes != size or not pow2(sets):
                raise UserError(
                    f"{name}: impossible geometry: {ways} ways x {sets} sets x {self.line_bytes} B lines "
                    f"!= {size} B (sets must be a whole power of two)"
                )
        if not pow2(self.banks) or not pow2(self.row_bytes) or self.row_bytes < self.line_bytes:
            raise UserError(f"banks ({self.banks}) and row_bytes ({self.row_bytes}) must be powers of two, rows >= one line")
        if not self.full_atd and (not pow2(self.atd_sampled_sets) or self.atd_sampled_sets > self.llc_sets):
            raise UserError(
                f"atd_sampled_sets={self.atd_sampled_sets} must be a power of two no larger than the LLC's {self.llc_sets} sets"
            )
        if self.atd_sets not in ("spread", "aligned"):
            raise UserError(f"atd_sets={self.atd_sets!r}: use spread (set i*stride + i) or aligned (set i*stride)")
        if self.wait_model not in ("thesis", "shadow", "rule-d"):
            raise UserError(f"wait_model={self.wait_model!r}: use thesis (MSHR waiting counters), shadow or rule-d")
        if self.spin_limit < 0 or self.spin_detect < 0 or self.wake_cycles < 0:
            raise UserError("spin_limit, spin_detect and wake_cycles must be non-negative cycles")
        if self.mshrs < 1 or self.mshrs > 256 or self.rob_size < 1 or self.dispatch_width < 1:
            raise UserError("mshrs must be 1..256, rob_size and dispatch_width positive")
        return self

    def replace(self, **kw: Any) -> HwConfig:
        return dataclasses.replace(self, **kw).validate()

    def params(self) -> np.ndarray:
        """Integer parameter vector for the compiled kernel (see engine.P_* indices)."""
        dram_cyc = self.freq_ghz * 1000.0 / self.dram_mhz  # core cycles per DRAM cycle
        burst = self.line_bytes / self.bus_bytes  # transfers per line
        bus_cyc = int(round(burst * self.freq_ghz * 1000.0 / self.bus_mts))
        sampled = self.llc_sets if self.full_atd else self.atd_sampled_sets
        return np.array(
            [
                int(np.log2(self.line_bytes)),
                self.l1_sets, self.l1_ways, self.llc_sets, self.llc_ways,
                self.llc_latency, self.mshrs, self.dispatch_width, self.rob_size,
                self.banks, int(np.log2(self.row_bytes)),
                int(round(self.t_rp * dram_cyc)), int(round(self.t_rcd * dram_cyc)), int(round(self.t_cl * dram_cyc)),
                bus_cyc, int(self.fixed_latency), int(round(self.fixed_latency_ns * self.freq_ghz)),
                int(self.prefetch), self.prefetch_degree, sampled, {"thesis": 0, "shadow": 1, "rule-d": 3}[self.wait_model],
                self.spin_limit, self.spin_detect, self.wake_cycles,
                int(self.sync_free), int(self.llc_partition), int(self.private_memory), 0,
                int(self.atd_sets == "spread"), int(self.inter_wait_to_memory),
            ],
            dtype=np.int64,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(field: dataclasses.Field, raw: Any) -> Any:
    typ = field.type if isinstance(field.type, str) else field.type.__name__
    if typ == "str":
        return str(raw)
    if typ == "bool":
        if isinstance(raw, str):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise UserError(f"{field.name}: expected true/false, got {raw!r}")
        return bool(raw)
    try:
        return int(raw) if typ == "int" else float(raw)
    except (TypeError, ValueError):
        raise UserError(f"{field.name}: expected a number, got {raw!r}") from None


def make_config(values: dict[str, Any] | None = None, base: HwConfig | None = None) -> HwConfig:
    """A validated config from a dict of overrides; unknown keys are refused by name."""
    fields = {f.name: f for f in dataclasses.fields(HwConfig)}
    kw = {}
    for key, raw in (values or {}).items():
        key = key.replace("-", "_")
        if key not in fields:
            raise UserError(f"unknown hwsim parameter {key!r}; known: {', '.join(sorted(fields))}")
        kw[key] = _coerce(fields[key], raw)
    return dataclasses.replace(base or HwConfig(), **kw).validate()


def load_config(path: str | Path) -> HwConfig:
    """Read a YAML or JSON file of `key: value` machine parameters."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise UserError(f"cannot read config {p}: {e.strerror}") from None
    if p.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a mapping of parameter: value")
    data.pop("traces", None)
    return make_config(data)
