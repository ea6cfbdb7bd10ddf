"""The continuation: the Reconsume a LakeReplay with `then.reconsume` creates on the live topics, starting at
the offsets of `spec.source.to` (the seam), and the message when Kafka no longer holds every record from
there. Pure: the caller reads the offsets and creates the Reconsume.
"""

from __future__ import annotations

from typing import Any

from ...api import API_VERSION, LAKE_REPLAY, LakeReplaySpec, ReconsumeSpec
from ...api.reconsume import ReconsumeMode
from ...shared.constants import bounded_name, child_labels
from replay_worker.contract import TopicPartitionKey
from ...rules.planning import Plan, log_start
from .spark_application import rfc3339_exact
from ...rules.workloads import Owner


def continuation_name(cr_name: str) -> str:
    return bounded_name(cr_name, "then")


def continuation_manifest(
    *,
    owner: Owner,
    name: str,
    namespace: str,
    spec: LakeReplaySpec,
    starts: dict[TopicPartitionKey, int],
) -> dict:
    """The Reconsume of then.reconsume: its start is the offsets at spec.source.to, every partition listed."""
    assert spec.then is not None
    then = spec.then.reconsume
    body: dict[str, Any] = {
        "kafka": spec.kafka.dump(),
        "topics": list(then.topics),
        "consumerGroup": then.consumer_group,
        "mode": then.mode.value,
        "start": {"offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(starts.items())]},
        "completion": then.completion.dump(),
        # The LakeReplay's plan was approved: its continuation is part of it.
        "approval": "Automatic",
        "suspend": spec.suspend,
        "cleanup": {"deleteReplayGroup": spec.cleanup.delete_replay_group},
    }
    if then.filter is not None:
        body["filter"] = then.filter.dump()
    if then.mode is ReconsumeMode.REWIND:
        body["liveDeployment"] = then.live_deployment.dump()  # type: ignore[union-attr]
    else:
        body["consumer"] = (then.consumer or spec.consumer).dump()
    if then.replay_group is not None:
        body["replayGroup"] = then.replay_group
    ReconsumeSpec.model_validate(body)  # what the API server would refuse, refused here with a clear error
    return {
        "apiVersion": API_VERSION,
        "kind": "Reconsume",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": child_labels(LAKE_REPLAY.kind, owner.name, "continuation"),
            "ownerReferences": [owner.reference()],
        },
        "spec": body,
    }


def continuation_retention_message(spec: LakeReplaySpec, plan: Plan) -> str:
    risky = plan.at_risk
    names = ", ".join(f"{p.topic}/{p.partition} (log starts at {log_start(p)})" for p in risky[:5])
    more = f" and {len(risky) - 5} more" if len(risky) > 5 else ""
    return (
        f"the live topics no longer hold every record from spec.source.to ({rfc3339_exact(spec.source.to)}) "
        f"on: {names}{more}: Kafka's retention deleted records the lake's range does not cover. Set "
        f"spec.source.to later, to at most the time of the oldest record Kafka still holds"
    )
