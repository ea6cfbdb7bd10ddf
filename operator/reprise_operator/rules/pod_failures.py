"""Which of a resource's child pods are failing, why, and where their logs are: what status says of them.

Pure. A replay whose pods crash-loop (a handler that cannot be imported, a Secret it cannot read) or whose
Spark driver failed only shows, from the outside, as a replay that does not move; the reason is in the
pods' container statuses. This module reads those statuses (`failing_containers`) into one sentence per
container that names the pod, the kubelet's reason, the restarts, the root cause from the termination message
(`root_cause`: the exception line of a Python traceback or a JVM stack trace), and the command that shows
its log (`pod_failure_message`).

The termination message carries the root cause because every container Reprise runs reports the tail of
its log when it fails without writing a message (`terminationMessagePolicy: FallbackToLogsOnError`,
`workloads`), and the lake job writes its own (`spark_app.main`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

#: A waiting container in one of these will not run until something is fixed or it is restarted again.
FAILING_WAITING = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
#: The longest root cause a condition message carries per container.
CAUSE_LIMIT = 600
#: At most this many containers are named; the rest are counted.
NAMED_LIMIT = 3


@dataclass(frozen=True)
class ContainerFailure:
    """One failing container of one pod."""

    pod: str
    container: str
    #: The kubelet's reason: CrashLoopBackOff, Error, OOMKilled, ImagePullBackOff, ...
    reason: str
    restarts: int
    #: The root cause from its (last) termination message, or the kubelet's waiting message; '' if none.
    cause: str
    #: Its failed run is the previous one (the container restarts): its log is `kubectl logs --previous`.
    previous: bool


def _log_message(line: str) -> str:
    """A JSON log line's message (the worker's and the Java/Go roles' structured logs), else the line."""
    if not line.startswith("{"):
        return line
    try:
        body = json.loads(line)
    except ValueError:
        return line
    if not isinstance(body, dict):
        return line
    said = next((body[k] for k in ("msg", "message") if isinstance(body.get(k), str)), None)
    return said if said else line


def root_cause(message: str) -> str:
    """The line of a termination message that says why: a JVM trace's last `Caused by:`; else the last line
    (a Python traceback's exception; a JSON log line's message). Bounded."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    caused = [line for line in lines if line.startswith("Caused by:")]
    if caused:
        cause = caused[-1].removeprefix("Caused by:").strip()
    else:
        # A Python traceback ends with the exception; a log tail ends with the last thing the program said
        # before it exited, which for a program that failed is why.
        cause = _log_message(lines[-1])
    return cause if len(cause) <= CAUSE_LIMIT else cause[: CAUSE_LIMIT - 3] + "..."


def _terminated_failure(state: Mapping[str, Any]) -> Mapping[str, Any] | None:
    terminated = state.get("terminated") or {}
    return terminated if terminated and terminated.get("exitCode") not in (0, None) else None


def failing_containers(pods: Iterable[Mapping[str, Any]]) -> list[ContainerFailure]:
    """The containers (init containers too) that crash-loop, cannot start, or ended with a non-zero exit."""
    found = []
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name", "")
        status = pod.get("status") or {}
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            state, last = c.get("state") or {}, c.get("lastState") or {}
            waiting = state.get("waiting") or {}
            ended = _terminated_failure(state)
            if waiting.get("reason") in FAILING_WAITING:
                before = _terminated_failure(last)
                reason = waiting["reason"]
                # A back-off's own message ("back-off 40s restarting ...") says nothing of the cause; a pull's does.
                own = "" if reason == "CrashLoopBackOff" else waiting.get("message") or ""
                message = (before or {}).get("message") or own
                previous = before is not None
            elif ended is not None:
                message, reason, previous = ended.get("message") or "", ended.get("reason") or "Error", False
            else:
                continue
            found.append(
                ContainerFailure(
                    pod=name,
                    container=c.get("name", ""),
                    reason=reason,
                    restarts=int(c.get("restartCount") or 0),
                    cause=root_cause(message),
                    previous=previous,
                )
            )
    return sorted(found, key=lambda f: (f.pod, f.container))


def log_command(namespace: str, failure: ContainerFailure) -> str:
    """The command that shows the failed run's log."""
    previous = " --previous" if failure.previous else ""
    return f"kubectl logs -n {namespace} {failure.pod} -c {failure.container}{previous}"


def describe_failure(namespace: str, failure: ContainerFailure) -> str:
    """`pod P container C is CrashLoopBackOff (5 restarts): <cause>; its log: kubectl logs ...`."""
    restarts = f" ({failure.restarts} restart{'s' if failure.restarts != 1 else ''})" if failure.restarts else ""
    cause = f": {failure.cause}" if failure.cause else " (it wrote no termination message)"
    return (
        f"pod {failure.pod} container {failure.container} is {failure.reason}{restarts}{cause}; "
        f"its log: {log_command(namespace, failure)}"
    )


def pod_failure_message(namespace: str, failures: list[ContainerFailure]) -> str:
    """One message for all of them: the first few in full, the rest counted."""
    said = [describe_failure(namespace, f) for f in failures[:NAMED_LIMIT]]
    more = len(failures) - NAMED_LIMIT
    if more > 0:
        said.append(f"and {more} more failing container(s)")
    return "; ".join(said)
