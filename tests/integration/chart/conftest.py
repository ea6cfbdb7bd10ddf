"""The chart installed with `helm install` into the local API server, its operator running as a pod.

The node agent runs the operator pod (image `reprise:dev`, no command: the image's ENTRYPOINT
`python -m reprise_operator`) as a local process whose kubeconfig holds a token bound to the pod's
ServiceAccount, so every API call the operator makes is authorised by the chart's RBAC, as in a cluster.

Both namespaces (the release's and the workloads') enforce the `restricted` Pod Security Standard.
The suite's own operator (`tests.fixtures.operator`, admin credentials) is stopped while the chart's
operator runs, so nothing the chart's operator fails to do is done for it by the other one.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from local_platform.processes import free_port
from tests.fixtures.kube import Kube, wait_for

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "reprise"
RELEASE = "reprise"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def restricted_namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", name)
    kube.kubectl("label", "namespace", name, *[f"{k}={v}" for k, v in RESTRICTED.items()])
    wait_for(
        lambda: kube.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        30,
        f"the default ServiceAccount of {name}",
    )
    return name


@dataclass
class Installed:
    """One release of the chart and where its operator runs."""

    kube: Kube
    namespace: str
    apps: str
    release: str
    metrics_port: int
    service_account: str

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def operator_pod(self) -> str:
        pods = json.loads(
            self.kube.kubectl(
                "get", "pods", "-n", self.namespace, "-l", "app.kubernetes.io/component=operator", "-o", "json"
            ).stdout
        )["items"]
        running = [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert len(running) == 1, f"expected one operator pod, got {running}"
        return running[0]

    def operator_log(self) -> str:
        return self.kube.container_log(self.namespace, self.operator_pod(), "operator")

    def can_i(self, *args: str) -> bool:
        proc = self.kube.kubectl("auth", "can-i", *args, f"--as={self.subject}", check=False)
        answer = proc.stdout.strip()
        assert answer in ("yes", "no"), f"kubectl auth can-i {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return answer == "yes"


#: The peers the chart requires with its default NetworkPolicy: on the local platform the API server and the broker
#: listen on loopback (and no CNI enforces the policy; the chart's rendering of it is what is tested here).
LOCAL_PEERS = {
    "apiServerPeers": [{"ipBlock": {"cidr": "127.0.0.1/32"}}],
    "kafkaPeers": [{"ipBlock": {"cidr": "127.0.0.1/32"}}],
}


#: The chart's Kafka prefix policy installed but admitting every group and topic, and resources without configFrom:
#: the chart suite's resources use the broker's PLAINTEXT listener and groups of any name. The policy's refusals are
#: tested on the multi-tenant platform (tests/integration/operator/test_tenant_isolation.py).
OPEN_KAFKA = {"allowAnonymous": True, "prefixes": {"groups": [""], "topics": [""]}}


def helm_install(kube: Kube, release: str, namespace: str, values: dict, tmp: Path, *extra: str) -> None:
    path = tmp / f"{release}-values.yaml"
    path.write_text(yaml.safe_dump({"networkPolicy": LOCAL_PEERS, "kafka": OPEN_KAFKA, **values}))
    kube.helm("install", release, str(CHART), "--namespace", namespace, "--values", str(path), *extra)


@pytest.fixture(scope="module")
def installed(kube: Kube, kafka, operator, tmp_path_factory) -> Iterator[Installed]:
    """`helm install` with the chart's defaults plus: the dev image, free metrics and webhook ports (pods share
    the host's network here), the webhook called by URL, a one-second poll. Leader election stays on, so the Lease RBAC is exercised."""
    from local_platform.spark_operator import install_sparkapplication_crd

    api = kube.api_client()
    try:  # the real SparkApplication CRD, so its RBAC rule names a resource the API server serves
        install_sparkapplication_crd(api)
    finally:
        api.close()
    operator.stop()
    namespace = restricted_namespace(kube, "reprise-system")
    apps = restricted_namespace(kube, "reprise-apps")
    port, webhook_port = free_port(), free_port()
    values = {
        "image": {"repository": "reprise", "tag": "dev", "pullPolicy": "Never"},
        "operator": {"pollInterval": 1, "metricsPort": port},
        # Pods share the host's network and there is no Service routing here: the API server calls the
        # operator pod's webhook port on 127.0.0.1 (the node agent keeps a declared port that is free).
        "admission": {"port": webhook_port, "url": f"https://127.0.0.1:{webhook_port}"},
    }
    tmp = tmp_path_factory.mktemp("chart")
    result = Installed(kube, namespace, apps, RELEASE, port, RELEASE)
    try:
        helm_install(kube, RELEASE, namespace, values, tmp, "--wait", "--timeout", "180s")
        wait_for(
            lambda: "reprise operator watching" in result.operator_log(), 120, "the chart's operator to start watching"
        )
        yield result
    finally:
        try:
            log = result.operator_log()
        except AssertionError:
            log = ""
        (tmp / "operator.log").write_text(log)
        kube.helm("uninstall", RELEASE, "--namespace", namespace, "--wait", "--timeout", "120s", check=False)
        for name in (apps, namespace):
            kube.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
        operator.start()
