"""Reconsume's pure rules: the replay group, the start request, the worker's filter and settings.

`steps` does the I/O around them; nothing here talks to an API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from replay_worker.contract import FilterSpec, StartSpec, WorkerSettings

from ...api import ReconsumeSpec
from ...api.common import Filter, RecordEncoding, RecordFormat, SchemaRegistryConnection
from ...core.standby import (
    require_delivery,
)
from ...doors.kafka_admin import TopicPartitionKey
from ...rules.planning import start_spec
from ...rules.workloads import KAFKA_CONFIG_DIR
from ...shared.constants import (
    replay_group_name,
)


def replay_group_of(spec: ReconsumeSpec, namespace: str, name: str) -> tuple[str, str]:
    """The replay group of a Parallel or Handover replay, and the field it comes from (for messages)."""
    if spec.replay_group is not None:
        return spec.replay_group, "spec.replayGroup"
    return replay_group_name(namespace, name), "spec.replayGroup (unset: the default name)"


def start_request(spec: ReconsumeSpec, now: datetime) -> StartSpec:
    """`spec.start` as the replay contract's StartSpec (the rule the workers bootstrap with), or PlanError."""
    return start_spec(spec.start, now)


def worker_filter(
    api_filter: Filter | None,
    record_format: RecordFormat | None = None,
    registry: SchemaRegistryConnection | None = None,
) -> FilterSpec:
    """The API's filter in the worker's terms (the worker and the guard evaluate the same spec), with the
    values' format and the registry to read them with when they are not JSON."""
    body: dict[str, Any] = {}
    if record_format is not None and record_format.value is not RecordEncoding.JSON:
        body["valueFormat"] = record_format.value.value
        if registry is not None:
            body["registry"] = registry.url
    if api_filter is None:
        return FilterSpec.parse(body, "spec.filter")
    if api_filter.headers:
        body["headers"] = {name: list(values) for name, values in api_filter.headers.items()}
    if api_filter.keys:
        body["keys"] = list(api_filter.keys)
    if api_filter.json_fields:
        body["json"] = [{"path": m.path, "in": list(m.values)} for m in api_filter.json_fields]
    return FilterSpec.parse(body, "spec.filter")


def replay_settings(
    *,
    spec: ReconsumeSpec,
    rid: str,
    group: str,
    plan_starts: dict[TopicPartitionKey, int],
    handover_topic: str,
    delivery: dict[str, str],
    has_secret: bool,
    follow: bool = False,
) -> WorkerSettings:
    """The replay workers' settings: the plan's exact start offsets, so plan and replay agree to the offset."""
    offsets: dict[str, dict[int, int]] = {}
    for (topic, partition), offset in plan_starts.items():
        offsets.setdefault(topic, {})[partition] = offset
    require_delivery(delivery)
    return WorkerSettings(
        bootstrap_servers=spec.kafka.bootstrap_servers,
        replay_id=rid,
        topics=tuple(spec.topics),
        role="replay",
        mode=spec.mode.value,
        replay_group=group,
        live_group=spec.consumer_group,
        start=StartSpec("offsets", offsets=offsets),
        allow_clamp=spec.start.allow_clamp,
        filter=worker_filter(spec.filter, spec.format, spec.schema_registry),
        handler=delivery.get("REPRISE_HANDLER"),
        forward_topic=delivery.get("REPRISE_FORWARD_TOPIC"),
        handover_topic=handover_topic,
        kafka_config_dir=KAFKA_CONFIG_DIR if has_secret else None,
        follow=follow,
    )
