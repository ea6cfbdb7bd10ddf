"""What one resource may take of the shared Kafka cluster (security review M7): backfill topic partitions under
the chart's cap, replay consumers at most one per replayed partition."""

from __future__ import annotations

import pytest

from reprise_operator.rules.cluster_caps import backfill_partitions_refusal, clamp_note, replay_replicas


def test_a_backfill_topic_above_the_cap_is_refused_with_the_field_and_the_chart_value() -> None:
    refused = backfill_partitions_refusal(10_000, 256, asked=True)
    assert refused is not None
    assert refused.startswith("spec.backfillTopic.partitions: 10000") and "limits.maxBackfillPartitions" in refused
    assert backfill_partitions_refusal(256, 256, asked=True) is None


def test_a_count_taken_from_the_live_topic_says_how_to_ask_for_fewer() -> None:
    refused = backfill_partitions_refusal(512, 256, asked=False)
    assert refused is not None
    assert "spec.then.reconsume.topics[0]" in refused and "set spec.backfillTopic.partitions to at most 256" in refused


@pytest.mark.parametrize(("asked", "partitions", "runs"), [(1000, 3, 3), (2, 3, 2), (3, 3, 3), (5, 0, 1)])
def test_replicas_are_clamped_to_the_replayed_partitions(asked: int, partitions: int, runs: int) -> None:
    assert replay_replicas(asked, partitions) == runs


def test_a_clamp_is_said_and_no_clamp_is_silent() -> None:
    note = clamp_note(1000, 12)
    assert "spec.consumer.replicas 1000 clamped to 12" in note and "idle" in note
    assert clamp_note(12, 12) == "" and clamp_note(2, 12) == ""
