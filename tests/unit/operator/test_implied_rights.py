"""The rights a resource implies (H2) and the approvals a request gives (L2): the pure rule behind the webhook."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from reprise_operator.api import BackfillSpec, LakeReplaySpec, ReconsumeSpec
from reprise_operator.rules.implied_rights import Right, approval_rights, refusal, spec_changed, spec_rights

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
KAFKA = {"bootstrapServers": "kafka:9092", "configFrom": {"secretRef": {"name": "team-kafka"}}}


def asked(rights: list[Right]) -> list[tuple[str, str, str | None, str]]:
    """(action, field) pairs, the way a reader checks them."""
    return [(r.action(), r.field, r.name, r.subresource) for r in rights]


def reconsume(**spec: Any) -> ReconsumeSpec:
    base = {"kafka": KAFKA, "topics": ["orders"], "consumerGroup": "orders-svc", "start": {"earliest": True}}
    return ReconsumeSpec.model_validate({**base, **spec})


# ---------------------------------------------------------------------------------------------- Reconsume


def test_a_consumer_template_needs_create_deployments_and_the_kafka_secret() -> None:
    spec = reconsume(mode="Parallel", consumer={"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}})
    assert asked(spec_rights(spec)) == [
        ("create deployments.apps", "spec.consumer.template", None, ""),
        ("get secrets/team-kafka", "spec.kafka.configFrom.secretRef", "team-kafka", ""),
    ]


def test_a_deployment_ref_needs_create_deployments_and_reading_the_live_one() -> None:
    spec = reconsume(mode="Handover", consumer={"deploymentRef": {"name": "orders"}}, kafka={"bootstrapServers": "k:1"})
    assert asked(spec_rights(spec)) == [
        ("create deployments.apps", "spec.consumer.deploymentRef", None, ""),
        ("get deployments.apps/orders", "spec.consumer.deploymentRef", "orders", ""),
    ]


def test_rewind_needs_scaling_the_live_deployment_by_name() -> None:
    spec = reconsume(mode="Rewind", liveDeployment={"name": "orders"})
    rights = spec_rights(spec)
    assert asked(rights)[0] == (
        "patch deployments.apps/orders --subresource=scale",
        "spec.liveDeployment",
        "orders",
        "scale",
    )
    assert len(rights) == 2  # and the Secret


def test_a_verify_job_needs_create_jobs() -> None:
    spec = reconsume(
        mode="Parallel",
        consumer={"deploymentRef": {"name": "orders"}},
        verify={"template": {"spec": {"containers": [{"name": "check", "image": "x"}]}}},
    )
    assert ("create jobs.batch", "spec.verify.template", None, "") in asked(spec_rights(spec))


# ---------------------------------------------------------------------------------------------- Backfill


def backfill(source: dict, **spec: Any) -> BackfillSpec:
    return BackfillSpec.model_validate({"kafka": KAFKA, "topic": "users", "keys": ["1"], "source": source, **spec})


def test_a_backfill_job_needs_create_jobs() -> None:
    spec = backfill({"job": {"template": {"spec": {"containers": [{"name": "b", "image": "x"}]}}}})
    assert asked(spec_rights(spec))[0] == ("create jobs.batch", "spec.source.job.template", None, "")


def test_a_topic_source_needs_only_the_secret_and_keys_from_needs_the_configmap() -> None:
    spec = BackfillSpec.model_validate(
        {
            "kafka": KAFKA,
            "topic": "users",
            "keysFrom": {"configMapRef": {"name": "user-ids", "key": "ids"}},
            "source": {"topic": {"name": "users"}},
        }
    )
    assert asked(spec_rights(spec)) == [
        ("get configmaps/user-ids", "spec.keysFrom.configMapRef", "user-ids", ""),
        ("get secrets/team-kafka", "spec.kafka.configFrom.secretRef", "team-kafka", ""),
    ]


def test_a_debezium_backfill_without_secret_needs_nothing() -> None:
    source = {
        "debezium": {"signalTopic": "s", "topicPrefix": "db", "dataCollection": "public.users", "keyColumn": "id"}
    }
    assert spec_rights(backfill(source, kafka={"bootstrapServers": "k:1"})) == []


# ---------------------------------------------------------------------------------------------- LakeReplay


def lakereplay_example() -> dict:
    return yaml.safe_load((EXAMPLES / "lakereplay-then-reconsume.yaml").read_text())["spec"]


def test_a_lakereplay_needs_a_spark_application_its_consumers_and_every_named_secret() -> None:
    spec = lakereplay_example()
    spec["spark"]["envFrom"] = [{"secretRef": {"name": "s3-keys"}}, {"secretRef": {"name": "team-kafka"}}]
    spec["then"]["reconsume"]["consumer"] = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    rights = asked(spec_rights(LakeReplaySpec.model_validate(spec)))
    assert rights == [
        ("create sparkapplications.sparkoperator.k8s.io", "spec.spark", None, ""),
        ("create deployments.apps", "spec.consumer.deploymentRef", None, ""),
        ("get deployments.apps/accounts-consumer", "spec.consumer.deploymentRef", "accounts-consumer", ""),
        # the continuation's template asks for the same create: asked once, named by the first field
        ("get secrets/accounts-kafka-client", "spec.kafka.configFrom.secretRef", "accounts-kafka-client", ""),
        ("get secrets/s3-keys", "spec.spark.envFrom[0].secretRef", "s3-keys", ""),
        ("get secrets/team-kafka", "spec.spark.envFrom[1].secretRef", "team-kafka", ""),
        ("get configmaps/users-schema", "spec.source.schema.configMapRef", "users-schema", ""),
    ]


def test_a_lakereplay_continuing_by_rewind_needs_scaling_the_live_deployment() -> None:
    spec = lakereplay_example()
    spec["then"]["reconsume"] = {
        "topics": ["users"],
        "consumerGroup": "accounts-service",
        "mode": "Rewind",
        "liveDeployment": {"name": "accounts"},
    }
    rights = asked(spec_rights(LakeReplaySpec.model_validate(spec)))
    assert (
        "patch deployments.apps/accounts --subresource=scale",
        "spec.then.reconsume.liveDeployment",
        "accounts",
        "scale",
    ) in rights


# ---------------------------------------------------------------------------------------------- the message


def test_the_refusal_names_the_field_the_right_the_namespace_and_the_user() -> None:
    right = Right("create", "apps", "deployments", "spec.consumer.template")
    assert refusal(right, "team-a", "alice") == (
        'spec.consumer.template needs "create deployments.apps" in namespace team-a, which user alice may not do'
    )


def test_an_approval_refusal_names_the_verb_and_the_role() -> None:
    right = Right("approve", "reprise.io", "reconsumes", 'metadata.annotations["reprise.io/approve"]', name="r")
    message = refusal(right, "team-a", "alice")
    assert 'needs "approve reconsumes.reprise.io/r"' in message
    assert "ClusterRole reprise-approver" in message


# ---------------------------------------------------------------------------------------------- approvals


def body(approval: str = "Manual", **annotations: str) -> dict:
    return {"metadata": {"name": "r", "annotations": annotations}, "spec": {"approval": approval}}


@pytest.mark.parametrize(
    ("old", "new", "fields"),
    [
        # annotating approve=true approves
        (body(), body(**{"reprise.io/approve": "true"}), ['metadata.annotations["reprise.io/approve"]']),
        # so does the cutover's annotation
        (
            body(),
            body(**{"reprise.io/approve-cutover": "true"}),
            ['metadata.annotations["reprise.io/approve-cutover"]'],
        ),
        # and turning a Manual resource Automatic
        (body(), body("Automatic"), ["spec.approval"]),
        # created approved
        (None, body(**{"reprise.io/approve": "true"}), ['metadata.annotations["reprise.io/approve"]']),
        # nothing new: already approved, another annotation, an approval removed, created Automatic
        (body(**{"reprise.io/approve": "true"}), body(**{"reprise.io/approve": "true", "x": "y"}), []),
        (body(), body(**{"reprise.io/approve": "false"}), []),
        (body(**{"reprise.io/approve": "true"}), body(), []),
        (None, body("Automatic"), []),
        (body("Automatic"), body("Manual"), []),
    ],
)
def test_what_approves(old: dict | None, new: dict, fields: list[str]) -> None:
    rights = approval_rights("reconsumes", old, new)
    assert [r.field for r in rights] == fields
    assert all((r.verb, r.group, r.resource, r.name) == ("approve", "reprise.io", "reconsumes", "r") for r in rights)


def test_only_a_create_or_a_spec_change_is_checked_for_the_spec() -> None:
    old = body()
    touched = copy.deepcopy(old)
    touched["metadata"]["finalizers"] = ["reprise.io/cleanup"]
    assert spec_changed(None, old)
    assert not spec_changed(old, touched)
    touched["spec"]["suspend"] = True
    assert spec_changed(old, touched)


def test_the_schema_registrys_credentials_secret_needs_get_on_that_secret() -> None:
    # The attack: someone who may not read Secret `payments-db` names it as the registry's credentials; its
    # username and password keys would reach the replay pods, which run an image of that person's choosing.
    spec = reconsume(
        mode="Handover",
        consumer={"template": {"spec": {"containers": [{"name": "c", "image": "attacker/image"}]}}},
        format={"value": "avro"},
        schemaRegistry={"url": "http://registry.kafka:8081", "credentialsSecret": {"name": "payments-db"}},
    )
    assert ("get secrets/payments-db", "spec.schemaRegistry.credentialsSecret", "payments-db", "") in asked(
        spec_rights(spec)
    )
