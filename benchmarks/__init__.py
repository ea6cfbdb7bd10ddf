"""Benchmarks: `make bench` (`python -m benchmarks`) runs every module here; see __main__.py."""
