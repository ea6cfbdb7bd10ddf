"""The level at which each of librdkafka's own log lines shows, once it comes through Python logging. Pure.

confluent-kafka maps librdkafka's syslog levels onto Python's (0-2 CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO,
7 DEBUG). Some lines librdkafka logs as fatal are the expected end of a race Reprise starts on purpose: the
replicas of a replay and the operator bootstrap it at once with one transactional id (HANDOVER.md 5.1), and each
newer producer fences the older one, which then retries and reads what the winner wrote. On a normal start its
`FATAL ... fenced by a newer instance` and `TXNERR ... fenced by newer producer instance` lines were printed raw
on the operator's terminal. They are routine: INFO, one line each (the bootstrap logs its retry at WARNING).
"""

from __future__ import annotations

import logging

#: Parts of librdkafka's messages of a transactional producer fenced by a newer one with the same id.
FENCED = ("fenced by a newer instance", "fenced by newer producer instance")


def level_of(levelno: int, message: str) -> int:
    """The level a librdkafka line shows at: its own, except a fenced producer's, which is routine (INFO)."""
    if levelno > logging.INFO and any(part in message for part in FENCED):
        return logging.INFO
    return levelno


class LibrdkafkaLevels(logging.Filter):
    """Gives each record of a librdkafka logger the level `level_of` says, shown only where that level is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        level = level_of(record.levelno, record.getMessage())
        if level == record.levelno:
            return True
        record.levelno, record.levelname = level, logging.getLevelName(level)
        return logging.getLogger(record.name).isEnabledFor(level)
