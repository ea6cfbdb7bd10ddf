"""Verify before cutover: when the go/no-go Job runs, what it is told, and what its outcome does. Pure.

A replay with `spec.verify` does not go from caught-up straight to teardown. Once it has caught up (lag
zero for `drainedFor`, or with a shadow hold: at the live group's offsets on every partition), Reprise runs
the team's check as a Job (`verify_job`); the Job's pod learns the replay from its environment
(`verify_env`). The gate (`next_gate`) then says what the replay does next:

    follow -> verify (Job runs) -> passed -> cutover (teardown, Complete)
                                \\-> with completion.hold: await-cutover until approved -> cutover
                                \\-> failed: Failed/VerifyFailed, children kept; reprise.io/reverify re-runs

The Reconsume steps (`reconsume/`) do the I/O around these rules; nothing here talks to an API.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable, Literal, Mapping

from ..api.verify import CUTOVER_ANNOTATION, REVERIFY_ANNOTATION, Verify
from ..shared.constants import bounded_name, child_labels
from .progress import PartitionView
from .workloads import Owner, env_list, job_manifest, merge_env

Gate = Literal["follow", "verify", "await-cutover", "cutover", "failed"]

#: The longest termination message kept in status (a kubelet keeps at most 4096 bytes of it).
MESSAGE_LIMIT = 2048


def next_gate(
    *,
    caught_up: bool,
    has_verify: bool,
    hold: bool,
    state: str | None,
    cutover_approved: bool,
) -> Gate:
    """What a Parallel/Handover replay does next.

    `caught_up` is the drain rule held for drainedFor. Once the check has started, the replay no longer
    waits for it: with a hold, live traffic moves the lag up and down while the Job runs, and that is the
    point of keeping the shadow current."""
    if state == "Failed":
        return "failed"
    if state == "Running":
        return "verify"
    if state != "Passed":
        if not caught_up:
            return "follow"
        if has_verify:
            return "verify"
    if hold and not cutover_approved:
        return "await-cutover"
    return "cutover"


def cutover_approved(approval: str, annotations: Mapping[str, str]) -> bool:
    """A held replay cuts over at once with approval Automatic, else when someone annotates it."""
    return approval == "Automatic" or annotations.get(CUTOVER_ANNOTATION) == "true"


def rerun_requested(annotations: Mapping[str, str], honoured: str | None) -> str | None:
    """The new value of `reprise.io/reverify`, when it asks for a run not yet made; else None."""
    value = annotations.get(REVERIFY_ANNOTATION)
    if not value or value == honoured:
        return None
    return value


def verify_job_name(cr_name: str, run: int) -> str:
    """One Job per run: a re-run never waits for the previous Job's deletion to free its name."""
    return bounded_name(cr_name, "verify", str(run))


def verify_env(
    *,
    rid: str,
    name: str,
    mode: str,
    topics: Iterable[str],
    replay_group: str | None,
    live_group: str | None,
    bootstrap_servers: str,
    plan: Mapping[tuple[str, int], tuple[int, int]],
) -> dict[str, str]:
    """What the check is told about the replay it verifies."""
    env = {
        "REPRISE_REPLAY_ID": rid,
        "REPRISE_REPLAY_NAME": name,
        "REPRISE_MODE": mode,
        "REPRISE_TOPICS": ",".join(topics),
        "REPRISE_BOOTSTRAP_SERVERS": bootstrap_servers,
        "REPRISE_PLAN": json.dumps(
            [{"topic": t, "partition": p, "startOffset": s, "endOffset": e} for (t, p), (s, e) in sorted(plan.items())],
            separators=(",", ":"),
        ),
    }
    if replay_group:
        env["REPRISE_REPLAY_GROUP"] = replay_group
    if live_group:
        env["REPRISE_LIVE_GROUP"] = live_group
    return env


def verify_job(
    *,
    owner: Owner,
    namespace: str,
    kind: str,
    run: int,
    verify: Verify,
    env: Mapping[str, str],
) -> dict:
    """The check's Job: the user's pod template with the replay in its environment.

    Each container reports its log's tail as the termination message when it fails without writing one
    (FallbackToLogsOnError), so a check that only prints why it failed still explains itself in status."""
    template = copy.deepcopy(verify.template)
    pod_spec = dict(template.get("spec") or {})
    containers = pod_spec.get("containers") or []
    if not containers:
        raise ValueError("spec.verify.template.spec.containers is empty: name the check's container and command")
    ours = env_list(env)
    pod_spec["containers"] = [
        {"terminationMessagePolicy": "FallbackToLogsOnError", **c, "env": merge_env(c.get("env") or [], ours)}
        for c in containers
    ]
    manifest = job_manifest(
        owner=owner,
        name=verify_job_name(owner.name, run),
        namespace=namespace,
        labels={**child_labels(kind, owner.name, "verify"), "reprise.io/verify-run": str(run)},
        pod_spec=pod_spec,
        backoff_limit=verify.retries,
        pod_metadata=template.get("metadata"),
    )
    manifest["spec"]["activeDeadlineSeconds"] = max(1, int(verify.timeout.total_seconds()))
    return manifest


def termination_message(pods: Iterable[dict]) -> str:
    """The newest failed container's termination message among the Job's pods ('' when none wrote one)."""
    found: list[tuple[str, str]] = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated") or {}
            if terminated and terminated.get("exitCode") not in (0, None):
                message = (terminated.get("message") or "").strip()
                if message:
                    found.append((terminated.get("finishedAt") or "", message))
    if not found:
        return ""
    message = max(found)[1]
    return message if len(message) <= MESSAGE_LIMIT else "..." + message[-MESSAGE_LIMIT:]


def failure_message(job_name: str, job_reason: str, message: str) -> str:
    """The Failed condition's message: which Job, why Kubernetes gave up, and what the check said."""
    head = f"verification Job {job_name} failed ({job_reason or 'Failed'})"
    return f"{head}: {message}" if message else f"{head}; it wrote no termination message"


#: A worker reports its position at most every 2 s (`replay_worker.replay.consumer.PROGRESS_INTERVAL`); a shadow is
#: compared with where the live group was at least this long ago, so a position reported a moment before the
#: live group committed again still counts as caught up.
LIVE_LOOKBACK = timedelta(seconds=4)


@dataclass
class LiveHistory:
    """Recent samples of the live group's committed offsets, for the shadow's caught-up rule."""

    samples: deque[tuple[datetime, dict[tuple[str, int], int]]] = field(default_factory=lambda: deque(maxlen=32))

    def add(self, at: datetime, offsets: Mapping[tuple[str, int], int]) -> None:
        self.samples.append((at, dict(offsets)))

    def as_of(self, now: datetime, age: timedelta = LIVE_LOOKBACK) -> dict[tuple[str, int], int] | None:
        """The newest sample at least `age` old; None until there is one."""
        older = [offsets for at, offsets in self.samples if now - at >= age]
        return older[-1] if older else None


def shadow_caught_up(views: Iterable[PartitionView], live_committed: Mapping[tuple[str, int], int]) -> bool:
    """A held (following) replay has caught up when, on every partition, it processed at least up to the live
    group's committed offset: the Parallel finish rule, without finishing."""
    for view in views:
        live = live_committed.get((view.topic, view.partition))
        if view.position is None or (live is not None and view.position < live):
            return False
    return True
