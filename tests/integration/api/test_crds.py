"""The generated CRDs on a real kube-apiserver: admission refuses every invalid manifest with a message
naming the field, every example is accepted, objects round-trip unchanged, kubectl explains every field,
`kubectl get replays` lists all three kinds, replay-defining fields are immutable, and status is a
schema-checked subresource that `kubectl wait --for=condition=Complete` understands."""

from __future__ import annotations

import copy
import json
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest

from reprise_operator.api import (
    API_VERSION,
    KINDS,
    BackfillStatus,
    Condition,
    ConditionStatus,
    ConditionType,
    LakeReplayStatus,
    Phase,
    ReconsumeSpec,
    ReconsumeStatus,
)
from reprise_operator.api.generate import crd
from reprise_operator.api.openapi import walk
from tests.fixtures.kube import wait_for
from tests.integration.api.conftest import kubectl_json
from tests.integration.api.invalid_cases import (
    EXAMPLES,
    INVALID,
    UPDATES,
    Invalid,
    Update,
    load_example,
    set_path,
)

pytestmark = pytest.mark.integration

RESOURCE = {kind.kind: kind for kind in KINDS}
NOW = "2026-11-20T12:00:00Z"


def test_there_are_at_least_30_invalid_manifests() -> None:
    assert len(INVALID) >= 30
    assert len({case.id for case in INVALID}) == len(INVALID)


def test_crds_are_established_and_structural(kube, reprise_crds) -> None:
    for name in reprise_crds:
        conditions = {c["type"]: c["status"] for c in kubectl_json(kube, "get", "crd", name)["status"]["conditions"]}
        assert conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True", conditions
        assert "NonStructuralSchema" not in conditions, conditions


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_admission_refuses_invalid_manifest(kube, shared_namespace, case: Invalid) -> None:
    manifest = json.dumps(case.manifest())
    result = kube.kubectl("apply", "--dry-run=server", "-n", shared_namespace, "-f", "-", input=manifest, check=False)
    message = result.stderr + result.stdout
    assert result.returncode != 0, f"{case.id}: the API server accepted it:\n{manifest}"
    missing = [part for part in case.expect if part not in message]
    assert not missing, f"{case.id}: the refusal does not say {missing}:\n{message}"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_applies_with_server_dry_run(kube, shared_namespace, example: str) -> None:
    result = kube.kubectl("apply", "--dry-run=server", "-n", shared_namespace, "-f", str(EXAMPLES / example))
    assert "created (server dry run)" in result.stdout


def full_reconsume() -> dict:
    """A Reconsume with every field that can go together set, defaults included, so nothing is added."""
    document = load_example("reconsume-handover.yaml")
    document["metadata"]["name"] = "full-reconsume"
    spec = document["spec"]
    spec["topics"] = ["users", "users.v2"]
    spec["start"] = {
        "offsets": [
            {"topic": "users", "partition": 0, "offset": 10},
            {"topic": "users.v2", "partition": 3, "offset": 0},
        ],
        "allowClamp": True,
    }
    spec["filter"] = {
        "headers": {"event-type": ["UserCreated"], "tenant": ["a", "b"]},
        "keys": ["u-1", "u-2"],
        "jsonFields": [{"path": "payload.type", "values": ["x", "y"]}],
    }
    spec["consumer"] = {
        "deploymentRef": {"name": "accounts-consumer"},
        "container": "worker",
        "replicas": 7,
        "env": [{"name": "REPRISE_HANDLER", "value": "accounts.replay:handle"}, {"name": "EMPTY", "value": ""}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi", "cpu": 2}},
        "entrypoint": "ReplayWorker",
    }
    spec["replayGroup"] = "accounts-service.replay"
    spec["approval"] = "Manual"
    spec["completion"] = {"drainedFor": "1h30m"}
    spec["cleanup"] = {"deleteReplayGroup": False, "ttlSecondsAfterFinished": 0}
    spec["suspend"] = True
    spec["format"] = {"key": "raw", "value": "avro"}
    spec["schemaRegistry"] = {"url": "http://schema-registry.kafka:8081", "credentialsSecret": {"name": "sr-reader"}}
    return document


def test_full_object_round_trips_unchanged(kube, namespace, reprise_crds) -> None:
    document = full_reconsume()
    assert ReconsumeSpec.model_validate(document["spec"]).dump() == document["spec"]
    kube.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(document))
    stored = kubectl_json(kube, "get", "-n", namespace, "reconsume", "full-reconsume")
    assert stored["spec"] == document["spec"]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_round_trips_as_the_models_default_it(kube, shared_namespace, example: str) -> None:
    """What the API server stores is the example plus the defaults the models also fill in."""
    document = load_example(example)
    kind = RESOURCE[document["kind"]]
    document["metadata"]["name"] = f"rt-{example.removesuffix('.yaml')}"[:63]
    kube.kubectl("create", "-n", shared_namespace, "-f", "-", input=json.dumps(document))
    stored = kubectl_json(kube, "get", "-n", shared_namespace, kind.singular, document["metadata"]["name"])
    assert stored["spec"] == kind.spec.model_validate(document["spec"]).dump()


def explainable_fields(kind) -> list[tuple[str, str]]:
    """(path for kubectl explain, description) of every field, nested ones included."""
    root = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = []
    for path, node in walk(root):
        if not path or path == "metadata" or "{}" in path or path.endswith("[]"):
            continue
        fields.append((path.replace("[]", ""), node["description"]))
    return sorted(set(fields))


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_kubectl_explain_describes_every_field(kube, reprise_crds) -> None:
    wait_for(
        lambda: kube.kubectl("explain", "reconsume.spec.start", check=False).returncode == 0,
        60,
        "the CRD schemas in the published OpenAPI",
    )

    def explain(kind, path: str, description: str) -> str | None:
        result = kube.kubectl("explain", f"{kind.singular}.{path}", f"--api-version={API_VERSION}", check=False)
        shown = _words(result.stdout)
        # kubectl wraps long lines; the first words are enough to know it is our description.
        head = _words(description)[:60]
        if result.returncode != 0 or head not in shown:
            return f"{kind.kind}.{path}: {result.stderr.strip() or shown[:200]}"
        return None

    jobs = [(kind, path, description) for kind in KINDS for path, description in explainable_fields(kind)]
    assert len(jobs) > 200
    with ThreadPoolExecutor(max_workers=8) as pool:
        problems = [p for p in pool.map(lambda job: explain(*job), jobs) if p]
    assert problems == [], "\n".join(problems)
    start = kube.kubectl("explain", "reconsume.spec.start").stdout
    assert "exactly one of timestamp, duration, earliest" in _words(start)
    for field in ("timestamp", "duration", "earliest", "offsets", "allowClamp"):
        assert re.search(rf"^\s+{field}\s", start, re.M), f"explain reconsume.spec.start does not list {field}"


def test_get_replays_lists_all_three_kinds(kube, namespace, reprise_crds) -> None:
    for example in ("reconsume-handover.yaml", "backfill-topic.yaml", "lakereplay.yaml"):
        kube.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / example))
    listed = set(kube.kubectl("get", "replays", "-n", namespace, "-o", "name").stdout.split())
    assert listed == {
        "reconsume.reprise.io/accounts-add-locale",
        "backfill.reprise.io/users-missing-profiles",
        "lakereplay.reprise.io/accounts-2025h1",
    }
    by_short_name = set(kube.kubectl("get", "rcs,bf,lr", "-n", namespace, "-o", "name").stdout.split())
    assert by_short_name == listed
    header = kube.kubectl("get", "reconsumes", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "MODE", "PROGRESS", "LAG", "ETA", "VERIFIED", "AGE"]
    assert kube.kubectl("get", "backfills", "-n", namespace).stdout.splitlines()[0].split() == [
        "NAME",
        "PHASE",
        "KEYS",
        "BARRIER",
        "AGE",
    ]
    assert kube.kubectl("get", "lakereplays", "-n", namespace).stdout.splitlines()[0].split() == [
        "NAME",
        "PHASE",
        "SPARK",
        "LAG",
        "VERIFIED",
        "AGE",
    ]


@pytest.mark.parametrize("update", UPDATES, ids=lambda u: u.id)
def test_updates_to_replay_defining_fields_are_refused(kube, shared_namespace, update: Update) -> None:
    document = load_example(update.base)
    document["metadata"]["name"] = f"upd-{update.id}"
    kube.kubectl("create", "-n", shared_namespace, "-f", "-", input=json.dumps(document))
    changed = copy.deepcopy(document)
    for path, value in update.changes.items():
        set_path(changed, path, value)
    result = kube.kubectl("replace", "-n", shared_namespace, "-f", "-", input=json.dumps(changed), check=False)
    message = result.stderr + result.stdout
    if update.refused:
        assert result.returncode != 0, f"{update.id}: the change was accepted"
        assert all(part in message for part in update.expect), f"{update.id}: {message}"
    else:
        assert result.returncode == 0, f"{update.id}: a lifecycle change was refused: {message}"
        kind = RESOURCE[document["kind"]]
        stored = kubectl_json(kube, "get", "-n", shared_namespace, kind.singular, document["metadata"]["name"])
        assert stored["spec"] == kind.spec.model_validate(changed["spec"]).dump()


def full_statuses() -> dict[str, dict]:
    """A status with every field set, per kind, built with the models as the operator will."""
    now = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)
    conditions = [
        Condition(
            type=t,
            status=ConditionStatus.TRUE,
            reason="Reached",
            message=f"{t.value} reached",
            last_transition_time=now,
            observed_generation=1,
        )
        for t in (ConditionType.PLAN_READY, ConditionType.APPROVED, ConditionType.DRAINED, ConditionType.COMPLETE)
    ]
    plan = {
        "partitions": [
            {
                "topic": "users",
                "partition": 0,
                "start_offset": 5,
                "end_offset": 105,
                "records": 100,
                "oldest_timestamp": now,
                "retention_risk": "Clamped",
            }
        ],
        "partition_count": 1,
        "total_records": 100,
        "oldest_timestamp": now,
        "retention_risk": "Clamped",
        "computed_at": now,
    }
    progress = {
        "partitions": [
            {
                "topic": "users",
                "partition": 0,
                "position": 105,
                "end_offset": 110,
                "handover_offset": 107,
                "lag": 0,
                "state": "HandedOver",
            }
        ],
        "total_records": 100,
        "processed": 100,
        "percent": 100,
        "lag": 0,
        "eta_seconds": 0,
        "eta": "0s",
        "updated_at": now,
    }
    common = dict(
        phase=Phase.COMPLETE,
        observed_generation=1,
        conditions=conditions,
        started_at=now,
        completed_at=now,
        plan=plan,
        progress=progress,
    )
    reconsume = ReconsumeStatus(
        **common,
        children={"deployment": "d", "replay_group": "g", "handover_topic": "h", "config_maps": ["c"]},
        rollback={
            "config_map": "c",
            "taken_at": now,
            "deployment_replicas": 3,
            "offsets": [{"topic": "users", "partition": 0, "offset": 42}],
        },
    )
    backfill = BackfillStatus(
        **{
            **common,
            "plan": {
                "key_count": 2,
                "partitions": [{"partition": 1, "keys": 2, "start_offset": 9}],
                "downstream_groups": ["billing"],
                "computed_at": now,
            },
        },
        children={"jobs": ["j"], "config_maps": ["k"]},
        produced_range=[{"topic": "users", "partition": 1, "start_offset": 9, "end_offset": 11}],
        keys_produced=1,
        keys_not_found=["u-9"],
        keys_not_found_count=1,
        barrier={
            "partitions": [
                {
                    "group": "billing",
                    "topic": "users",
                    "partition": 1,
                    "target_offset": 11,
                    "committed_offset": 11,
                    "remaining": 0,
                    "stalled_since": now,
                }
            ],
            "groups_passed": 1,
            "groups_total": 1,
            "remaining": 0,
        },
        signal={"id": "s-1", "sent_at": now, "last_notification": "COMPLETED", "notified_at": now},
    )
    lake = LakeReplayStatus(
        **common,
        children={
            "backfill_topic": "b",
            "spark_application": "s",
            "deployment": "d",
            "replay_group": "g",
            "reconsume": "r",
            "config_maps": ["c"],
        },
        spark={"application_name": "s", "state": "COMPLETED", "attempts": 1, "records_written": 100, "updated_at": now},
        continuation={
            "reconsume": "r",
            "phase": "Running",
            "start_offsets": [{"topic": "users", "partition": 0, "offset": 7}],
        },
    )
    return {"Reconsume": reconsume.dump(), "Backfill": backfill.dump(), "LakeReplay": lake.dump()}


@pytest.mark.parametrize("example", ["reconsume-handover.yaml", "backfill-topic.yaml", "lakereplay.yaml"])
def test_status_subresource_keeps_a_full_status_and_kubectl_wait_sees_complete(
    kube, namespace, reprise_crds, example: str
) -> None:
    document = load_example(example)
    kind = RESOURCE[document["kind"]]
    name = document["metadata"]["name"]
    kube.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / example))
    status = full_statuses()[kind.kind]

    # Status written through the main resource is ignored: it is a subresource.
    kube.kubectl(
        "patch", "-n", namespace, kind.singular, name, "--type=merge", "-p", json.dumps({"status": {"phase": "Failed"}})
    )
    assert "status" not in kubectl_json(kube, "get", "-n", namespace, kind.singular, name)

    kube.kubectl(
        "patch",
        "-n",
        namespace,
        kind.singular,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    stored = kubectl_json(kube, "get", "-n", namespace, kind.singular, name)
    assert stored["status"] == status, "the API server pruned or changed status fields"
    assert stored["metadata"]["generation"] == 1, "a status write must not bump the generation"

    kube.kubectl("wait", "-n", namespace, f"{kind.singular}/{name}", "--for=condition=Complete", "--timeout=30s")
    kube.kubectl(
        "wait", "-n", namespace, f"{kind.singular}/{name}", "--for=jsonpath={.status.phase}=Complete", "--timeout=30s"
    )
    printed = kube.kubectl("get", "-n", namespace, kind.singular, name).stdout.splitlines()[1].split()
    assert printed[1] == "Complete"

    # Status is schema-checked: an unknown phase and a malformed condition are refused.
    refused = kube.kubectl(
        "patch",
        "-n",
        namespace,
        kind.singular,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Exploded"}}),
        check=False,
    )
    assert refused.returncode != 0 and "status.phase" in refused.stderr and "Unsupported value" in refused.stderr
    bad_condition = [{"type": "Complete", "status": "Maybe", "reason": "two words", "lastTransitionTime": NOW}]
    refused = kube.kubectl(
        "patch",
        "-n",
        namespace,
        kind.singular,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"conditions": bad_condition}}),
        check=False,
    )
    assert refused.returncode != 0
    assert "status.conditions[0].status" in refused.stderr and "status.conditions[0].reason" in refused.stderr
