"""A replay pod that Reprise builds (`workloads.replay_deployment_manifest`), run by a real kubelet and containerd
from the image the project's Dockerfile builds, checked from the kernel's side: the user and group it declares
(not group 0), a read-only root filesystem, no capabilities, its Kafka Secret readable (fsGroup); then deleted mid-replay, it gets SIGTERM, commits
what it forwarded and exits 0 (not SIGKILL's 137) inside its grace period.
"""

from __future__ import annotations

import json
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

from local_platform.processes import free_port
from reprise_operator.rules.workloads import KAFKA_CONFIG_DIR, Owner, replay_deployment_manifest
from tests.fixtures.kube import wait_for

from .conftest import IMAGE, NodeCluster, process_status, root_mount_options

RECORDS = 200
GRACE = 30


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        offsets = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return max(offsets[0].offset, 0)
    finally:
        consumer.close()


def _owner(kube, namespace: str) -> Owner:
    kube.kubectl("create", "configmap", "replay-owner", "-n", namespace)
    uid = kube.kubectl("get", "configmap", "replay-owner", "-n", namespace, "-o", "jsonpath={.metadata.uid}").stdout
    return Owner("v1", "ConfigMap", "replay-owner", uid)


def test_replay_pod_facts_and_sigterm_on_delete(real_cluster: NodeCluster, kafka, topic_name: str, node_namespace: str):
    kube = real_cluster.kube
    kafka.create_topic(topic_name, partitions=1)
    forward = f"{topic_name}-out"
    kafka.create_topic(forward, partitions=1)
    _produce(kafka.bootstrap, topic_name)
    group = f"{topic_name}-replay"
    # Kafka settings from a Secret, mounted as Reprise mounts them (0440): readable only by the pod's fsGroup.
    kube.kubectl("create", "secret", "generic", "replay-kafka", "-n", node_namespace, "--from-literal=client.id=facts")
    template = {
        "spec": {
            # The platform's broker listens on loopback: the pod shares the node's network to reach it.
            "hostNetwork": True,
            "terminationGracePeriodSeconds": GRACE,
            # As a platform team writes it: the image's user named, its group left out.
            "securityContext": {"runAsUser": 65532},
            "containers": [
                {
                    "name": "app",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "securityContext": {"readOnlyRootFilesystem": True},
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
        }
    }
    manifest = replay_deployment_manifest(
        owner=_owner(kube, node_namespace),
        name="replay",
        namespace=node_namespace,
        labels={"app.kubernetes.io/component": "replay-consumer", "reprise.io/replay": "facts"},
        pod_template=template,
        replicas=1,
        worker_env={
            "REPRISE_BOOTSTRAP_SERVERS": kafka.bootstrap,
            "REPRISE_REPLAY_ID": f"{node_namespace}/facts",
            "REPRISE_TOPICS": topic_name,
            "REPRISE_ROLE": "replay",
            "REPRISE_MODE": "Parallel",
            "REPRISE_REPLAY_GROUP": group,
            "REPRISE_LIVE_GROUP": f"{topic_name}-live",
            "REPRISE_FORWARD_TOPIC": forward,
            "REPRISE_FOLLOW": "true",  # never finishes: deleted mid-replay
            "REPRISE_CHECK_INTERVAL": "0.5",
            "REPRISE_KAFKA_CONFIG_DIR": KAFKA_CONFIG_DIR,
        },
        metrics_port=free_port(),
        kafka_secret="replay-kafka",
    )
    kube.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def running_pod() -> dict | None:
        pods = json.loads(kube.kubectl("get", "pods", "-n", node_namespace, "-o", "json").stdout)["items"]
        for pod in pods:
            statuses = pod.get("status", {}).get("containerStatuses") or []
            if statuses and statuses[0].get("state", {}).get("running"):
                return pod
        return None

    wait_for(running_pod, 180, "the replay pod Running in its container")
    try:  # the worker ran: it read its Kafka settings from the Secret and committed what it forwarded
        wait_for(lambda: _committed(kafka.bootstrap, group, topic_name) == RECORDS, 120, f"{RECORDS} records committed")
    except AssertionError as exc:
        pods = kube.kubectl("get", "pods", "-n", node_namespace, "-o", "jsonpath={..containerStatuses}").stdout
        raise AssertionError(f"{exc}\nthe replay pod's containers: {pods}") from None
    pod = running_pod()
    assert pod is not None and pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    tasks = subprocess.run(
        [*real_cluster.node.ctr, "-n", "k8s.io", "tasks", "ls"], capture_output=True, text=True, check=True
    ).stdout
    pid = int(next(line.split()[1] for line in tasks.splitlines() if line.startswith(container_id)))

    status = process_status(pid)
    assert status["Uid"].split() == ["65532"] * 4, status["Uid"]
    assert status["Gid"].split() == ["65532"] * 4, f"the replay pod runs with group {status['Gid']}, not 65532"
    assert "0" not in status["Groups"].split(), f"supplementary groups {status['Groups']!r} include 0"
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, status
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", status
    assert "ro" in root_mount_options(pid), "the root filesystem is writable"

    # Deleted mid-replay: watch the pod until it is gone, keeping the container's last reported state.
    name = pod["metadata"]["name"]
    watch = subprocess.Popen(
        [
            str(kube.control_plane.kubectl),
            f"--kubeconfig={kube.kubeconfig}",
            "get",
            "pod",
            name,
            "-n",
            node_namespace,
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        kube.kubectl("delete", "pod", name, "-n", node_namespace, "--wait=false")
        last_state: dict = {}
        decoder = json.JSONDecoder()
        buffer = ""
        assert watch.stdout is not None
        for line in watch.stdout:
            buffer += line
            try:
                event, _ = decoder.raw_decode(buffer.strip())
            except json.JSONDecodeError:
                continue
            buffer = ""
            statuses = event["object"].get("status", {}).get("containerStatuses") or []
            if statuses:
                last_state = statuses[0].get("state") or last_state
            if event["type"] == "DELETED":
                break
    finally:
        watch.kill()
        watch.wait()
    terminated = last_state.get("terminated") or {}
    assert terminated.get("exitCode") == 0, f"the worker did not stop cleanly on SIGTERM: {last_state}"
    started, finished = terminated["startedAt"], terminated["finishedAt"]
    assert finished >= started
    assert _committed(kafka.bootstrap, group, topic_name) == RECORDS
