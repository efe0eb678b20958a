"""The workload simulator: threads, locks, barriers and frequencies with known answers, for
validating every estimator against ground truth."""
