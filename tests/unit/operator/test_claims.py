"""What Reprise may delete in Kafka (review M4): only a group or topic its status says it created, and never a
group that someone uses (members, or committed offsets and no members)."""

from __future__ import annotations

from reprise_operator.core.claims import (
    created_of,
    group_in_use,
    group_in_use_message,
    reprise_created_group,
    reprise_created_topic,
)
from reprise_operator.doors.kafka_admin import GroupDescription


def test_only_a_group_kafka_knows_nothing_of_is_free():
    assert not group_in_use(GroupDescription("new", "Dead", ()))
    assert group_in_use(GroupDescription("theirs", "Empty", ())), "committed offsets, no members"
    assert group_in_use(GroupDescription("live", "Stable", ("c1@/10.0.0.7",)))
    assert group_in_use(GroupDescription("moving", "PreparingRebalance", ()))
    assert group_in_use(GroupDescription("odd", "Unknown", ())), "a state Reprise cannot read is not free"


def test_the_refusal_names_the_field_the_group_and_what_holds_it():
    offsets = group_in_use_message("spec.replayGroup", GroupDescription("billing-prod", "Empty", ()))
    assert offsets.startswith("spec.replayGroup: consumer group billing-prod already exists in Kafka")
    assert "committed offsets and no members" in offsets
    members = group_in_use_message("spec.drainGroup", GroupDescription("accounts", "Stable", ("a@/1", "b@/2")))
    assert "spec.drainGroup" in members and "(Stable, 2 member(s))" in members
    assert "a@/1" not in members, "the other group's members are not named"


def test_teardown_deletes_only_what_status_created_lists():
    status = {
        "children": {"replayGroup": "theirs", "backfillTopic": "ns.lake.reprise-backfill"},
        "created": {"groups": ["reprise-ns-lake"], "topics": ["ns.lake.reprise-backfill"]},
    }
    assert reprise_created_group(status, "reprise-ns-lake")
    assert not reprise_created_group(status, "theirs"), "named in children is not created by Reprise"
    assert reprise_created_topic(status, "ns.lake.reprise-backfill")
    assert not reprise_created_topic(status, "other-topic")


def test_a_replay_an_older_operator_started_has_no_created_and_keeps_its_group():
    older = {"children": {"replayGroup": "reprise-ns-fix", "deployment": "fix-replay"}}
    assert created_of(older).groups == [] and created_of(older).topics == []
    assert not reprise_created_group(older, "reprise-ns-fix")
