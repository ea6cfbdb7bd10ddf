"""Fixtures of the operator's end-to-end tests."""

from __future__ import annotations

from pathlib import Path

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


@pytest.fixture(scope="session")
def jvm_image():
    """The JVM example service (examples/accounts-jvm) built with this checkout's Java library into a local
    image the node agent runs (once per source change; the build is cached)."""
    from local_platform.jvm_image import build_jvm_image

    from .handover_scenario import JVM_IMAGE

    return build_jvm_image(Path(__file__).resolve().parents[3] / "examples" / "accounts-jvm", JVM_IMAGE)


@pytest.fixture(scope="session")
def go_image():
    """The Go example service (examples/seed003-go) built with this checkout's Go module (`go build`) into a local
    image the node agent runs (once per source change; the build is cached)."""
    from local_platform.go_image import build_go_image

    from .handover_scenario import GO_IMAGE

    return build_go_image(Path(__file__).resolve().parents[3] / "examples" / "seed003-go", GO_IMAGE)
