"""The handover guard, the live side (Java `io.reprise.kafka.guard`, Go `guard`): `consumer.GuardedConsumer`,
the drop-in a service wraps its confluent-kafka consumer loop with, around the pure `guard_book.GuardBook`.

A service imports it from here: `from replay_worker.guard import GuardedConsumer`.
"""

from .consumer import GuardedConsumer, GuardStats

__all__ = ["GuardStats", "GuardedConsumer"]
