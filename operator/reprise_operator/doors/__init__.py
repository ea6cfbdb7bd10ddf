"""The doors: one module per external system (Kubernetes, Kafka admin, the handover topic, the Lease,
Debezium). Only these talk to the outside; everything above reaches it through them.
"""
