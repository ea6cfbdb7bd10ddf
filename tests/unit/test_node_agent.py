"""The node agent's pure decisions: which images run, argv, restarts, phase, env, volumes, path mapping."""

from __future__ import annotations

import base64
import json

import pytest

from local_platform.node_agent import (
    ConfigError,
    ContainerView,
    configmap_data,
    container_status,
    declared_ports,
    expand_vars,
    exit_code_of,
    image_runs_locally,
    local_argv,
    map_paths,
    map_ports,
    mount_map,
    pod_kubeconfig,
    pod_phase,
    pod_status,
    resolve_env,
    restart_delay,
    secret_data,
    should_restart,
    termination_message,
    volume_files,
)

PY = "/venv/bin/python"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


POD = {
    "metadata": {
        "name": "worker-0",
        "namespace": "team-a",
        "uid": "u-1",
        "labels": {"app": "w", "tier": "x"},
        "annotations": {"note": "hi"},
    },
    "spec": {"nodeName": "reprise-node", "serviceAccountName": "replayer"},
}
SECRETS = {"creds": secret_data({"data": {"user": b64("alice"), "password": b64("s3cret")}})}
CONFIGMAPS = {
    "settings": configmap_data(
        {"data": {"LEVEL": "debug", "app.yaml": "a: 1\n"}, "binaryData": {"blob": b64("\x00\x01")}}
    )
}


def lookups():
    return SECRETS.get, CONFIGMAPS.get


# -- images and argv -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image, runs",
    [("reprise:dev", True), ("ghcr.io/acme/reprise-operator:1.0", True), ("busybox:1.36", False), ("", False)],
)
def test_only_the_projects_image_runs_as_a_process(image, runs):
    assert image_runs_locally(image, "reprise") is runs


def test_an_image_published_to_the_local_store_runs_whatever_its_name():
    """A user's own service (issue 32, item 8): publishing its build is enough, no `reprise` in its name."""
    assert image_runs_locally("my-team/orders:dev", "reprise", published=True)
    assert not image_runs_locally("my-team/orders:dev", "reprise", published=False)


def test_python_in_argv0_becomes_the_agents_interpreter():
    assert local_argv(["python", "-c", "print(1)"], None, PY) == [PY, "-c", "print(1)"]
    assert local_argv(["/usr/local/bin/python3.11"], ["-m", "x"], PY) == [PY, "-m", "x"]
    assert local_argv(["python3"], None, PY) == [PY]


def test_console_scripts_become_modules_and_other_commands_stay():
    assert local_argv(["reprise-replay-worker", "--once"], None, PY) == [PY, "-m", "replay_worker", "--once"]
    assert local_argv(["/bin/sh", "-c", "true"], None, PY) == ["/bin/sh", "-c", "true"]
    assert local_argv(["pythonista"], None, PY) == ["pythonista"]


def test_args_alone_follow_the_image_entrypoint():
    assert local_argv(None, ["--verbose"], PY, default_entrypoint=("python", "-m", "reprise_operator")) == [
        PY,
        "-m",
        "reprise_operator",
        "--verbose",
    ]


# -- restarts and phase ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy, code, restart",
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 2, True),
        ("Never", 0, False),
        ("Never", 1, False),
    ],
)
def test_restart_policy(policy, code, restart):
    assert should_restart(policy, code) is restart


def test_backoff_doubles_and_is_capped():
    assert [restart_delay(n, 1.0, 10.0) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert restart_delay(10_000, 1.0, 60.0) == 60.0


def running(name="c"):
    return ContainerView(name=name, state="running", started_at="t0")


def exited(code, name="c", will_restart=False):
    return ContainerView(name=name, state="terminated", exit_code=code, will_restart=will_restart)


def backing_off(code, name="c"):
    return ContainerView(name=name, state="waiting", reason="CrashLoopBackOff", last_terminated={"exitCode": code})


def test_phase_pending_until_every_container_started():
    assert pod_phase("Always", [], [ContainerView(name="a")]) == "Pending"
    assert pod_phase("Always", [], [running("a"), ContainerView(name="b")]) == "Pending"


def test_phase_running_while_anything_runs_or_restarts():
    assert pod_phase("Always", [], [running()]) == "Running"
    assert pod_phase("Always", [], [backing_off(1)]) == "Running"
    assert pod_phase("OnFailure", [], [backing_off(1)]) == "Running"
    assert pod_phase("Never", [], [running("a"), exited(0, "b")]) == "Running"


def test_phase_terminal_when_every_container_exited_for_good():
    assert pod_phase("Never", [], [exited(0, "a"), exited(0, "b")]) == "Succeeded"
    assert pod_phase("OnFailure", [], [exited(0)]) == "Succeeded"
    assert pod_phase("Never", [], [exited(0, "a"), exited(3, "b")]) == "Failed"


def test_phase_follows_init_containers():
    main = [ContainerView(name="m")]
    assert pod_phase("Always", [running("i")], main) == "Pending"
    assert pod_phase("Always", [backing_off(1, "i")], main) == "Pending"
    assert pod_phase("Never", [exited(1, "i")], main) == "Failed"
    assert pod_phase("Always", [exited(0, "i")], [running("m")]) == "Running"


def test_exit_codes_of_signals_are_128_plus_the_signal():
    assert exit_code_of(0) == 0 and exit_code_of(3) == 3
    assert exit_code_of(-15) == 143 and exit_code_of(-9) == 137


# -- status ----------------------------------------------------------------------------------------


def test_container_status_of_each_state():
    run = container_status(
        ContainerView(
            name="c", image="reprise:dev", state="running", started_at="t0", container_id="reprise-agent://42"
        )
    )
    assert run["state"] == {"running": {"startedAt": "t0"}} and run["ready"] and run["started"]
    assert run["containerID"] == "reprise-agent://42"
    done = container_status(exited(0))
    assert done["state"]["terminated"]["reason"] == "Completed" and not done["ready"]
    assert container_status(exited(2))["state"]["terminated"]["reason"] == "Error"
    wait = container_status(backing_off(1))
    assert wait["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert wait["lastState"] == {"terminated": {"exitCode": 1}}


def test_pod_status_is_ready_when_all_run_and_keeps_foreign_conditions():
    pod = {
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t-sched"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "t-ready"},
            ]
        }
    }
    status = pod_status(pod, [], [running()], "Running", "127.0.0.1", "t-start", "t-now")
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["PodScheduled"]["lastTransitionTime"] == "t-sched"
    assert conds["Ready"]["status"] == "True" and conds["Ready"]["lastTransitionTime"] == "t-ready"
    assert conds["ContainersReady"]["lastTransitionTime"] == "t-now"
    assert status["podIP"] == "127.0.0.1" and status["hostIP"] == "127.0.0.1" and status["phase"] == "Running"


def test_pod_status_of_a_finished_pod_is_not_ready():
    status = pod_status({}, [], [exited(0)], "Succeeded", "127.0.0.1", "t", "t")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "PodCompleted"


# -- environment -----------------------------------------------------------------------------------


def test_env_from_values_refs_and_downward_api():
    container = {
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}, {"secretRef": {"name": "creds"}}],
        "env": [
            {"name": "PLAIN", "value": "v"},
            {"name": "USER2", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "user"}}},
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LEVEL"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "GREETING", "value": "$(POD) in $(NS), $$(POD), $(UNSET)"},
        ],
    }
    env = resolve_env(POD, container, *lookups(), "127.0.0.1", "127.0.0.1")
    assert env["CFG_LEVEL"] == "debug" and env["password"] == "s3cret" and env["user"] == "alice"
    assert env["PLAIN"] == "v" and env["USER2"] == "alice" and env["LEVEL"] == "debug"
    assert (env["POD"], env["NS"], env["IP"], env["APP"], env["SA"]) == (
        "worker-0",
        "team-a",
        "127.0.0.1",
        "w",
        "replayer",
    )
    assert env["GREETING"] == "worker-0 in team-a, $(POD), $(UNSET)"


def test_env_later_entries_override_env_from():
    container = {"envFrom": [{"configMapRef": {"name": "settings"}}], "env": [{"name": "LEVEL", "value": "info"}]}
    assert resolve_env(POD, container, *lookups(), "ip", "ip")["LEVEL"] == "info"


def test_missing_required_refs_fail_and_optional_ones_are_skipped():
    missing_key = {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}]}
    with pytest.raises(ConfigError, match="key 'nope' in secret 'creds'"):
        resolve_env(POD, missing_key, *lookups(), "ip", "ip")
    with pytest.raises(ConfigError, match="configMap 'absent'"):
        resolve_env(POD, {"envFrom": [{"configMapRef": {"name": "absent"}}]}, *lookups(), "ip", "ip")
    optional = {
        "envFrom": [{"secretRef": {"name": "absent", "optional": True}}],
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k", "optional": True}}}],
    }
    assert resolve_env(POD, optional, *lookups(), "ip", "ip") == {}


def test_resource_field_ref_uses_the_limit():
    container = {
        "resources": {"limits": {"memory": "512Mi"}},
        "env": [{"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}],
    }
    assert resolve_env(POD, container, *lookups(), "ip", "ip")["MEM"] == "512Mi"


def test_expand_vars():
    assert expand_vars("$(A)-$(B)-$$(A)-$", {"A": "1"}) == "1-$(B)-$(A)-$"


# -- volumes ---------------------------------------------------------------------------------------


def no_token(audience, seconds):
    raise AssertionError("no token expected")


def test_secret_and_configmap_volumes_with_items_and_modes():
    secret = {"name": "s", "secret": {"secretName": "creds", "defaultMode": 0o400}}
    files = volume_files(POD, secret, *lookups(), no_token, "ip", "ip")
    assert files == {"user": (b"alice", 0o400), "password": (b"s3cret", 0o400)}
    cm = {
        "name": "c",
        "configMap": {"name": "settings", "items": [{"key": "app.yaml", "path": "conf/app.yaml", "mode": 0o600}]},
    }
    assert volume_files(POD, cm, *lookups(), no_token, "ip", "ip") == {"conf/app.yaml": (b"a: 1\n", 0o600)}
    whole = volume_files(POD, {"name": "c", "configMap": {"name": "settings"}}, *lookups(), no_token, "ip", "ip")
    assert whole["blob"] == (b"\x00\x01", 0o644)


def test_missing_volume_sources():
    with pytest.raises(ConfigError):
        volume_files(POD, {"name": "s", "secret": {"secretName": "absent"}}, *lookups(), no_token, "ip", "ip")
    optional = {"name": "s", "secret": {"secretName": "absent", "optional": True}}
    assert volume_files(POD, optional, *lookups(), no_token, "ip", "ip") == {}


def test_downward_api_and_projected_volumes():
    downward = {
        "name": "d",
        "downwardAPI": {
            "items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            ]
        },
    }
    files = volume_files(POD, downward, *lookups(), no_token, "ip", "ip")
    assert files["name"][0] == b"worker-0" and files["labels"][0] == b'app="w"\ntier="x"'
    asked = []

    def token(audience, seconds):
        asked.append((audience, seconds))
        return "tok"

    projected = {
        "name": "kube-api-access-x",
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "settings", "items": [{"key": "LEVEL", "path": "level"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }
    files = volume_files(POD, projected, *lookups(), token, "ip", "ip")
    assert files == {"token": (b"tok", 0o644), "level": (b"debug", 0o644), "namespace": (b"team-a", 0o644)}
    assert asked == [("", 3607)]


def test_folder_volumes_have_no_files():
    assert volume_files(POD, {"name": "scratch", "emptyDir": {}}, *lookups(), no_token, "ip", "ip") is None


# -- paths -----------------------------------------------------------------------------------------


def test_mount_map_with_sub_path():
    container = {
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/reprise/"},
            {"name": "config", "mountPath": "/app/settings.yaml", "subPath": "settings.yaml"},
            {"name": "unknown", "mountPath": "/nowhere"},
        ]
    }
    assert mount_map(container, {"config": "/w/pods/p/volumes/config"}) == {
        "/etc/reprise": "/w/pods/p/volumes/config",
        "/app/settings.yaml": "/w/pods/p/volumes/config/settings.yaml",
    }


def test_map_paths_replaces_whole_path_prefixes_only():
    mapping = {"/data": "/L/data", "/data/deep": "/L/deep", "/etc/app": "/L/etc"}
    assert map_paths("/data", mapping) == "/L/data"
    assert map_paths("/data/x.csv", mapping) == "/L/data/x.csv"
    assert map_paths("/data/deep/y", mapping) == "/L/deep/y"
    assert map_paths("--config=/etc/app/c.yaml", mapping) == "--config=/L/etc/c.yaml"
    assert map_paths("a /data b:/data/z", mapping) == "a /L/data b:/L/data/z"
    assert map_paths("/database /other/data /data2", mapping) == "/database /other/data /data2"
    assert map_paths("file:///data/x", mapping) == "file:///data/x"  # not a path token on its own
    assert map_paths("anything", {}) == "anything"


def test_pod_kubeconfig_uses_the_token_file():
    cfg = json.loads(pod_kubeconfig("https://127.0.0.1:6443", "/ca.crt", "/tok", "team-a"))
    assert cfg["users"][0]["user"] == {"tokenFile": "/tok"}
    assert cfg["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert cfg["contexts"][0]["context"]["namespace"] == "team-a"


def test_declared_ports_get_host_ports_in_env_values_that_name_them():
    container = {"ports": [{"name": "metrics", "containerPort": 9400}, {"containerPort": 8080}, {"name": "x"}]}
    assert declared_ports(container) == [8080, 9400]
    env = {"REPRISE_METRICS_PORT": "9400", "HTTP": " 8080", "BATCH": "94000", "URL": "http://h:9400", "N": "3"}
    mapped = map_ports(env, {9400: 41001, 8080: 41002})
    assert mapped == {
        "REPRISE_METRICS_PORT": "41001",
        "HTTP": "41002",
        "BATCH": "94000",
        "URL": "http://h:9400",
        "N": "3",
    }
    assert map_ports(env, {}) == env


def test_termination_message_the_kubelet_way():
    # what the container wrote wins, success or not, trimmed to the kubelet's 4096 bytes
    assert termination_message(None, 1, b"rows differ\n", b"log") == "rows differ"
    assert termination_message("FallbackToLogsOnError", 0, b"done", b"log") == "done"
    assert len(termination_message(None, 1, b"x" * 5000, b"")) == 4096
    # nothing written: the log's tail only with FallbackToLogsOnError and a failure
    assert termination_message(None, 1, b"", b"boom") == ""
    assert termination_message("File", 1, b"", b"boom") == ""
    assert termination_message("FallbackToLogsOnError", 0, b"", b"fine") == ""
    log = b"".join(f"line {i}\n".encode() for i in range(200))
    tail = termination_message("FallbackToLogsOnError", 2, b"", log)
    assert tail.splitlines()[0] == "line 120" and tail.endswith("line 199")
    assert len(termination_message("FallbackToLogsOnError", 2, b"", b"y" * 9000)) == 2048


def test_a_published_local_image_maps_its_container_paths(tmp_path):
    from local_platform.local_images import image_paths, publish

    build = tmp_path / "images" / "accounts-jvm-1234"
    publish("reprise-examples/accounts-jvm:dev", {"/app/": build}, store=tmp_path / "store")
    paths = image_paths("reprise-examples/accounts-jvm:dev", store=tmp_path / "store")
    assert paths == {"/app": str(build)}
    assert image_paths("reprise-examples/accounts-jvm:other", store=tmp_path / "store") == {}
    assert image_paths("", store=tmp_path / "store") == {}
    # The classpath of the image's command, as the agent maps it.
    assert map_paths("/app/accounts-jvm.jar:/app/lib/*", paths) == f"{build}/accounts-jvm.jar:{build}/lib/*"
    with pytest.raises(ValueError):
        publish("x:dev", {"app": build}, store=tmp_path / "store")
