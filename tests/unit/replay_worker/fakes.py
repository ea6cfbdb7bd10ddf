"""Stand-ins for confluent-kafka objects in unit tests of pure code (no broker)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeMessage:
    """What the worker reads from a confluent_kafka.Message."""

    _topic: str = "orders"
    _partition: int = 0
    _offset: int = 0
    _key: bytes | None = b"k"
    _value: bytes | None = b"{}"
    _headers: list[tuple[str, bytes | None]] | None = None
    _timestamp: tuple[int, int] = (1, 1714521600000)

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def error(self) -> None:
        return None


@dataclass
class FakeProducer:
    """Records `produce` calls."""

    produced: list[dict[str, Any]] = field(default_factory=list)

    def produce(
        self,
        topic: str | None = None,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
        **kwargs: Any,
    ) -> None:
        """Recorded in `forward_args`' form (confluent-kafka's positional order: topic, value, key, partition,
        callback, on_delivery, timestamp, headers): defaults (no partition, no timestamp, no headers) left out."""
        kwargs.update(value=value, key=key, partition=partition, timestamp=timestamp, headers=headers)
        if topic is not None:
            kwargs["topic"] = topic
        if kwargs.get("partition", -1) == -1:
            kwargs.pop("partition", None)
        if not kwargs.get("timestamp"):
            kwargs.pop("timestamp", None)
        if not kwargs.get("headers"):
            kwargs.pop("headers", None)
        self.produced.append(kwargs)

    def poll(self, _timeout: float = 0) -> int:
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return 0
