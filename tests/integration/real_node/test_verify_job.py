"""A Reconsume's verify Job on the real node: the operator (a host process here) runs a Parallel replay whose
consumers and verify Job are containers of the image the project's Dockerfile builds. The check itself asserts,
from inside its container, the group it runs with (the operator's Job must not leave it at 0); the Reconsume
ends Complete with its verification Passed, or Failed with the check's message.
"""

from __future__ import annotations

import json

from confluent_kafka import Producer

from local_platform.operator_process import OperatorProcess
from tests.fixtures.kube import wait_for

from .conftest import IMAGE, NodeCluster

CRDS = "crds"
#: The check: exit 0 only when it runs as 65532:65532 on a read-only root filesystem, else say what it saw.
CHECK = """
import os, sys
problems = []
if (os.getuid(), os.getgid()) != (65532, 65532):
    problems.append(f"runs as {os.getuid()}:{os.getgid()}")
try:
    open("/verify-was-here", "w")
    problems.append("the root filesystem is writable")
except OSError:
    pass
print("verify:", problems or "ok")
sys.exit("; ".join(problems) or 0)
"""


def _pod(containers: list[dict]) -> dict:
    return {
        # The platform's broker listens on loopback: pods share the node's network to reach it.
        "hostNetwork": True,
        "securityContext": {"runAsUser": 65532},
        "containers": [
            {
                **c,
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "securityContext": {"readOnlyRootFilesystem": True},
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            }
            for c in containers
        ],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
    }


def test_a_verify_job_runs_as_a_container_and_passes(
    real_cluster: NodeCluster, kafka, topic_name: str, node_namespace: str, tmp_path
):
    kube = real_cluster.kube
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", CRDS)
    wait_for(lambda: kube.kubectl("get", "reconsumes", "-A", check=False).returncode == 0, 60, "Reconsume served")
    kafka.create_topic(topic_name, partitions=2)
    kafka.create_topic(f"{topic_name}-out", partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(100):
        producer.produce(topic_name, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(30) == 0
    operator = OperatorProcess(kube.kubeconfig, tmp_path / "operator.log", {"REPRISE_WEBHOOK_PORT": "0"})
    operator.start()
    try:
        body = {
            "apiVersion": "reprise.io/v1alpha1",
            "kind": "Reconsume",
            "metadata": {"name": "checked"},
            "spec": {
                "kafka": {"bootstrapServers": kafka.bootstrap},
                "topics": [topic_name],
                "consumerGroup": f"{topic_name}-live",
                "mode": "Parallel",
                "start": {"timestamp": "2020-01-01T00:00:00Z"},
                "consumer": {
                    "template": {"metadata": {"labels": {"app": "checked"}}, "spec": _pod([{"name": "app"}])},
                    "replicas": 1,
                    "env": [{"name": "REPRISE_FORWARD_TOPIC", "value": f"{topic_name}-out"}],
                },
                "approval": "Automatic",
                "completion": {"drainedFor": "2s"},
                "verify": {
                    "template": {"spec": _pod([{"name": "check", "command": ["python", "-c", CHECK]}])},
                    "timeout": "3m",
                },
            },
        }
        kube.kubectl("apply", "-n", node_namespace, "-f", "-", input=json.dumps(body))

        def finished() -> dict | None:
            got = json.loads(kube.kubectl("get", "reconsume", "checked", "-n", node_namespace, "-o", "json").stdout)
            return got if (got.get("status") or {}).get("phase") in ("Complete", "Failed") else None

        try:
            status = wait_for(finished, 180, "the Reconsume Complete or Failed")["status"]
        except AssertionError as exc:
            got = kube.kubectl("get", "reconsume", "checked", "-n", node_namespace, "-o", "jsonpath={.status}").stdout
            pods = kube.kubectl("get", "pods,jobs", "-n", node_namespace, "-o", "wide", check=False).stdout
            raise AssertionError(f"{exc}\nstatus: {got}\n{pods}\noperator: {operator.log()[-2500:]}") from None
        assert status["phase"] == "Complete", f"{status}\n{operator.log()[-3000:]}"
        assert status["verification"]["state"] == "Passed", status["verification"]
    finally:
        operator.stop()
