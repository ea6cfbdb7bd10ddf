"""Reprise: a Kubernetes operator that reprocesses Kafka history.

`api` holds the typed models of the three custom resources (Reconsume, Backfill, LakeReplay) and the
generator of their CRDs; the rest of the package is the Kopf operator that reconciles them.
"""
