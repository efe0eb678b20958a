"""Recording a live program: one entry point (`record.record`) choosing a collector (perf, eBPF,
tracefs), the in-kernel aggregator, and thread-count sweeps."""
