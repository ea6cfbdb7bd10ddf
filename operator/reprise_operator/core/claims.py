"""Which consumer groups and topics are Reprise's, and so may be deleted when a replay ends.

Kafka records no owner: a group exists once someone joins it or commits to it, a topic once someone
creates it. So Reprise uses only names nobody uses, and claims each before it uses it:

- A group Kafka describes as anything but Dead has members or committed offsets: it is someone's (the
  live service's, another team's, a replay an older resource of the same name left behind). A replay or
  drain group like that is refused when planning, and again when starting (an approval can take days).
- A backfill topic that exists is someone's, and is refused the same way.
- The claim is `status.created` (groups and topics), written to the API server before anything uses the
  name, so an operator restarted mid-start finds its own claim there and goes on with it.
- Teardown deletes what `status.created` lists, and nothing else. A replay an older operator started has no
  `status.created`: its group is left in place (a person can delete it; Kafka also expires an empty group's
  offsets after `offsets.retention.minutes`), because deleting a group that is someone's loses their
  position for good, while keeping one of Reprise's costs nothing.

A name that is in use fails the resource (Failed, reason GroupInUse or TopicExists) rather than waiting:
the name comes from the spec, which is immutable, and waiting would only end when someone deleted the
other party's group, the very thing this module prevents.
"""

from __future__ import annotations

import time

from ..api import CreatedInKafka
from ..doors.kafka_admin import GroupDescription, KafkaCluster, KafkaUnavailable
from .lifecycle import Failure, Resource

#: The one state in which Kafka knows nothing of a group: no members and no committed offsets.
FREE_GROUP_STATE = "Dead"


def group_in_use(description: GroupDescription) -> bool:
    """Whether someone uses the group: any state but Dead (Empty means committed offsets and no members)."""
    return description.state != FREE_GROUP_STATE


def group_in_use_message(field: str, description: GroupDescription) -> str:
    """Why a replay or drain group is refused: `field` names where the name came from."""
    if description.members:
        # A count, not the members' client ids and hosts: whose group it is is not this resource's business.
        held = f"{len(description.members)} member(s)"
    else:
        held = "committed offsets and no members"
    return (
        f"{field}: consumer group {description.group_id} already exists in Kafka ({description.state}, {held}). "
        "Reprise deletes its replay and drain groups when done, so it uses only a new group: name one no consumer "
        "uses, in a new resource (the field is immutable). If the group is left over from an earlier replay of "
        "the same name, delete it (kafka-consumer-groups.sh --delete --group NAME) and create the resource again"
    )


def topic_exists_message(field: str, topic: str) -> str:
    return (
        f"{field}: the backfill topic {topic} already exists in Kafka. Reprise creates the backfill topic and "
        "deletes it when done, so it must be a new one: set spec.backfillTopic.name to a topic that does not exist"
    )


def created_of(status: dict) -> CreatedInKafka:
    """`status.created` as its model (empty when absent)."""
    return CreatedInKafka.model_validate(status.get("created") or {})


#: Looks at a group whose coordinator is moving or loading before the answer counts as Kafka being unavailable.
DESCRIBE_ATTEMPTS = 5
DESCRIBE_PAUSE_S = 1.0


def refuse_group_in_use(cluster: KafkaCluster, group: str, field: str) -> None:
    """Failure (GroupInUse) when someone uses `group`. Blocking: `kubectl reprise plan` calls it too, once, so
    a coordinator that is still loading (a broker that just started) is asked again for a few seconds."""
    for attempt in range(DESCRIBE_ATTEMPTS):
        try:
            description = cluster.describe_group(group)
            break
        except KafkaUnavailable:
            if attempt == DESCRIBE_ATTEMPTS - 1:
                raise
            time.sleep(DESCRIBE_PAUSE_S)
    if group_in_use(description):
        raise Failure("GroupInUse", group_in_use_message(field, description))


async def claim(resource: Resource, cluster: KafkaCluster, groups: dict[str, str], topics: dict[str, str]) -> None:
    """Claim `groups` and `topics` (name -> the field it came from) for this resource before anything uses
    them: each one not claimed yet is checked again, and the claims are written to the API server at once.
    A name already in `status.created` is this resource's own, from an earlier attempt of the same step."""
    created = created_of(resource.status)
    new_groups = [g for g in groups if g not in created.groups]
    new_topics = [t for t in topics if t not in created.topics]
    for group in new_groups:
        description = await cluster.aio.describe_group(group)
        if group_in_use(description):
            raise Failure("GroupInUse", group_in_use_message(groups[group], description))
    if new_topics:
        found = await cluster.aio.partitions(new_topics)
        for topic in new_topics:
            if topic in found:
                raise Failure("TopicExists", topic_exists_message(topics[topic], topic))
    if new_groups or new_topics:
        await resource.persist(
            created=CreatedInKafka(groups=created.groups + new_groups, topics=created.topics + new_topics)
        )


def reprise_created_group(status: dict, group: str) -> bool:
    """Whether teardown may delete `group`: only when this resource's status says Reprise created it."""
    return group in created_of(status).groups


def reprise_created_topic(status: dict, topic: str) -> bool:
    """Whether teardown may delete `topic`: only when this resource's status says Reprise created it."""
    return topic in created_of(status).topics


__all__ = [
    "claim",
    "created_of",
    "group_in_use",
    "group_in_use_message",
    "refuse_group_in_use",
    "reprise_created_group",
    "reprise_created_topic",
    "topic_exists_message",
]
