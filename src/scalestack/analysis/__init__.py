"""Estimators over a Trace: each takes a Trace and parameters and returns a frozen Result."""
