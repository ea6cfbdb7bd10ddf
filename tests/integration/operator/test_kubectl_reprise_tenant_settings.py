"""`kubectl reprise plan -f` and `rollback` run none of a tenant's file or URL settings on the person's machine
(issue 26, C1): a platform engineer who plans a tenant's manifest (reviewing a pull request) or rolls back a
tenant's Rewind reads the tenant's Secret with their own kube credentials, and before the allow-list the
plugin handed every key to librdkafka locally. The attack: OAUTHBEARER OIDC with the jwt-bearer grant,
`sasl.oauthbearer.assertion.file` = the person's kubeconfig, and a token endpoint of the tenant's choosing
(a loopback listener). Now the command fails with one line naming the key, and the listener receives nothing.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.fixtures.token_listener import TokenListener, token_listener

from .scenario import apply, reconsume
from .test_kubectl_reprise import kubectl_reprise, write_manifest

pytestmark = pytest.mark.integration


def hostile_secret(kube, namespace: str, listener: TokenListener) -> str:
    """A labelled Secret whose OIDC setup would send the person's kubeconfig to the listener."""
    apply(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hostile-kafka-client", "labels": {"reprise.io/kafka-client": "true"}},
            "stringData": {
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                "sasl.oauthbearer.assertion.file": str(kube.kubeconfig),
                "sasl.oauthbearer.token.endpoint.url": listener.url,
                "sasl.oauthbearer.client.id": "x",
            },
        },
    )
    return "hostile-kafka-client"


def assert_refused_and_nothing_sent(result, kube, listener: TokenListener, prefix: str) -> None:
    if listener.received:
        raise AssertionError(
            f"the plugin POSTed {len(listener.received)} request(s) to the tenant's endpoint, the assertion being "
            f"the person's kubeconfig ({sum(len(a) for a in listener.assertions())} characters; it begins "
            f"{listener.assertions()[0][:40]!r}); exit status {result.returncode}, stderr: {result.stderr[-300:]}"
        )
    assert result.returncode == 1, result.stdout + result.stderr
    error = result.stderr.strip().splitlines()
    assert len(error) == 1, result.stderr
    assert error[0].startswith(f"{prefix}ForbiddenKafkaSetting: "), error[0]
    assert "key sasl.oauthbearer.assertion.file " in error[0]
    for value in (str(kube.kubeconfig), listener.url, "jwt-bearer"):
        assert value not in result.stdout + result.stderr, value


def test_plan_refuses_a_hostile_secret_and_sends_nothing(kube, kafka, namespace, topic_name, tmp_path):
    kafka.create_topic(topic_name, 1)
    with token_listener() as listener:
        body = reconsume("hostile-plan", kafka.bootstrap, topic_name, "Rewind", "accounts", str(tmp_path))
        body["spec"]["kafka"]["configFrom"] = {"secretRef": {"name": hostile_secret(kube, namespace, listener)}}
        manifest = write_manifest(tmp_path, body)

        result = kubectl_reprise(kube, "plan", "-f", str(manifest), "-n", namespace)

        assert_refused_and_nothing_sent(result, kube, listener, "error: plan refused: ")


def test_rollback_refuses_a_hostile_secret_and_sends_nothing(kube, kafka, operator, namespace, topic_name, tmp_path):
    """The Reconsume and its rollback ConfigMap as a Rewind leaves them; the suite's operator is stopped
    meanwhile, so that only the plugin could read the Secret (the operator's side is the chart suite's test)."""
    kafka.create_topic(topic_name, 1)
    operator.stop()
    try:
        with token_listener() as listener:
            body = reconsume("hostile-rewind", kafka.bootstrap, topic_name, "Rewind", "accounts", str(tmp_path))
            body["spec"]["kafka"]["configFrom"] = {"secretRef": {"name": hostile_secret(kube, namespace, listener)}}
            apply(kube, namespace, body)
            uid = json.loads(kube.kubectl("get", "reconsume", "hostile-rewind", "-n", namespace, "-o", "json").stdout)[
                "metadata"
            ]["uid"]
            kube.kubectl(
                "apply",
                "-n",
                namespace,
                "-f",
                "-",
                input=yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": "hostile-rewind-rollback",
                            # As the operator writes it for this Reconsume (the plugin refuses any other).
                            "annotations": {
                                "reprise.io/consumer-group": "accounts-group",
                                "reprise.io/created-for": uid,
                            },
                        },
                        "data": {"offsets.json": json.dumps([{"topic": topic_name, "partition": 0, "offset": 0}])},
                    }
                ),
            )

            result = kubectl_reprise(kube, "rollback", "hostile-rewind", "-n", namespace, "--yes")

            assert_refused_and_nothing_sent(result, kube, listener, "error: ")
    finally:
        kube.kubectl("delete", "reconsume", "hostile-rewind", "-n", namespace, "--ignore-not-found", check=False)
        operator.start()
