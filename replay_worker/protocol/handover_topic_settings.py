"""The settings a handover topic must have, and the reason a topic with other settings is refused.

One topic per namespace (`reprise.handover.<namespace>` by default), created by the platform or by the operator with
these settings; tenants only read and write it (docs/security.md). Whoever created a topic, a reader or writer that
finds one whose settings would lose or break handover state refuses it, naming the setting, instead of working on
it (security review M3: a topic created first by a tenant with `cleanup.policy=delete` and a short retention lost
every team's state).
"""

from __future__ import annotations

from typing import Mapping

#: What the protocol's records need, on every handover topic:
#: - compacted: the latest record of each key is kept for as long as the replay runs;
#: - `min.compaction.lag.ms`: a record stays readable as written for a minute before compaction may replace it;
#: - `max.message.bytes`: one record of at most the protocol's 1 MiB (HANDOVER.md, Bad input) plus a batch header;
#: - a size cap: `delete` beside `compact`, by size only (`retention.bytes`, 1 GiB; never by age), so a flood of
#:   distinct keys fills at most that much disk, and only its own namespace's topic.
REQUIRED = {
    "cleanup.policy": "compact,delete",
    "min.compaction.lag.ms": "60000",
    "max.message.bytes": "1048588",
    "retention.ms": "-1",
    "retention.bytes": "1073741824",
}
#: The settings a refusal reads: a describe of the topic's configuration asks for these.
CHECKED = ("cleanup.policy", "retention.ms", "max.message.bytes")
#: The largest record the protocol writes, with Kafka's batch header (`max.message.bytes` counts it).
LARGEST_RECORD = 1048588


def refusal(topic: str, config: Mapping[str, str]) -> str | None:
    """Why `topic`, with these settings, cannot hold handover state; None when it can."""
    policy = {p.strip() for p in config.get("cleanup.policy", "delete").split(",")}
    if "compact" not in policy:
        return (
            f"handover topic {topic} has cleanup.policy={','.join(sorted(policy))}: it must be compacted "
            f"(cleanup.policy=compact, or compact,delete with retention.ms=-1), or running replays lose their state"
        )
    if "delete" in policy and config.get("retention.ms", "604800000") != "-1":
        return (
            f"handover topic {topic} deletes records after retention.ms={config.get('retention.ms', '604800000')}: "
            f"set retention.ms=-1 (a size cap is retention.bytes), or a long replay loses its start"
        )
    limit = config.get("max.message.bytes")
    if limit is not None and limit.isdigit() and int(limit) < LARGEST_RECORD:
        return (
            f"handover topic {topic} has max.message.bytes={limit}: the protocol writes records up to "
            f"{LARGEST_RECORD} bytes; set it to at least that"
        )
    return None
