"""What every layer may use: names and labels, the operator's settings, its metrics, the Kafka thread pool
and the connection cache. Imports nothing else of the operator.
"""
