"""Verify before cutover: `spec.verify` (a Job the team writes) and the shadow hold of a Parallel replay.

Seed 001's shadow migration runs validation jobs between catching up and cutting over ("this critical
go/no-go step"); seed 002 validates the staging output before the swap. `spec.verify` is that step,
declared: a Job pod template Reprise runs once the replay has caught up. A Job that succeeds lets the
replay complete; one that fails ends it Failed with reason VerifyFailed and keeps what it made, so the
team can look, fix by hand and re-run the check with the annotation `reprise.io/reverify`.

`completion.hold: UntilCutover` (Parallel only) keeps the replay following the live topic after it
caught up, so the shadow stays current while the Job checks it, until the cutover is approved.
"""

from __future__ import annotations

from datetime import timedelta
from enum import Enum
from typing import Optional

from pydantic import Field

from .common import ApiModel, Completion, Duration, FreeformObject, StatusModel, StatusTime, rule

#: The annotation that runs a failed verification's Job again, without replaying. Any new value re-runs.
REVERIFY_ANNOTATION = "reprise.io/reverify"
#: The annotation that approves the cutover of a held replay (approval Manual).
CUTOVER_ANNOTATION = "reprise.io/approve-cutover"


class Verify(ApiModel):
    """The go/no-go check: a Job Reprise runs once the replay caught up."""

    template: FreeformObject = Field(
        description=(
            "A pod template (core/v1 PodTemplateSpec) of the check, for example a job that counts the rows "
            "of the replay's sink against the live topic. It exits 0 when the replay may complete; on a "
            "failure, its termination message (or the tail of its log) becomes the Failed condition's "
            "message. Its environment tells it the replay: REPRISE_REPLAY_ID, REPRISE_REPLAY_NAME, "
            "REPRISE_MODE, REPRISE_TOPICS, REPRISE_REPLAY_GROUP, REPRISE_LIVE_GROUP, "
            "REPRISE_BOOTSTRAP_SERVERS and REPRISE_PLAN (JSON: topic, partition, startOffset, endOffset)."
        ),
    )
    retries: int = Field(
        default=0,
        ge=0,
        le=10,
        description="How often a failed pod of the check is retried before the check fails (the Job's backoffLimit). Default 0.",
    )
    timeout: Duration = Field(
        default=timedelta(minutes=10),
        description=(
            "How long the check may run in all, as a Go duration such as 10m; longer fails it with reason "
            "VerifyFailed (the Job's activeDeadlineSeconds). Default 10m."
        ),
        json_schema_extra={"default": "10m"},
    )


class CompletionHold(str, Enum):
    """What a caught-up replay waits for before it stops."""

    UNTIL_CUTOVER = "UntilCutover"


class ReconsumeCompletion(Completion):
    """When a Reconsume counts as finished."""

    hold: Optional[CompletionHold] = Field(
        default=None,
        description=(
            "Parallel only. UntilCutover: the replay does not stop at the live group's offsets; it keeps "
            "following the live topic so the shadow stays current, runs spec.verify while it follows, and "
            "stops and tears down only once the cutover is approved (at once with approval Automatic, "
            "else with the annotation reprise.io/approve-cutover=true). Unset: stop at the live group's "
            "offsets."
        ),
    )


def verify_rules(parent: str) -> list[dict[str, str]]:
    """CEL on a Reconsume spec: where verify and the hold apply."""
    return [
        rule(
            "!has(self.verify) || self.mode != 'Rewind'",
            f"{parent}.verify: not allowed with mode Rewind, which replays in the live group itself: there "
            "is no moment before the cutover to check; use Parallel or Handover",
            field_path=".verify",
            reason="FieldValueForbidden",
        ),
        rule(
            "!has(self.completion) || !has(self.completion.hold) || self.mode == 'Parallel'",
            f"{parent}.completion.hold: only with mode Parallel; a Handover's guard skips the replayed "
            "records in the live service until each partition is handed over, and that cannot be held open",
            field_path=".completion.hold",
            reason="FieldValueForbidden",
        ),
        rule(
            "!has(self.completion) || !has(self.completion.hold) || !has(self.consumer) "
            "|| !has(self.consumer.entrypoint) || self.consumer.entrypoint != 'Service'",
            f"{parent}.completion.hold: needs consumer.entrypoint ReplayWorker; the Java and Go replay roles "
            "of entrypoint Service stop at the live group's offsets and do not follow the live topic "
            "(REPRISE_FOLLOW) yet",
            field_path=".completion.hold",
            reason="FieldValueForbidden",
        ),
    ]


def check_verify(
    parent: str, mode: str, verify: Optional[Verify], completion: ReconsumeCompletion, entrypoint: Optional[str] = None
) -> None:
    """The Python mirror of `verify_rules`."""
    if verify is not None and mode == "Rewind":
        raise ValueError(f"{parent}.verify: not allowed with mode Rewind")
    if completion.hold is not None and mode != "Parallel":
        raise ValueError(f"{parent}.completion.hold: only with mode Parallel")
    if completion.hold is not None and entrypoint == "Service":
        raise ValueError(f"{parent}.completion.hold: needs consumer.entrypoint ReplayWorker")


class VerificationState(str, Enum):
    """Where the verification is."""

    WAITING = "Waiting"
    RUNNING = "Running"
    PASSED = "Passed"
    FAILED = "Failed"


class VerificationStatus(StatusModel):
    """The go/no-go check of spec.verify."""

    state: Optional[VerificationState] = Field(
        default=None,
        description="Waiting (not caught up yet), Running (the Job runs), Passed, Failed.",
    )
    job: Optional[str] = Field(default=None, description="The Job of the latest run; kept while the resource exists.")
    run: int = Field(default=0, ge=0, description="How many times the check was started (re-runs included).")
    rerun: Optional[str] = Field(
        default=None, description="The value of the annotation reprise.io/reverify last honoured."
    )
    message: Optional[str] = Field(default=None, max_length=4096, description="The failed Job's termination message.")
    started_at: Optional[StatusTime] = Field(default=None, description="When the latest run started.")
    finished_at: Optional[StatusTime] = Field(default=None, description="When the latest run finished.")
    cutover_approved_at: Optional[StatusTime] = Field(
        default=None, description="completion.hold: when the cutover was approved."
    )


__all__ = [
    "CUTOVER_ANNOTATION",
    "REVERIFY_ANNOTATION",
    "CompletionHold",
    "ReconsumeCompletion",
    "VerificationState",
    "VerificationStatus",
    "Verify",
    "check_verify",
    "verify_rules",
]
