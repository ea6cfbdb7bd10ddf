"""approve, suspend, resume, cancel and rollback: each exactly what the documented kubectl step does, said
before it is done.

- approve: `kubectl annotate KIND NAME reprise.io/approve=true`; a replay held for its cutover
  (`completion.hold`) gets `reprise.io/approve-cutover=true` instead
- reverify: `kubectl annotate KIND NAME reprise.io/reverify=<new value> --overwrite` (a failed spec.verify check)
- suspend / resume: `kubectl patch KIND NAME --type=merge -p '{"spec":{"suspend":true|false}}'`
- cancel: `kubectl delete KIND NAME` (the finalizer hands partitions back and removes what Reprise made)
- rollback: the Rewind's ConfigMap `<name>-rollback` written back as the live group's offsets, which is what
  its `restore.sh` does with Kafka's own tool, refused unless the group is Empty.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Callable

from reprise_operator.api import GROUP, VERSION, KindDefinition
from reprise_operator.shared.constants import APPROVE_ANNOTATION, CREATED_FOR_ANNOTATION, rollback_configmap_name
from reprise_operator.doors.kafka_admin import ClientRefused, KafkaCluster, TopicPartitionKey
from reprise_operator.core.lifecycle import Resource, Waiting
from reprise_operator.api import ReconsumeSpec, KafkaConnection
from reprise_operator.api.verify import CUTOVER_ANNOTATION, REVERIFY_ANNOTATION
from reprise_operator.core.runtime import Runtime
from reprise_operator.shared.settings import OperatorSettings

from .connection import PluginError, Target, api_call, find
from .tables import table

Confirm = Callable[[str], bool]


def ask(question: str) -> bool:
    """A y/N prompt on the terminal; without one, the caller must have passed --yes."""
    if not sys.stdin.isatty():
        raise PluginError("this needs a confirmation and there is no terminal to ask on: pass --yes")
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


def _patch(target: Target, kind: KindDefinition, name: str, patch: dict, what: str) -> dict:
    return api_call(
        target.kube.custom.patch_namespaced_custom_object,
        GROUP,
        VERSION,
        target.namespace,
        kind.plural,
        name,
        patch,
        what=what,
    )


def _condition(body: dict, type_: str) -> dict:
    return next((c for c in (body.get("status") or {}).get("conditions") or [] if c.get("type") == type_), {})


def approve(target: Target, ref: str) -> str:
    kind, body = find(target, ref)
    name, phase = body["metadata"]["name"], (body.get("status") or {}).get("phase", "Pending")
    if _condition(body, "CutoverApproved").get("status") == "False":
        _patch(
            target,
            kind,
            name,
            {"metadata": {"annotations": {CUTOVER_ANNOTATION: "true"}}},
            f"approving the cutover of {kind.singular}/{name}",
        )
        return (
            f"{kind.singular}/{name}: cutover approved ({CUTOVER_ANNOTATION}=true); the operator stops the "
            "shadow and tears it down now"
        )
    if (body.get("spec") or {}).get("approval", "Automatic") == "Automatic":
        return f"{kind.singular}/{name} has approval: Automatic; nothing to approve (phase {phase})"
    if (body["metadata"].get("annotations") or {}).get(APPROVE_ANNOTATION) == "true":
        return f"{kind.singular}/{name} is already approved (phase {phase})"
    _patch(
        target,
        kind,
        name,
        {"metadata": {"annotations": {APPROVE_ANNOTATION: "true"}}},
        f"approving {kind.singular}/{name}",
    )
    return f"{kind.singular}/{name} approved ({APPROVE_ANNOTATION}=true); phase {phase}, the operator starts it now"


def reverify(target: Target, ref: str, now: Callable[[], float] = time.time) -> str:
    """Run a failed spec.verify check again, without replaying."""
    kind, body = find(target, ref)
    name, phase = body["metadata"]["name"], (body.get("status") or {}).get("phase", "Pending")
    failed = _condition(body, "Failed")
    if phase != "Failed" or failed.get("reason") != "VerifyFailed":
        raise PluginError(
            f"{kind.singular}/{name} is {phase}, not Failed with VerifyFailed: there is no failed check to run again"
        )
    value = str(int(now()))
    _patch(
        target,
        kind,
        name,
        {"metadata": {"annotations": {REVERIFY_ANNOTATION: value}}},
        f"re-running the check of {kind.singular}/{name}",
    )
    return f"{kind.singular}/{name}: the check runs again ({REVERIFY_ANNOTATION}={value})"


def set_suspend(target: Target, ref: str, suspend: bool) -> str:
    kind, body = find(target, ref)
    name, phase = body["metadata"]["name"], (body.get("status") or {}).get("phase", "Pending")
    if phase in ("Complete", "Failed"):
        raise PluginError(
            f"{kind.singular}/{name} is {phase}: there is nothing to {'suspend' if suspend else 'resume'}"
        )
    if bool((body.get("spec") or {}).get("suspend", False)) == suspend:
        return f"{kind.singular}/{name} already has spec.suspend: {str(suspend).lower()} (phase {phase})"
    _patch(target, kind, name, {"spec": {"suspend": suspend}}, f"patching {kind.singular}/{name}")
    if suspend:
        return (
            f"{kind.singular}/{name} suspended (spec.suspend: true): the operator scales what it runs to zero; "
            f"state stays in Kafka. Resume with: kubectl reprise resume {name}"
        )
    return f"{kind.singular}/{name} resumed (spec.suspend: false): it continues from the committed offsets"


def cancel(target: Target, ref: str, confirm: Confirm, wait: float) -> str:
    kind, body = find(target, ref)
    name, phase = body["metadata"]["name"], (body.get("status") or {}).get("phase", "Pending")
    mode = (body.get("spec") or {}).get("mode", "")
    if mode == "Rewind":
        effect = f"the live group's offsets stay where the rewind moved them (undo: kubectl reprise rollback {name})"
    elif mode == "Handover":
        effect = (
            "every partition is handed back to the live group at what the replay processed, then its Deployment, "
            "replay group and handover records are removed"
        )
    else:
        effect = "its Deployment, replay group and handover records are removed; the live group was never touched"
    if not confirm(f"Cancel {kind.singular}/{name} in {target.namespace} (phase {phase})? It is deleted; {effect}."):
        raise PluginError("not cancelled")
    api_call(
        target.kube.custom.delete_namespaced_custom_object,
        GROUP,
        VERSION,
        target.namespace,
        kind.plural,
        name,
        what=f"deleting {kind.singular}/{name}",
    )
    if wait <= 0:
        return f"{kind.singular}/{name} deleted; the operator's finalizer is cleaning up"
    deadline = time.monotonic() + wait
    while target.kube.get_custom(GROUP, VERSION, kind.plural, target.namespace, name) is not None:
        if time.monotonic() > deadline:
            raise PluginError(
                f"{kind.singular}/{name} is still being cleaned up after {wait:.0f}s: see why with "
                f"kubectl reprise status {name} and the operator's log"
            )
        time.sleep(1)
    return f"{kind.singular}/{name} cancelled: {effect}"


# ------------------------------------------------------------------------------------------ rollback


@dataclass(frozen=True)
class RollbackMove:
    topic: str
    partition: int
    now: int | None
    restore: int


def rollback_moves(
    snapshot: dict[TopicPartitionKey, int], committed: dict[TopicPartitionKey, int]
) -> list[RollbackMove]:
    """Pure: every partition of the snapshot, where the group is now and where it goes back to."""
    return [RollbackMove(t, p, committed.get((t, p)), o) for (t, p), o in sorted(snapshot.items())]


def moves_table(moves: list[RollbackMove]) -> str:
    return table(
        ("TOPIC", "PARTITION", "NOW", "RESTORED TO", "MOVE"),
        [
            (
                m.topic,
                m.partition,
                "-" if m.now is None else m.now,
                m.restore,
                "-" if m.now is None else f"{m.restore - m.now:+d}",
            )
            for m in moves
        ],
    )


def rollback(
    target: Target,
    name: str,
    confirm: Confirm,
    bootstrap: str | None,
    out=print,
    token_endpoints: tuple[str, ...] = (),
) -> str:
    if target.namespace is None:
        raise PluginError("rollback needs a namespace (-n NAMESPACE), not -A")
    if "/" in name:
        name = name.split("/", 1)[1]
    cm_name = rollback_configmap_name(name)
    config_map = api_call(
        target.kube.core.read_namespaced_config_map,
        cm_name,
        target.namespace,
        what=f"rollback ConfigMap {target.namespace}/{cm_name} (only a Rewind that moved offsets has one)",
    )
    config_map = config_map.to_dict()
    group = ((config_map.get("metadata") or {}).get("annotations") or {}).get("reprise.io/consumer-group")
    raw = (config_map.get("data") or {}).get("offsets.json")
    if not group or not raw:
        raise PluginError(
            f"ConfigMap {cm_name} is not a Reprise rollback snapshot (no reprise.io/consumer-group "
            "annotation or offsets.json)"
        )
    snapshot = {(o["topic"], int(o["partition"])): int(o["offset"]) for o in json.loads(raw)}
    body = target.kube.get_custom(GROUP, VERSION, "reconsumes", target.namespace, name)
    created_for = ((config_map.get("metadata") or {}).get("annotations") or {}).get(CREATED_FOR_ANNOTATION)
    if body is not None and created_for != (body.get("metadata") or {}).get("uid"):
        # Review L1: anyone who may create ConfigMaps can put one under this name; the operator refuses to
        # adopt it, and the person restoring from it is told too.
        raise PluginError(
            f"ConfigMap {cm_name} was not written by Reprise for reconsume {name} (its {CREATED_FOR_ANNOTATION} "
            f"is {created_for or 'missing'}, the Reconsume's uid is {body['metadata'].get('uid')}): it is not this "
            "Rewind's snapshot, so it is not restored"
        )
    cluster = _cluster(target, name, body, bootstrap, token_endpoints)
    try:
        description = cluster.describe_group(group)
        committed = cluster.committed_offsets(group, list(snapshot))
    except ClientRefused as exc:
        raise PluginError(f"InvalidKafkaSetting: spec.kafka.configFrom.secretRef: {exc}") from None
    if description.state not in ("Empty", "Dead"):
        live = ((body or {}).get("spec") or {}).get("liveDeployment", {}).get("name", "<live deployment>")
        stop = (
            f"kubectl reprise suspend {name}"
            if body and (body.get("status") or {}).get("phase") in ("Running", "Draining")
            else f"kubectl scale deployment {live} -n {target.namespace} --replicas=0"
        )
        raise PluginError(
            f"group {group} is {description.state} with {len(description.members)} member(s); Kafka moves offsets only "
            f"of an Empty group: stop its consumers first ({stop}), then run rollback again"
        )
    moves = rollback_moves(snapshot, committed)
    out(f"group {group}: offsets from ConfigMap {cm_name}\n{moves_table(moves)}")
    if not confirm(f"Move group {group} to these offsets?"):
        raise PluginError("not rolled back")
    cluster.alter_offsets(group, snapshot)
    after = cluster.committed_offsets(group, list(snapshot))
    wrong = [f"{t}/{p}" for (t, p), o in snapshot.items() if after.get((t, p)) != o]
    if wrong:
        raise PluginError(f"Kafka did not take the offsets of {', '.join(wrong)}; run rollback again")
    return f"group {group} rolled back on {len(snapshot)} partition(s); start its consumers again to resume from there"


def _cluster(
    target: Target, name: str, body: dict | None, bootstrap: str | None, token_endpoints: tuple[str, ...]
) -> KafkaCluster:
    """The Kafka cluster of the Reconsume (with its Secret), or `--bootstrap-servers` when it is gone. The
    Secret's settings go through the operator's allow-list (`Resource.kafka`): the person running rollback
    runs none of the tenant's file, URL or plugin settings on their machine."""
    if body is None and bootstrap is None:
        raise PluginError(f"reconsume {name} is gone, so its Kafka connection is unknown: pass --bootstrap-servers")
    rt = Runtime(settings=OperatorSettings(oauth_token_endpoints=token_endpoints), kube=target.kube)
    if body is not None:
        kafka = ReconsumeSpec.model_validate(body.get("spec") or {}).kafka
        if bootstrap is not None:
            kafka = kafka.model_copy(update={"bootstrap_servers": bootstrap})
    else:
        kafka = KafkaConnection(bootstrap_servers=bootstrap)
    resource = Resource(
        "Reconsume", "reconsumes", body or {"metadata": {"name": name, "namespace": target.namespace}}, {}, rt
    )
    try:
        cluster, _ = asyncio.run(resource.kafka(kafka))
    except Waiting as waiting:
        raise PluginError(f"{waiting.reason}: {waiting.message}") from None
    return cluster
