"""The Kubernetes door (`reprise_operator.doors.kube`) on the real API server: the Kafka Secret cached by its
resourceVersion, and the leader Lease read and written only through the door.

The spy below wraps the real client's method (it calls through to the API server and only counts), so what
is asserted is how often the door asks, not what a stand-in answers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reprise_operator.doors import kube as kube_door
from reprise_operator.doors.leadership import LEASE_NAME, Leadership
from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration


class CountingCalls:
    """Calls through to the real method; remembers whether each call asked for metadata only."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[str] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        accept = (kwargs.get("_headers") or {}).get("Accept", "")
        self.calls.append("metadata" if "PartialObjectMetadata" in accept else "full")
        return self.real(*args, **kwargs)


@pytest.fixture
def door(kube):
    api_client = kube.api_client()
    try:
        yield kube_door.Kube(api_client)
    finally:
        api_client.close()


LABEL = "reprise.io/kafka-client"


def test_the_kafka_secret_is_read_again_only_when_its_resource_version_moves(kube, namespace, door, monkeypatch):
    kube.kubectl(
        "create",
        "secret",
        "generic",
        "kafka-client",
        "-n",
        namespace,
        "--from-literal=security.protocol=SASL_SSL",
        "--from-literal=sasl.password=first",
    )
    kube.kubectl("label", "secret", "kafka-client", "-n", namespace, f"{LABEL}=true")
    spy = CountingCalls(door.core.read_namespaced_secret)
    monkeypatch.setattr(door.core, "read_namespaced_secret", spy)

    # The first read looks at the label (metadata only) before it reads any value.
    assert door.secret_data(namespace, "kafka-client", LABEL) == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "first",
    }
    assert spy.calls == ["metadata", "full"]
    # Every poll of every replay calls this: within the recheck interval it costs no request at all.
    assert door.secret_data(namespace, "kafka-client", LABEL)["sasl.password"] == "first"
    assert spy.calls == ["metadata", "full"]

    # Past the interval: only the metadata is read, and the values are kept while the resourceVersion holds.
    monkeypatch.setattr(kube_door, "SECRET_RECHECK_S", 0.0)
    assert door.secret_data(namespace, "kafka-client", LABEL)["sasl.password"] == "first"
    assert spy.calls == ["metadata", "full", "metadata"]

    # A rotated Secret moves its resourceVersion: the next check reads the new values.
    kube.kubectl(
        "patch",
        "secret",
        "kafka-client",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"stringData": {"sasl.password": "second"}}),
    )
    assert door.secret_data(namespace, "kafka-client", LABEL)["sasl.password"] == "second"
    assert spy.calls == ["metadata", "full", "metadata", "metadata", "full"]

    # Its owner takes the label off: refused at the next check, and the cached values are dropped.
    kube.kubectl("label", "secret", "kafka-client", "-n", namespace, f"{LABEL}-")
    with pytest.raises(kube_door.SecretNotLabelled):
        door.secret_data(namespace, "kafka-client", LABEL)
    assert door._secrets == {}
    kube.kubectl("label", "secret", "kafka-client", "-n", namespace, f"{LABEL}=true")

    # A deleted Secret is noticed at the next check (the caller then waits with SecretNotFound).
    kube.kubectl("delete", "secret", "kafka-client", "-n", namespace)
    assert door.secret_data(namespace, "kafka-client", LABEL) is None


def test_an_unlabelled_secret_is_refused_and_its_values_never_read(kube, namespace, door, monkeypatch):
    kube.kubectl("create", "secret", "generic", "not-for-reprise", "-n", namespace, "--from-literal=password=hidden")
    spy = CountingCalls(door.core.read_namespaced_secret)
    monkeypatch.setattr(door.core, "read_namespaced_secret", spy)
    with pytest.raises(kube_door.SecretNotLabelled) as refused:
        door.secret_data(namespace, "not-for-reprise", LABEL)
    assert spy.calls == ["metadata"], "only the metadata was read: no value crossed the wire"
    assert "hidden" not in str(refused.value) and f"{LABEL}=true" in str(refused.value)


def test_the_metadata_check_carries_no_secret_values(kube, namespace, door):
    kube.kubectl("create", "secret", "generic", "kafka-client", "-n", namespace, "--from-literal=sasl.password=hidden")
    meta = door._read(door.core.read_namespaced_secret, "kafka-client", namespace, headers=kube_door._METADATA_ONLY)
    assert meta is not None and meta["metadata"]["resourceVersion"]
    assert "data" not in meta and "hidden" not in json.dumps(meta)


def test_the_leader_lease_goes_through_the_door(kube, namespace, door):
    first = Leadership(door, namespace, identity="replica-a", duration_seconds=1)
    second = Leadership(door, namespace, identity="replica-b", duration_seconds=1)

    assert first._try_acquire()
    lease = door.get_lease(namespace, LEASE_NAME)
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
    assert lease["spec"]["leaseTransitions"] == 0
    assert first._try_acquire()  # the holder renews

    # The other replica takes over only once the holder stopped renewing and the Lease lapsed.
    wait_for(second._try_acquire, 60, "the Lease to lapse and replica-b to take it", interval=0.5)
    taken = door.get_lease(namespace, LEASE_NAME)
    assert taken is not None and taken["spec"]["holderIdentity"] == "replica-b"
    assert taken["spec"]["leaseTransitions"] == 1

    # A write from a stale read fails instead of overwriting (the resourceVersion guards it).
    stale = {
        "metadata": {"name": LEASE_NAME, "resourceVersion": lease["metadata"]["resourceVersion"]},
        "spec": {"holderIdentity": "replica-a"},
    }
    assert door.replace_lease(namespace, LEASE_NAME, stale) is False
