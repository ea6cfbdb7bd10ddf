"""Which Kafka consumer groups a replay moves on purpose, and in which role: the groups whose lag jumps by
design while a Rewind, Handover, Parallel replay, LakeReplay or Backfill runs.

The operator exports them as `reprise_replay_consumer_group` so that lag alerts outside Reprise
(kafka-lag-exporter, Burrow, the Strimzi/kafka-exporter) can tell a sanctioned replay from an incident; the
chart's recording rule `reprise:consumergroup_under_replay` is what those alerts join on (docs/monitoring.md).

Roles:
- `live`: the service's own group. A Rewind moves its offsets back; a Handover's guard skips on it until each
  partition is handed back.
- `replay`: the temporary group of a Parallel or Handover replay, which starts at the beginning of history.
- `drain`: a LakeReplay's group on its backfill topic, which Spark fills faster than the drain reads it.
- `downstream`: a Backfill's `downstreamGroups`, whose topics the Backfill writes into.

A group is under a replay only in the phases where the replay moves it (Running, Suspended, Draining): before
approval nothing moved yet, and once Complete or Failed a lag that is left is no longer by design.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, NamedTuple

from ..shared.constants import replay_group_name

Role = Literal["live", "replay", "drain", "downstream"]

#: The phases in which a replay moves its groups (api.common.Phase values).
MOVING_PHASES = frozenset({"Running", "Suspended", "Draining"})


class GroupUnderReplay(NamedTuple):
    """One consumer group a replay moves on purpose."""

    group: str
    role: Role


def groups_under_replay(
    kind: str, namespace: str, name: str, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> list[GroupUnderReplay]:
    """The groups one resource moves on purpose right now, from its spec and status as the API server holds
    them (camelCase); empty outside `MOVING_PHASES`."""
    if status.get("phase") not in MOVING_PHASES:
        return []
    children = status.get("children") or {}
    found: list[GroupUnderReplay] = []
    if kind == "Reconsume":
        mode = spec.get("mode")
        live = spec.get("consumerGroup")
        if live and mode in ("Rewind", "Handover"):
            found.append(GroupUnderReplay(live, "live"))
        if mode in ("Parallel", "Handover"):
            # The group the replay really uses (status), else the one it will use (spec, or the default name).
            replay = children.get("replayGroup") or spec.get("replayGroup") or replay_group_name(namespace, name)
            found.append(GroupUnderReplay(replay, "replay"))
    elif kind == "LakeReplay":
        drain = children.get("replayGroup") or spec.get("drainGroup")
        if drain:
            found.append(GroupUnderReplay(drain, "drain"))
        # then.reconsume runs as a child Reconsume, which exports its own groups.
    elif kind == "Backfill":
        found.extend(GroupUnderReplay(group, "downstream") for group in spec.get("downstreamGroups") or [])
    return sorted(set(found))
