"""Structured logs: one JSON object per line on stderr, with the replay id and member on every line.

Fields passed with `extra={...}` become JSON fields. Nothing from the Kafka config folder is ever passed
to a logger (see `kafka_clients`); librdkafka's own log lines come through the `replay_worker.librdkafka`
logger, which only carries the client's messages (they name brokers, never credentials).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def __init__(self, static: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.static = dict(static or {})

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **self.static,
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                body[key] = value
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, ensure_ascii=False)


def setup(level: str = "INFO", **static: Any) -> None:
    """Route every logger to stderr as JSON lines, tagged with `static` fields (replay id, member)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(static))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # librdkafka reports every refused connection while a broker restarts; keep those at warning and up.
    logging.getLogger("replay_worker.librdkafka").setLevel(max(logging.WARNING, root.level))
    # confluent-kafka's RuntimeWarnings (a bootstrap producer closed while a fenced init is still under way)
    # become log lines like any other, not raw lines on stderr.
    logging.captureWarnings(True)
