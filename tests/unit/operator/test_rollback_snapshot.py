"""Rewind's rollback ConfigMap (review L1): `restore.sh` is shell text a person runs, so nothing a group id or a
bootstrap address carries may run in it; and a ConfigMap under the rollback name that Reprise did not write for
this Reconsume is never taken for its snapshot."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

from reprise_operator.api import ReconsumeSpec
from reprise_operator.core.lifecycle import Resource
from reprise_operator.kinds.reconsume.rewind import rollback_configmap

UID = "1a2b3c4d-0000-4000-8000-000000000000"


def resource() -> Resource:
    body = {"metadata": {"name": "rewind-accounts", "namespace": "accounts", "uid": UID}}
    return Resource("Reconsume", "reconsumes", body, {}, rt=None)  # type: ignore[arg-type]


def rewind_spec(group: str, bootstrap: str) -> ReconsumeSpec:
    return ReconsumeSpec.model_validate(
        {
            "kafka": {"bootstrapServers": bootstrap},
            "topics": ["users"],
            "consumerGroup": group,
            "mode": "Rewind",
            "start": {"earliest": True},
            "liveDeployment": {"name": "accounts"},
        }
    )


def test_restore_sh_runs_kafkas_tool_with_a_hostile_group_and_bootstrap_as_plain_arguments(tmp_path: Path):
    # The API allows any printable ASCII but space in a group id (^[!-~]+$), and ${IFS} stands in for a space.
    # The marks are named relative to the script's folder (it runs there): a group id has at most 255 characters,
    # and pytest's folders under xdist are long.
    marks = [tmp_path / f"mark{i}" for i in range(4)]
    group = "g;touch${IFS}mark0;$(touch${IFS}mark1)|touch${IFS}mark2`id`"
    bootstrap = "$(touch${IFS}mark3)kafka:9092"
    spec = rewind_spec(group, bootstrap)
    config_map = rollback_configmap(resource(), spec, "rewind-accounts-rollback", {("users", 0): 42})
    script = tmp_path / "restore.sh"
    script.write_text(config_map["data"]["restore.sh"])
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0

    # A stand-in for Kafka's tool that writes down the arguments it was given, one per line.
    tools = tmp_path / "bin"
    tools.mkdir()
    argv = tmp_path / "argv"
    stub = tools / "kafka-consumer-groups.sh"
    stub.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {argv}\n')
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin"}
    run = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)

    ran = [m.name for m in marks if m.exists()]
    assert ran == [], f"restore.sh ran what the spec carried ({ran}): {config_map['data']['restore.sh']}"
    assert run.returncode == 0, run.stderr
    assert argv.read_text().splitlines() == [
        "--bootstrap-server",
        bootstrap,
        "--group",
        group,
        "--reset-offsets",
        "--from-file",
        "offsets.csv",
        "--execute",
        "--all-topics",
    ]


def test_only_this_resources_own_snapshot_is_taken_for_it():
    from reprise_operator.kinds.reconsume.rewind import is_own_snapshot

    ours = rollback_configmap(resource(), rewind_spec("accounts", "kafka:9092"), "rewind-accounts-rollback", {})
    assert ours["metadata"]["annotations"]["reprise.io/created-for"] == UID
    assert is_own_snapshot(copy.deepcopy(ours), ours), "the operator's own, from an attempt before a restart"

    planted = copy.deepcopy(ours)
    del planted["metadata"]["annotations"]["reprise.io/created-for"]
    assert not is_own_snapshot(planted, ours), "a ConfigMap someone put under the name is not adopted"

    other = copy.deepcopy(ours)
    other["metadata"]["annotations"]["reprise.io/created-for"] = "another-uid"
    assert not is_own_snapshot(other, ours), "an earlier Reconsume's snapshot of the same name is not this one's"

    forged = copy.deepcopy(ours)
    forged["data"]["offsets.csv"] = "users,0,0\n"
    assert not is_own_snapshot(forged, ours), "this uid with other offsets is not the snapshot Reprise took"
