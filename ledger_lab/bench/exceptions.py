"""Errors of the benchmark. Each message says which arm or step failed and why."""


class BenchError(Exception):
    """A benchmark step that could not run (broker, processor or database misbehaving)."""
