"""The node agent's host ports: pods that start together and declare the same containerPort each get a port
of their own, chosen before any of them listens, so none crashes with EADDRINUSE (issue 18, item 7)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.fixtures.kube import Kube, wait_for

pytestmark = pytest.mark.integration

#: A server that, like the replay worker, takes a while to start before it binds its declared port.
SLOW_SERVER = textwrap.dedent("""
    import os, socket, sys, time
    time.sleep(3)
    port = int(os.environ["METRICS_PORT"])
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("0.0.0.0", port))
    except OSError as exc:
        print(f"crashed on port {port}: {exc}", flush=True)
        sys.exit(1)
    server.listen()
    print(f"listening on {port}", flush=True)
    while True:
        time.sleep(1)
""")


def test_pods_started_together_get_distinct_ports_and_none_crashes(kube: Kube, namespace: str) -> None:
    replicas = 3
    kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "servers"},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": "servers"}},
                    "template": {
                        "metadata": {"labels": {"app": "servers"}},
                        "spec": {
                            "terminationGracePeriodSeconds": 2,
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "reprise:dev",
                                    "command": ["python", "-c", SLOW_SERVER],
                                    "env": [{"name": "METRICS_PORT", "value": "9477"}],
                                    "ports": [{"name": "metrics", "containerPort": 9477}],
                                }
                            ],
                        },
                    },
                },
            }
        ),
    )

    def all_listening() -> list[tuple[dict, str]] | None:
        found = json.loads(kube.kubectl("get", "pods", "-n", namespace, "-l", "app=servers", "-o", "json").stdout)[
            "items"
        ]
        logs = [(pod, kube.container_log(namespace, pod["metadata"]["name"], "main")) for pod in found]
        if len(logs) == replicas and all("listening on" in log for _, log in logs):
            return logs
        return None

    listening = wait_for(all_listening, 120, f"{replicas} servers to listen")
    ports = []
    for pod, log in listening:
        name = pod["metadata"]["name"]
        previous = kube.agent.container_log(namespace, name, "main")
        crashed = previous.with_name("main.previous.log") if previous else None
        assert "crashed" not in log and not (crashed and crashed.exists()), (
            f"pod {name} crashed on its port before it listened:\n{crashed.read_text() if crashed else log}"
        )
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["status"]
        ports.append(int(log.split("listening on ")[1].split()[0]))
    assert len(set(ports)) == replicas, f"two pods were given the same host port: {ports}"
