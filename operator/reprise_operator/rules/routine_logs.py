"""Which of Kopf's own log lines are routine, and so shown at DEBUG only. Pure.

Kopf logs every handler and timer run that succeeds at INFO ("Handler 'reconsume/...' succeeded.", "Timer
'...' succeeded."), and posts each as a Kubernetes Event. A reconcile timer runs every poll interval for every
resource, so on `make run` those lines were hundreds, hiding the lines that matter (a failure, a retry, a
phase change). They are routine: DEBUG (`--verbose` shows them), and no Event. Kopf's failure and retry lines
are untouched.

The same holds for confluent-kafka's warning when a bootstrap producer that a newer one fenced is closed
("abort_transaction failed during close: ... fenced by a newer instance"): the replicas and the operator race to
bootstrap a replay on purpose (HANDOVER.md 5.1), and the loser reads what the winner wrote. INFO, one line.
"""

from __future__ import annotations

import logging
import re

#: Kopf's success line of one handler, timer or daemon run, and its summary of a cause with nothing failed.
ROUTINE = re.compile(
    r"^(?:(?:Handler|Timer|Daemon) '[^']*' succeeded\.|[A-Z][a-z]+ is processed: \d+ succeeded; 0 failed\.)$"
)
#: Kopf's logger of per-object lines (the one that also posts them as Events).
KOPF_OBJECTS = "kopf.objects"
#: Python's warnings, once `logging.captureWarnings` routes them to logging.
WARNINGS = "py.warnings"
FENCED = "fenced by a newer instance"


def is_routine(message: str) -> bool:
    return bool(ROUTINE.match(message))


class RoutineAtDebug(logging.Filter):
    """Shows a routine line at DEBUG, and only where DEBUG is on; every other line as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG or not is_routine(record.getMessage()):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


class FencedAtInfo(logging.Filter):
    """Shows the warning of a closed, fenced bootstrap producer at INFO, on one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if FENCED not in message:
            return True
        record.msg, record.args = " ".join(message.split()), None
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


def one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """`warnings.formatwarning` on one line (the operator's log lines are one JSON object each)."""
    return f"{category.__name__}: {' '.join(str(message).split())} ({filename}:{lineno})"


def install() -> None:
    """Demote the routine lines (call once the logging is configured)."""
    logging.getLogger(KOPF_OBJECTS).addFilter(RoutineAtDebug())
    logging.getLogger(WARNINGS).addFilter(FencedAtInfo())
