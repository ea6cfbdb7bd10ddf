"""Fixtures of the operator's end-to-end tests."""

from __future__ import annotations

import pytest

from .scenario import HISTORY, PARTITIONS, apply, live_deployment, produce, wait_caught_up


@pytest.fixture
def live_service(kube, kafka, namespace, topic_name, tmp_path):
    """History in a 3-partition topic and a guarded live service that has consumed all of it."""
    kafka.create_topic(topic_name, PARTITIONS)
    produce(kafka.bootstrap, topic_name, HISTORY)
    out = tmp_path / "processed"
    out.mkdir()
    apply(kube, namespace, live_deployment("accounts", kafka.bootstrap, "accounts-group", topic_name, out))
    wait_caught_up(kafka.bootstrap, "accounts-group", topic_name, PARTITIONS)
    return out
