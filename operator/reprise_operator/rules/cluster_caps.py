"""What one resource may take of the shared Kafka cluster: backfill topic partitions, and replay consumers.

Partitions come out of the cluster's budget for every team (a LakeReplay could ask for 10 000), and every
member of a consumer group loads the group coordinator other teams' groups share (1000 replay consumers made a
1000-member group whose every rebalance stopped them all). So a backfill topic above the chart's
`limits.maxBackfillPartitions` is refused with the field named, and the replay consumers are at most the
partitions they replay: a group gives each partition to one member, so more would only sit idle in the group
and slow its rebalances (security review M7).
"""

from __future__ import annotations

PARTITIONS_VALUE = "limits.maxBackfillPartitions"


def backfill_partitions_refusal(partitions: int, limit: int, asked: bool) -> str | None:
    """Why a backfill topic of `partitions` may not be created under `limit`; None when it may. `asked`: the
    count is spec.backfillTopic.partitions (else it came from the first live topic)."""
    if partitions <= limit:
        return None
    if asked:
        return (
            f"spec.backfillTopic.partitions: {partitions} is above the operator's limit of {limit} partitions per "
            f"backfill topic (the chart's {PARTITIONS_VALUE}); ask for fewer"
        )
    return (
        f"spec.backfillTopic.partitions: the backfill topic would get {partitions} partitions (those of "
        f"spec.then.reconsume.topics[0]), above the operator's limit of {limit} (the chart's {PARTITIONS_VALUE}); "
        f"set spec.backfillTopic.partitions to at most {limit}"
    )


def replay_replicas(asked: int, partitions: int) -> int:
    """The replay consumers to run: `spec.consumer.replicas`, at most one per replayed partition (at least one)."""
    return max(1, min(asked, partitions))


def clamp_note(asked: int, partitions: int) -> str:
    """Said in status and an Event when the replicas were clamped; '' when they were not."""
    if asked <= replay_replicas(asked, partitions):
        return ""
    return (
        f"spec.consumer.replicas {asked} clamped to {replay_replicas(asked, partitions)}, the partitions it replays: "
        "more consumers would sit idle in the group"
    )
