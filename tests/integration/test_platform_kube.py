"""The local Kubernetes platform itself: API server, controllers, scheduler and the node agent.

These prove what every other integration test stands on: custom resources, Deployments whose pods get
scheduled and Running, the project's image really running as a local process (and stopped on delete),
Jobs completing, restarts with backoff, garbage collection, and Pod Security admission.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from tests.fixtures.kube import Kube, wait_for

pytestmark = pytest.mark.integration

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.platform-test.reprise.dev}
spec:
  group: platform-test.reprise.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def get_json(kube: Kube, *args: str) -> dict:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


def pods(kube: Kube, namespace: str, selector: str) -> list[dict]:
    return get_json(kube, "pods", "-n", namespace, "-l", selector)["items"]


def pid_of(pod: dict) -> int:
    container_id = pod["status"]["containerStatuses"][0]["containerID"]
    assert container_id.startswith("reprise-agent://"), container_id
    return int(container_id.rsplit("/", 1)[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (it waits for the agent to reap it).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_custom_resource_definition_serves_custom_resources(kube: Kube, namespace: str) -> None:
    kube.kubectl("apply", "-f", "-", input=CRD)
    kube.kubectl("wait", "--for=condition=Established", "crd/widgets.platform-test.reprise.dev", "--timeout=60s")
    kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=textwrap.dedent("""
        apiVersion: platform-test.reprise.dev/v1
        kind: Widget
        metadata: {name: small}
        spec: {size: 2}
    """),
    )
    from kubernetes import client

    with kube.api_client() as api:
        objects = client.CustomObjectsApi(api)
        widget = objects.get_namespaced_custom_object("platform-test.reprise.dev", "v1", namespace, "widgets", "small")
        assert widget["spec"] == {"size": 2}
        objects.patch_namespaced_custom_object_status(
            "platform-test.reprise.dev", "v1", namespace, "widgets", "small", {"status": {"seen": True}}
        )
        assert objects.get_namespaced_custom_object("platform-test.reprise.dev", "v1", namespace, "widgets", "small")[
            "status"
        ] == {"seen": True}
    invalid = kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        check=False,
        input=textwrap.dedent("""
        apiVersion: platform-test.reprise.dev/v1
        kind: Widget
        metadata: {name: broken}
        spec: {size: 0}
    """),
    )
    assert invalid.returncode != 0 and "spec.size" in invalid.stderr


def test_a_deployment_of_another_image_is_scheduled_and_reported_running(kube: Kube, namespace: str) -> None:
    kube.kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=3", "-n", namespace)
    kube.kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=90s")
    items = pods(kube, namespace, "app=web")
    assert len(items) == 3
    for pod in items:
        assert pod["spec"]["nodeName"] == kube.node_name
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["podIP"] == "127.0.0.1"
        assert "not-run" in pod["status"]["containerStatuses"][0]["containerID"]  # nothing ran


def test_the_projects_image_runs_as_a_local_process_and_is_stopped_on_delete(kube: Kube, namespace: str) -> None:
    kube.kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=greeting=hello")
    kube.kubectl("create", "secret", "generic", "creds", "-n", namespace, "--from-literal=token=t0ps3cret")
    script = textwrap.dedent("""
        import json, os, signal, sys, time
        out = os.environ["OUT"]
        def bye(signum, frame):
            with open(out + "/stopped", "w") as f:
                f.write("SIGTERM")
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        from kubernetes import client, config
        api = config.new_client_from_config()  # KUBECONFIG: the pod's ServiceAccount token
        user = client.AuthenticationV1Api(api).create_self_subject_review({}).status.user_info.username
        with open(out + "/ran.json", "w") as f:
            json.dump({
                "pid": os.getpid(),
                "pod": os.environ["POD_NAME"],
                "namespace": os.environ["POD_NAMESPACE"],
                "greeting": open("/etc/settings/greeting").read(),
                "greeting_arg": open(sys.argv[1]).read(),
                "token": os.environ["TOKEN"],
                "python": sys.executable,
                "prefix_map": json.loads(os.environ["REPRISE_PATH_PREFIX_MAP"]),
                "user": user,
            }, f)
        while True:
            time.sleep(1)
    """)
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
                "metadata": {"name": "runner"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "runner"}},
                    "template": {
                        "metadata": {"labels": {"app": "runner"}},
                        "spec": {
                            "terminationGracePeriodSeconds": 20,
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "ghcr.io/example/reprise:dev",
                                    "command": ["python", "-c", script, "/etc/settings/greeting"],
                                    "env": [
                                        {"name": "OUT", "value": "/out"},
                                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                        {
                                            "name": "POD_NAMESPACE",
                                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                        },
                                        {
                                            "name": "TOKEN",
                                            "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}},
                                        },
                                    ],
                                    "volumeMounts": [
                                        {"name": "out", "mountPath": "/out"},
                                        {"name": "settings", "mountPath": "/etc/settings"},
                                    ],
                                }
                            ],
                            "volumes": [
                                {"name": "out", "emptyDir": {}},
                                {"name": "settings", "configMap": {"name": "settings"}},
                            ],
                        },
                    },
                },
            }
        ),
    )
    kube.kubectl("rollout", "status", "deployment/runner", "-n", namespace, "--timeout=90s")
    pod = pods(kube, namespace, "app=runner")[0]
    name = pod["metadata"]["name"]
    out_dir = kube.agent.pod_dir(namespace, name) / "volumes" / "out"
    ran = wait_for(lambda: json.loads((out_dir / "ran.json").read_text()), 60, "the container to write ran.json")

    pid = pid_of(pod)
    assert ran["pid"] == pid and alive(pid)
    assert (ran["pod"], ran["namespace"]) == (name, namespace)
    # The container path of the ConfigMap volume was mapped to its local folder in the command and args.
    assert ran["greeting"] == ran["greeting_arg"] == "hello"
    assert ran["token"] == "t0ps3cret"
    assert os.path.samefile(ran["python"], os.path.realpath(kube.agent.settings.python))
    assert ran["prefix_map"]["/out"] == str(out_dir)
    assert ran["user"] == f"system:serviceaccount:{namespace}:default"  # it talked to the API as its pod

    kube.kubectl("delete", "deployment", "runner", "-n", namespace, "--wait=false")
    wait_for(lambda: not pods(kube, namespace, "app=runner"), 60, "the pod to be deleted")
    assert not alive(pid)
    assert (out_dir / "stopped").read_text() == "SIGTERM"  # it was asked to stop before anything harsher


def job(name: str, code: str, restart_policy: str = "Never", backoff_limit: int = 0) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "backoffLimit": backoff_limit,
                "template": {
                    "spec": {
                        "restartPolicy": restart_policy,
                        "containers": [{"name": "main", "image": "reprise:dev", "command": ["python3", "-c", code]}],
                    }
                },
            },
        }
    )


def test_a_job_runs_to_succeeded(kube: Kube, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=job("ok", "print('job done')"))
    kube.kubectl("wait", "--for=condition=Complete", "job/ok", "-n", namespace, "--timeout=90s")
    pod = pods(kube, namespace, "job-name=ok")[0]
    assert pod["status"]["phase"] == "Succeeded"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    assert "job done" in kube.container_log(namespace, pod["metadata"]["name"], "main")


def test_a_failing_job_fails(kube: Kube, namespace: str) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=job("bad", "raise SystemExit(3)"))
    kube.kubectl("wait", "--for=condition=Failed", "job/bad", "-n", namespace, "--timeout=90s")
    pod = pods(kube, namespace, "job-name=bad")[0]
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_a_crashing_container_is_restarted_with_backoff(kube: Kube, namespace: str) -> None:
    kube.kubectl(
        "run",
        "crasher",
        "-n",
        namespace,
        "--image=reprise:dev",
        "--restart=Always",
        "--command",
        "--",
        "python",
        "-c",
        "print('crash'); raise SystemExit(1)",
    )

    def restarted_twice() -> dict | None:
        status = get_json(kube, "pod", "crasher", "-n", namespace)["status"]
        cs = (status.get("containerStatuses") or [{}])[0]
        return cs if cs.get("restartCount", 0) >= 2 else None

    cs = wait_for(restarted_twice, 60, "two restarts")
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    pod = get_json(kube, "pod", "crasher", "-n", namespace)
    assert pod["status"]["phase"] == "Running"


def test_deleting_an_owner_garbage_collects_its_dependents(kube: Kube, namespace: str) -> None:
    kube.kubectl("create", "configmap", "owner", "-n", namespace, "--from-literal=a=b")
    owner_uid = get_json(kube, "configmap", "owner", "-n", namespace)["metadata"]["uid"]
    kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "dependent",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}],
                },
                "data": {"c": "d"},
            }
        ),
    )
    kube.kubectl("delete", "configmap", "owner", "-n", namespace)
    wait_for(
        lambda: kube.kubectl("get", "configmap", "dependent", "-n", namespace, check=False).returncode != 0,
        60,
        "the dependent to be garbage collected",
    )


def test_pod_security_admission_enforces_the_namespace_label(kube: Kube, namespace: str) -> None:
    kube.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    overrides = {
        "spec": {
            "containers": [{"name": "privileged", "image": "busybox:1.36", "securityContext": {"privileged": True}}]
        }
    }
    refused = kube.kubectl(
        "run", "privileged", "-n", namespace, "--image=busybox:1.36", "--overrides", json.dumps(overrides), check=False
    )
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr


def test_the_node_stays_ready(kube: Kube) -> None:
    node = get_json(kube, "node", kube.node_name)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert not node["spec"].get("taints")
    lease = get_json(kube, "lease", kube.node_name, "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == kube.node_name
    assert int(node["status"]["allocatable"]["pods"]) >= 200


def test_helm_and_kubectl_report_the_built_versions_and_reach_the_cluster(kube: Kube) -> None:
    version = json.loads(kube.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == version["clientVersion"]["gitVersion"] == "v1.35.4"
    assert kube.helm("version", "--short").stdout.startswith("v3.")
    assert kube.helm("list", "--all-namespaces").returncode == 0
