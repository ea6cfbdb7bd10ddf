"""A Reconsume over Avro values whose schema registry URL is wrong, on the real platform: the operator asks the
registry at plan time and the resource waits in status with the field named, before any pod or replay group
exists (HANDOVER.md section 4, "Schemas"; docs/schemas.md)."""

from __future__ import annotations

import json

import pytest

from local_platform.processes import free_port
from tests.fixtures.kube import wait_for

from .scenario import PARTITIONS, apply, reconsume
from .test_reconsume_children import condition

pytestmark = pytest.mark.integration


def test_a_wrong_registry_url_waits_at_plan_time_with_the_field_named(
    kube, kafka, operator, namespace, topic_name, tmp_path
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
        # Nothing listens there (a wrong path of a real registry is the door's test: test_registry_platform.py);
        # no registry is started in this worker for it.
        schemaRegistry={"url": f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"},
        filter={"jsonFields": [{"path": "region", "values": ["eu"]}]},
    )
    apply(kube, namespace, body)
    waiting = wait_for(
        lambda: (c := condition(kube, namespace, "avro-wrong-registry", "Waiting")) and c["status"] == "True" and c,
        90,
        "the Waiting condition",
    )
    assert waiting["reason"] == "SchemaRegistryUnreachable", waiting
    assert waiting["message"].startswith("spec.schemaRegistry.url: the schema registry at http://127.0.0.1:")
    assert "cannot be reached" in waiting["message"]
    deployments = json.loads(kube.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout)["items"]
    assert deployments == [], "no replay pod may start before the registry answers"
