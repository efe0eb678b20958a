"""The Trace: one exact record of a multi-threaded run, and everything that builds and keeps it.

`model` is the data model every analysis reads (threads, state intervals, names, samples);
`events` the raw kernel events every collector and importer produces; `builder` turns events
into state intervals (with `switch_spans`, `futex_wakers` and the repair passes);
`kernel_accounting` checks a Trace against the kernel's own per-thread figures; `store` saves
and loads it; `roles` names thread roles. This package imports no analysis: analyses import it.
"""

from scalestack.trace.model import (
    SCHEMA_VERSION,
    STATE_NAMES,
    FrameTable,
    FutexCallTable,
    NameTable,
    SampleTable,
    StackTable,
    State,
    StateTable,
    SwitchSpanTable,
    ThreadTable,
    Trace,
    make_trace,
)

__all__ = ["SCHEMA_VERSION", "STATE_NAMES", "FrameTable", "FutexCallTable", "NameTable", "SampleTable", "StackTable",
           "State", "StateTable", "SwitchSpanTable", "ThreadTable", "Trace", "make_trace"]
