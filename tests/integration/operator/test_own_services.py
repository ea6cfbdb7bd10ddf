"""A user's own service, in Python, Java and Go, written from docs/own-service.md alone (`own_services/`), runs
on `make run`'s platform (the fixtures start the same one) and hands a Handover replay over exactly (issue 32,
item 8).

Each service is built and published as the page says: the Python folder with `python -m
local_platform.local_images`, the Maven project with `python -m local_platform.jvm_image` (a pom of its own,
not the example's), the Go main package with `python -m local_platform.go_image` (its go.mod requires
`reprise.io/kafka` and replaces it with this checkout). Their image names have no `reprise` in them: a
published image runs. The Reconsume clones the service's Deployment; Java and Go keep its command
(`entrypoint: Service`, their replay role), Python runs Reprise's worker with the service's `orders:handle`.

No faults here (test_jvm_handover_e2e.py and test_go_handover_e2e.py inject them into the examples): the
services' ledgers are checked the same way, from the first skipped offset on, none processed by both groups,
none lost, no repeat at all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reprise_operator.shared.constants import replay_group_name

from .handover_scenario import (
    HISTORY,
    JAVA_OPTIONS,
    RATE,
    GroupLedger,
    assert_exactly_once,
    check_exactly_once,
    handover_reconsume,
    keep_producing_events,
    produce_events,
    replay_client_secret,
    service_deployment,
)
from .scenario import HANDOVER_TOPIC_ENV, PARTITIONS, apply, assert_children_gone, wait_caught_up, wait_phase

pytestmark = pytest.mark.integration

OWN = Path(__file__).resolve().parent / "own_services"
GROUP = "orders"
IMAGES = {"python": "my-team/orders-py:dev", "java": "my-team/orders-jvm:dev", "go": "my-team/orders-go:dev"}
COMMANDS = {
    "python": ["python", "/app/orders.py"],
    "java": ["java", "-cp", "/app/*:/app/lib/*", "com.example.orders.Orders"],
    "go": ["/app/orders-go"],
}


def publish(language: str) -> None:
    """The page's command for each language, run as a user would (a process of its own)."""
    module, folder = {
        "python": ("local_platform.local_images", OWN / "orders-py"),
        "java": ("local_platform.jvm_image", OWN / "orders-jvm"),
        "go": ("local_platform.go_image", OWN / "orders-go"),
    }[language]
    args = [folder, IMAGES[language]] if language != "python" else [IMAGES[language], folder]
    done = subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr


def container(language: str, bootstrap: str, topic: str, ledger: Path) -> dict:
    env = [
        {"name": "ORDERS_BOOTSTRAP_SERVERS", "value": bootstrap},
        {"name": "ORDERS_GROUP", "value": GROUP},
        {"name": "ORDERS_TOPIC", "value": topic},
        {"name": "ORDERS_LEDGER_DIR", "value": str(ledger)},
        *HANDOVER_TOPIC_ENV,  # the guard reads this namespace's handover topic, as docs/own-service.md says
    ]
    if language == "python":
        env.append({"name": "PYTHONPATH", "value": "/app"})
    if language == "java":
        env.append({"name": "JAVA_TOOL_OPTIONS", "value": JAVA_OPTIONS})
    return {"name": "app", "image": IMAGES[language], "command": COMMANDS[language], "env": env}


def replay_consumer(language: str) -> dict:
    consumer: dict = {"deploymentRef": {"name": "orders"}, "replicas": 2, "env": []}
    if language == "python":
        consumer["env"].append({"name": "REPRISE_HANDLER", "value": "orders:handle"})
    else:
        consumer["entrypoint"] = "Service"
    consumer["env"].append({"name": "REPRISE_BATCH_SIZE", "value": "50"})
    return consumer


@pytest.mark.parametrize("language", ["python", "go", "java"])
def test_a_service_written_from_the_docs_hands_over_exactly(
    kube, kafka, operator, namespace, topic_name, tmp_path, language
):
    publish(language)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    kafka.create_topic(topic_name, PARTITIONS)
    produce_events(kafka.bootstrap, topic_name, HISTORY)
    # One live replica: a rebalance of the live group repeats what a replica had not committed, which this
    # check would count; the replay runs two.
    apply(kube, namespace, service_deployment("orders", container(language, kafka.bootstrap, topic_name, ledger), 1))
    try:
        wait_caught_up(kafka.bootstrap, GROUP, topic_name, PARTITIONS, timeout=240)
        replay_client_secret(kube, namespace)
        with keep_producing_events(kafka.bootstrap, topic_name) as producer:
            body = handover_reconsume("handover", kafka.bootstrap, topic_name, GROUP, replay_consumer(language), RATE)
            apply(kube, namespace, body)
            finished = wait_phase(kube, namespace, "reconsume", "handover", "Complete", 420, operator)
        assert producer.written > 0
        ends = wait_caught_up(kafka.bootstrap, GROUP, topic_name, PARTITIONS, timeout=180)
        read = GroupLedger.read(ledger, topic_name, GROUP)
        verdict = check_exactly_once(read, ends, killed=set())
        assert_exactly_once(verdict, per_killed_process=0)
        assert verdict.repeats == {"L": 0, "R": 0}, verdict.summary()
        assert read.groups == {GROUP, replay_group_name(namespace, "handover")}, read.groups
        partitions = finished["status"]["progress"]["partitions"]
        assert all(p["state"] == "HandedOver" for p in partitions), partitions
        assert all(read.sides["R"].get(p["partition"]) for p in partitions), "the replay processed nothing somewhere"
        assert_children_gone(kube, kafka, namespace, "handover", replay_group_name(namespace, "handover"), topic_name)
        print(f"{language}: {verdict.summary()}")
    finally:
        kube.kubectl("delete", "deployment", "orders", "-n", namespace, "--ignore-not-found", "--timeout=120s")
