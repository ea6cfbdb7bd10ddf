"""A Reconsume over Avro values whose schema registry URL is wrong, on the real platform: the operator asks the
registry at plan time and the resource waits in status with the field named, before any pod or replay group
exists (HANDOVER.md section 4, "Schemas"; docs/schemas.md)."""

from __future__ import annotations

import json

import pytest

from local_platform.schema_registry import SchemaRegistry
from tests.fixtures.kube import wait_for

from .scenario import PARTITIONS, apply, reconsume
from .test_reconsume_children import condition

pytestmark = pytest.mark.integration


def test_a_wrong_registry_url_waits_at_plan_time_with_the_field_named(
    kube, kafka, operator, schema_registry: SchemaRegistry, namespace, topic_name, tmp_path
):
    kafka.create_topic(topic_name, PARTITIONS)
    body = reconsume(
        "avro-wrong-registry",
        kafka.bootstrap,
        topic_name,
        "Handover",
        "accounts",
        str(tmp_path),
        format={"value": "avro"},
        # Apicurio's own base URL, without the Confluent-compatible API's path.
        schemaRegistry={"url": schema_registry.base},
        filter={"jsonFields": [{"path": "region", "values": ["eu"]}]},
    )
    apply(kube, namespace, body)
    waiting = wait_for(
        lambda: (c := condition(kube, namespace, "avro-wrong-registry", "Waiting")) and c["status"] == "True" and c,
        90,
        "the Waiting condition",
    )
    assert waiting["reason"] == "SchemaRegistryUnreachable", waiting
    assert waiting["message"].startswith("spec.schemaRegistry.url: GET ") and "HTTP 404" in waiting["message"]
    deployments = json.loads(kube.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout)["items"]
    assert deployments == [], "no replay pod may start before the registry answers"
