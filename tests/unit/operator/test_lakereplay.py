"""LakeReplay's pure parts: the backfill topic, the drain consumers' settings, the continuation Reconsume at the
lake-to-Kafka seam, the plan's summary and refusals."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from replay_worker.protocol.finish_rules import record_ends_partition, replay_finish
from replay_worker.settings import WorkerSettings
from reprise_operator.api import LakeReplaySpec, ReconsumeSpec
from reprise_operator.core.driver import transition
from reprise_operator.rules.namespace_limit import ActiveResources
from reprise_operator.kinds.lakereplay.steps import (
    LIFECYCLE,
    continuation_manifest,
    continuation_name,
    continuation_retention_message,
)
from reprise_operator.kinds.lakereplay.rules import (
    DEFAULT_BACKFILL_PARTITIONS,
    DRAIN_UNTIL_STOPPED_MS,
    backfill_partitions,
    drain_deployment_name,
    drain_settings,
    plan_summary,
    refuse_future_range,
    spark_application,
    spark_defaults,
    topic_config,
)
from replay_worker.contract import PartitionFacts, StartSpec
from reprise_operator.rules.planning import PlanError, make_plan
from reprise_operator.core.lifecycle import Failure, ObjectMemory, Resource, Waiting
from reprise_operator.shared.settings import OperatorSettings, SettingsError
from reprise_operator.kinds.lakereplay.spark_application import SparkDefaults, seam_ms
from reprise_operator.rules.workloads import Owner

REPO = Path(__file__).resolve().parents[3]
OWNER = Owner("reprise.io/v1alpha1", "LakeReplay", "journey", "9d8c7b6a-0000-4000-8000-000000000000")
T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)


def raw(name: str = "lakereplay-then-reconsume.yaml") -> dict:
    return yaml.safe_load((REPO / "examples" / name).read_text())["spec"]


def spec_of(body: dict) -> LakeReplaySpec:
    return LakeReplaySpec.model_validate(body)


# ------------------------------------------------------------------------------------------ backfill topic


def test_backfill_partitions_as_given_else_as_the_live_topic_else_twelve():
    body = raw()
    body["backfillTopic"] = {"partitions": 5}
    assert backfill_partitions(spec_of(body), {"users": [0, 1, 2]}) == 5
    body["backfillTopic"] = {}
    assert backfill_partitions(spec_of(body), {"users": [0, 1, 2]}) == 3
    assert backfill_partitions(spec_of(body), {}) == DEFAULT_BACKFILL_PARTITIONS
    alone = raw("lakereplay.yaml")
    alone["backfillTopic"] = {}
    assert backfill_partitions(spec_of(alone), {"users": [0, 1, 2]}) == DEFAULT_BACKFILL_PARTITIONS == 12


def test_backfill_topic_retention():
    body = raw()
    assert topic_config(spec_of(body)) == {"retention.ms": str(168 * 3600 * 1000)}
    body["backfillTopic"]["retention"] = "36h"
    assert topic_config(spec_of(body)) == {"retention.ms": str(36 * 3600 * 1000)}


# ------------------------------------------------------------------------------------------ drain consumers


def test_drain_is_a_drain_worker_on_the_backfill_topic_in_the_lakereplays_group():
    spec = spec_of(raw())
    settings = drain_settings(
        spec,
        rid="ns/journey/9d8c7b6a",
        topic="ns.journey.reprise-backfill",
        delivery={"REPRISE_HANDLER": "accounts.replay:handle"},
        handover_topic="reprise.handover",
    )
    back = WorkerSettings.from_env(settings.to_env())
    assert back.mode == "Drain" and back.role == "replay"
    assert back.topics == ("ns.journey.reprise-backfill",)
    assert back.replay_group == "accounts-lake" and back.live_group is None
    assert back.start.kind == "earliest"
    assert back.handler == "accounts.replay:handle" and back.forward_topic is None
    assert back.kafka_config_dir == "/etc/reprise/kafka"  # the example's Kafka Secret is mounted there
    assert back.end is not None and back.end.timestamp_ms == DRAIN_UNTIL_STOPPED_MS


def test_the_drain_never_finishes_a_partition_by_itself_while_spark_writes():
    # Its end time is in the future, so the bootstrap keeps it as a per-record bound (start_position.decide_end)
    # and a partition's end does not finish it: the operator decides when the backfill topic is drained.
    assert datetime.fromtimestamp(DRAIN_UNTIL_STOPPED_MS / 1000, tz=timezone.utc).year == 9999
    assert replay_finish("Drain", 100, end_timestamp_ms=DRAIN_UNTIL_STOPPED_MS, at_end=True) is None
    assert replay_finish("Drain", 100, at_end=True) == "end-of-partition"  # what an unbounded drain would do
    now_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
    assert not record_ends_partition(None, DRAIN_UNTIL_STOPPED_MS, 5, now_ms)


def test_drain_forwards_when_the_clone_has_a_forward_topic():
    spec = spec_of(raw())
    settings = drain_settings(
        spec, rid="r", topic="bf", delivery={"REPRISE_FORWARD_TOPIC": "copy"}, handover_topic="reprise.handover"
    )
    assert (settings.handler, settings.forward_topic) == (None, "copy")


def test_child_names():
    assert drain_deployment_name("journey") == "journey-drain"
    assert continuation_name("journey") == "journey-then"
    assert len(continuation_name("x" * 63)) <= 63


# ------------------------------------------------------------------------------------------ continuation


STARTS = {("users", 0): 120, ("users", 1): 7, ("users", 2): 0}


def test_continuation_is_a_handover_reconsume_from_the_offsets_at_the_seam():
    spec = spec_of(raw())
    child = continuation_manifest(owner=OWNER, name="journey-then", namespace="accounts", spec=spec, starts=STARTS)
    assert child["apiVersion"] == "reprise.io/v1alpha1" and child["kind"] == "Reconsume"
    assert child["metadata"]["ownerReferences"] == [OWNER.reference()]
    assert child["metadata"]["labels"]["reprise.io/replay"] == "journey"
    body = ReconsumeSpec.model_validate(child["spec"])
    assert body.mode.value == "Handover" and body.topics == ["users"]
    assert body.consumer_group == "accounts-service"
    assert {(o.topic, o.partition): o.offset for o in body.start.offsets} == STARTS  # every partition listed
    assert body.start.allow_clamp is False
    assert body.approval.value == "Automatic"  # the LakeReplay's approval covers it
    assert body.filter.headers == {"event-type": ["UserCreated", "UserUpdated"]}
    assert body.consumer.deployment_ref.name == "accounts-consumer"  # spec.consumer by default
    assert body.consumer.env[0].name == "REPRISE_HANDLER"
    assert body.kafka.bootstrap_servers == "kafka-bootstrap.kafka:9092"
    assert body.kafka.config_from.secret_ref.name == "accounts-kafka-client"
    assert body.cleanup.delete_replay_group is True
    assert body.suspend is False


def test_continuation_uses_its_own_consumer_and_settings_when_given():
    body = raw()
    body["then"]["reconsume"].update(
        consumer={"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        replayGroup="accounts-then",
        mode="Parallel",
        completion={"drainedFor": "5s"},
    )
    body["suspend"] = True
    child = continuation_manifest(
        owner=OWNER, name="journey-then", namespace="accounts", spec=spec_of(body), starts=STARTS
    )
    parsed = ReconsumeSpec.model_validate(child["spec"])
    assert parsed.consumer.template is not None and parsed.consumer.deployment_ref is None
    assert (parsed.mode.value, parsed.replay_group) == ("Parallel", "accounts-then")
    assert parsed.completion.drained_for == timedelta(seconds=5)
    assert parsed.suspend is True


def test_continuation_in_rewind_moves_the_live_group_and_runs_no_consumer():
    body = raw()
    body["then"]["reconsume"] = {
        "topics": ["users"],
        "consumerGroup": "accounts-service",
        "mode": "Rewind",
        "liveDeployment": {"name": "accounts"},
    }
    child = continuation_manifest(
        owner=OWNER, name="journey-then", namespace="accounts", spec=spec_of(body), starts=STARTS
    )
    assert "consumer" not in child["spec"] and child["spec"]["liveDeployment"] == {"name": "accounts"}
    ReconsumeSpec.model_validate(child["spec"])


def facts(partition: int, log_start: int, end: int, at: int | None) -> PartitionFacts:
    return PartitionFacts(
        "users",
        partition,
        log_start,
        end,
        time_lookup=at if at is not None else -1,
        time_lookup_timestamp_ms=0 if at is not None else None,
    )


def test_plan_summary_describes_the_lake_range_the_topic_and_the_continuation():
    spec = spec_of(raw())
    plan = make_plan(
        StartSpec("timestamp", timestamp_ms=seam_ms(spec.source.to)), [facts(0, 0, 500, 120), facts(1, 0, 9, None)], T0
    )
    text = plan_summary(spec, "accounts.journey.reprise-backfill", 3, plan)
    assert text == (
        "lake s3a://lake/events/users/ (parquet) from the oldest record to 2026-06-01T00:00:00Z, into backfill "
        "topic accounts.journey.reprise-backfill (3 partitions), drained by group accounts-lake; then Handover "
        "on users from the offsets at 2026-06-01T00:00:00Z (380 records there now)"
    )
    alone = spec_of(raw("lakereplay.yaml"))
    assert "where event_type IN ('UserCreated', 'UserUpdated')" in plan_summary(alone, "t", 12, None)
    assert "from 2025-01-01T00:00:00Z" in plan_summary(alone, "t", 12, None)


def test_a_seam_older_than_retention_is_refused_with_the_fix():
    spec = spec_of(raw())
    # Partition 0: every retained record is newer than `to` and some were deleted: they may have been in range.
    plan = make_plan(
        StartSpec("timestamp", timestamp_ms=seam_ms(spec.source.to)), [facts(0, 40, 500, 40), facts(1, 0, 9, 3)], T0
    )
    assert [(p.topic, p.partition) for p in plan.at_risk] == [("users", 0)]
    message = continuation_retention_message(spec, plan)
    assert "users/0 (log starts at 40)" in message and "users/1" not in message
    assert "spec.source.to later" in message


def test_a_lake_range_ending_in_the_future_is_refused_as_a_start_in_the_future_is():
    # The lake holds history only, and the continuation would start at Kafka offsets for a time not yet
    # reached: records between the lake's last one and `to` would be in neither.
    body = raw()
    body["source"]["to"] = "2026-07-01T00:00:00Z"
    with pytest.raises(PlanError, match=r"spec.source.to 2026-07-01T00:00:00Z is in the future") as raised:
        refuse_future_range(spec_of(body), T0)
    assert raised.value.reason == "EndInFuture"
    refuse_future_range(spec_of(raw()), T0)  # to == now is not in the future


# ------------------------------------------------------------------------------------------ wiring


def test_spark_application_of_a_lakereplay_uses_derived_names():
    spec = spec_of(raw("lakereplay.yaml"))
    app = spark_application(owner=OWNER, namespace="accounts", spec=spec)
    assert app["metadata"]["name"] == "journey-spark" and app["metadata"]["namespace"] == "accounts"
    assert app["metadata"]["labels"]["reprise.io/kind"] == "lakereplay"
    args = app["spec"]["arguments"]
    assert args[args.index("--topic") + 1] == "users.backfill.2025h1"
    assert args[args.index("--progress") + 1] == "s3a://lake/events/_reprise/progress/accounts/journey-9d8c7b6a"


def test_spark_defaults_from_the_operator_settings():
    settings = OperatorSettings.from_env(
        {
            "REPRISE_SPARK_IMAGE": "reprise-spark:dev",
            "REPRISE_SPARK_VERSION": "4.1.4",
            "REPRISE_SPARK_SERVICE_ACCOUNT": "spark",
            "REPRISE_SPARK_JARS": "/a.jar, /b.jar",
            "REPRISE_SPARK_PROGRESS_URI": "s3a://state/progress",
        }
    )
    assert spark_defaults(settings) == SparkDefaults(
        "reprise-spark:dev", "4.1.4", "spark", ("/a.jar", "/b.jar"), "s3a://state/progress"
    )
    plain = spark_defaults(OperatorSettings.from_env({}))
    assert (plain.jars, plain.progress_base, plain.service_account) == (None, None, None)


@pytest.mark.parametrize("example", ["lakereplay.yaml", "lakereplay-then-reconsume.yaml"])
def test_examples_make_a_spark_application_and_drain_settings(example):
    spec = spec_of(raw(example))
    spark_application(owner=OWNER, namespace="ns", spec=spec)
    drain_settings(spec, rid="r", topic="bf", delivery={"REPRISE_HANDLER": "a.b:c"}, handover_topic="h")


# ------------------------------------------------------------------------------------------ what may be asked of Spark


def planning(spec: dict, settings: OperatorSettings) -> Resource:
    """A new LakeReplay as the operator reads it. Its runtime has settings and the (unlimited) active count only: a
    hook that reached for Kafka or the API server would fail the test with an AttributeError."""
    body = {"metadata": {"namespace": "team-a", "name": "lr", "uid": "u-1", "generation": 1}, "spec": spec}
    return Resource(
        "LakeReplay",
        "lakereplays",
        body,
        {},
        SimpleNamespace(settings=settings, active=ActiveResources(0, 0)),  # type: ignore[arg-type]
    )


def test_a_lakereplay_admitted_with_a_forbidden_sparkconf_key_fails_before_anything_is_made():
    """As under a CRD older than the allow-list: the operator's own parse refuses it, naming the key."""
    spec = raw("lakereplay.yaml")
    spec["spark"]["sparkConf"] = {"spark.kubernetes.namespace": "kube-system"}
    with pytest.raises(Failure) as failed:
        asyncio.run(transition(LIFECYCLE, planning(spec, OperatorSettings()), ObjectMemory()))
    assert failed.value.reason == "InvalidSpec"
    assert 'spec.spark.sparkConf["spark.kubernetes.namespace"]: not allowed' in failed.value.message
    assert "kube-system" not in failed.value.message


@pytest.mark.parametrize(
    ("settings", "reason", "field", "chart_value"),
    [
        (
            OperatorSettings(spark_image="registry.local/spark:1", spark_allow_image_override=False),
            "SparkImagePinned",
            "spec.spark.image",
            "operator.spark.allowImageOverride: false",
        ),
        (
            OperatorSettings(spark_service_account="reprise-spark", spark_allow_service_account_override=False),
            "SparkServiceAccountPinned",
            "spec.spark.driver.serviceAccount",
            "operator.spark.allowServiceAccountOverride: false",
        ),
    ],
)
def test_a_pinned_image_or_account_waits_at_planning_naming_the_field_and_the_chart_value(
    settings, reason, field, chart_value
):
    resource = planning(raw("lakereplay.yaml"), settings)  # the example names its image and account
    with pytest.raises(Waiting) as waiting:
        asyncio.run(transition(LIFECYCLE, resource, ObjectMemory()))
    assert waiting.value.reason == reason
    assert waiting.value.message.startswith(f"{field}: this platform pins") and chart_value in waiting.value.message


def test_the_pins_are_off_unless_the_platform_sets_them():
    settings = OperatorSettings.from_env(
        {"REPRISE_SPARK_ALLOW_IMAGE_OVERRIDE": "false", "REPRISE_SPARK_ALLOW_SERVICE_ACCOUNT_OVERRIDE": "False"}
    )
    defaults = spark_defaults(settings)
    assert (defaults.allow_image_override, defaults.allow_service_account_override) == (False, False)
    plain = spark_defaults(OperatorSettings.from_env({}))
    assert (plain.allow_image_override, plain.allow_service_account_override) == (True, True)
    with pytest.raises(SettingsError, match="REPRISE_SPARK_ALLOW_IMAGE_OVERRIDE='no' must be true or false"):
        OperatorSettings.from_env({"REPRISE_SPARK_ALLOW_IMAGE_OVERRIDE": "no"})


def test_a_lakereplay_stored_with_the_old_drain_group_name_fails_naming_the_new_one():
    from reprise_operator.core.lifecycle import Failure, Resource

    spec = raw()
    spec["consumerGroup"] = spec.pop("drainGroup")
    body = {"metadata": {"name": "old", "namespace": "accounts", "uid": "u"}, "spec": spec}
    with pytest.raises(Failure) as refused:
        Resource("LakeReplay", "lakereplays", body, {}, rt=None).spec_as(LakeReplaySpec)  # type: ignore[arg-type]
    assert refused.value.reason == "InvalidSpec"
    assert "spec.consumerGroup: renamed spec.drainGroup" in refused.value.message
