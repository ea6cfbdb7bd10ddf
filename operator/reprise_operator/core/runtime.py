"""What every handler shares in one operator process: settings, the Kubernetes door, the Kafka doors, the
Kafka pool their blocking calls run on, and the count of active resources the chart's limits apply to.

Built once at start by `__main__` and handed to the handlers through Kopf's memo, so tests can build
their own with a real API server and a real broker. The Kafka doors are sized from the settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..doors.handover_state import HandoverReaders
from ..doors.kafka_admin import KafkaClusters
from ..shared.kafka_pool import KafkaPool
from ..doors.kube import Kube
from ..shared.metrics import Heartbeat
from ..rules.namespace_limit import ActiveResources
from ..shared.settings import OperatorSettings


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: Kube
    kafka_pool: KafkaPool = field(init=False)
    clusters: KafkaClusters = field(init=False)
    handovers: HandoverReaders = field(init=False)
    active: ActiveResources = field(init=False)
    heartbeat: Heartbeat = field(default_factory=lambda: Heartbeat(stale_after=120.0))

    def __post_init__(self) -> None:
        s = self.settings
        self.kafka_pool = KafkaPool(s.kafka_threads, s.kafka_threads_per_namespace)
        self.clusters = KafkaClusters(
            self.kafka_pool,
            limit=s.kafka_connections,
            idle_seconds=s.kafka_idle_seconds,
            offset_readers=s.offset_readers,
        )
        self.handovers = HandoverReaders(self.kafka_pool, limit=s.handover_readers, idle_seconds=s.kafka_idle_seconds)
        self.active = ActiveResources(s.max_active_per_namespace, s.max_active)

    def sweep_idle(self) -> int:
        """Close the Kafka connections and handover readers nobody used for the idle time; how many."""
        return self.clusters.sweep() + self.handovers.sweep()
