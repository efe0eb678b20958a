"""Trace-driven multicore memory-hierarchy simulator with per-thread cycle accounting.

Thesis chapter 6.2 (counter architecture for per-thread cycle accounting) reproduced in
software: `account()` runs threads together, estimates each one's isolated time from the
counters and replays each alone for the ground truth (eq. 6.5).
"""

from scalestack.hwsim.accounting import AccountingResult, ThreadAccount, account, isolated_cycles
from scalestack.hwsim.config import HwConfig, load_config, make_config
from scalestack.hwsim.traces import (
    MemTrace,
    convert_lackey,
    from_arrays,
    generate,
    mix,
    read_text,
    write_text,
)

__all__ = [
    "AccountingResult", "HwConfig", "MemTrace", "ThreadAccount", "account", "convert_lackey", "from_arrays",
    "generate", "isolated_cycles", "load_config", "make_config", "mix", "read_text", "write_text",
]
