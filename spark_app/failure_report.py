"""What the job says of its own failure, where Kubernetes shows it: the driver pod's termination message.

The Spark operator reports a failed driver only as "driver container failed with ExitCode: 1"; the reason (a
ClassNotFoundException for a filesystem the image lacks, a refused credential, a filter over a missing
column) is somewhere in the driver's log. The job writes that one line to the container's termination
message file, which the kubelet puts into the pod's status, and the operator into the LakeReplay's
(`reprise_operator.rules.pod_failures`).

`failure_summary` is pure; `write_termination_message` is the one write, and never fails the job's exit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: Kubernetes' default terminationMessagePath; the kubelet keeps at most 4096 bytes of it.
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
MESSAGE_LIMIT = 4096


def failure_summary(exc: BaseException) -> str:
    """The line that says why: a JVM error's last `Caused by:` (its root cause), else the Java exception a
    Py4J error carries (the line after "An error occurred while calling ..."), else the exception itself."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    caused = [line for line in lines if line.startswith("Caused by:")]
    if caused:
        return caused[-1].removeprefix("Caused by:").strip()
    # Py4JJavaError: "An error occurred while calling o55.parquet.\n: java.lang.RuntimeException: ...".
    java = next((line.removeprefix(":").strip() for line in lines if line.startswith(": ")), None)
    return java or f"{type(exc).__name__}: {lines[0]}"


def termination_message_path() -> Path:
    """The container's termination message file. Where the container's paths are mapped to local ones (the
    local platform's node agent, `REPRISE_PATH_PREFIX_MAP`), the local file it reads."""
    try:
        mapped = json.loads(os.environ.get("REPRISE_PATH_PREFIX_MAP") or "{}")
    except ValueError:
        mapped = {}
    local = mapped.get(TERMINATION_MESSAGE_PATH) if isinstance(mapped, dict) else None
    return Path(local or TERMINATION_MESSAGE_PATH)


def write_termination_message(message: str) -> None:
    """Best-effort: outside a container there may be no such file to write, and the exit code says enough."""
    path = termination_message_path()
    if not path.parent.is_dir():
        return
    try:
        path.write_text(message.encode("utf-8")[:MESSAGE_LIMIT].decode("utf-8", "ignore"))
    except OSError:
        pass
