"""Pure rules: what the operator decides from specs, statuses and observations, with no I/O.

Unit-tested without a broker or an API server; the kinds and the core call them.
"""
