"""What every handler shares in one operator process: settings, the Kubernetes door, the Kafka doors.

Built once at start by `__main__` and handed to the handlers through Kopf's memo, so tests can build
their own with a real API server and a real broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .handover_state import HandoverReaders
from .kafka_admin import KafkaClusters
from .kube import Kube
from .metrics import Heartbeat
from .settings import OperatorSettings


@dataclass
class Runtime:
    settings: OperatorSettings
    kube: Kube
    clusters: KafkaClusters = field(default_factory=KafkaClusters)
    handovers: HandoverReaders = field(default_factory=HandoverReaders)
    heartbeat: Heartbeat = field(default_factory=lambda: Heartbeat(stale_after=120.0))
