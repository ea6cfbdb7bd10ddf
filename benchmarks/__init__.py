"""Benchmarks: `make bench` (`python -m benchmarks`) runs every benchmark module here; see __main__.py.

Not benchmarks themselves: `measure` (how a loop is measured: its own process, getrusage and the broker's
/proc, interleaved rounds, median and spread), `baselines` (the same work written by hand with plain
confluent-kafka loops) and `handlers` (the record handlers both sides call).
"""
