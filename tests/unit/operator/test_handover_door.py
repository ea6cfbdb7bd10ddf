"""The handover topics' door keeps Kafka off Kopf's event loop: every call of its async face runs on a worker
thread and hands back what the blocking call returned (the blocking calls are recorded, not sent to Kafka)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from reprise_operator.doors.handover_state import HandoverReaders


class RecordingReaders(HandoverReaders):
    """The door with its Kafka calls replaced by a record of which thread made them, with what."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, tuple[Any, ...]]] = []

    def _record(self, name: str, *args: Any) -> None:
        self.calls.append((name, threading.get_ident(), args))

    def ensure(self, *args: Any) -> None:
        self._record("ensure", *args)

    def replay(self, *args: Any) -> Any:  # type: ignore[override]
        self._record("replay", *args)
        return "the replay's state"

    def sync(self, *args: Any) -> bool:
        self._record("sync", *args)
        return True

    def bootstrap(self, *args: Any) -> str | None:  # type: ignore[override]
        self._record("bootstrap", *args)
        return "left to the replicas"

    def force_handover(self, *args: Any, by: str, reason: str) -> int:  # type: ignore[override]
        self._record("force_handover", *args, by, reason)
        return 2

    def tombstone(self, *args: Any) -> int:
        self._record("tombstone", *args)
        return 7


def test_every_call_of_the_async_face_runs_off_the_event_loop_and_returns_its_answer() -> None:
    readers = RecordingReaders()
    where = ("kafka:9092", {"security.protocol": "PLAINTEXT"}, "reprise-handover")

    async def reconcile() -> tuple[int, list[Any]]:
        answers = [
            await readers.aio.ensure(*where),
            await readers.aio.replay(*where, "ns/r/1234"),
            await readers.aio.sync(*where),
            await readers.aio.bootstrap("the worker's settings", where[1]),
            await readers.aio.force_handover(*where, "ns/r/1234", {("t", 0): 5}, by="operator", reason="cancelled"),
            await readers.aio.tombstone(*where, "ns/r/1234"),
        ]
        return threading.get_ident(), answers

    loop_thread, answers = asyncio.run(reconcile())
    assert answers == [None, "the replay's state", True, "left to the replicas", 2, 7]
    assert [name for name, _, _ in readers.calls] == [
        "ensure",
        "replay",
        "sync",
        "bootstrap",
        "force_handover",
        "tombstone",
    ]
    assert all(thread != loop_thread for _, thread, _ in readers.calls), "a blocking call ran on the event loop"
    assert readers.calls[1][2] == (*where, "ns/r/1234", 5.0)  # the catch-up wait defaults as the blocking call's
    assert readers.calls[3][2] == ("the worker's settings", where[1])
    assert readers.calls[4][2] == (*where, "ns/r/1234", {("t", 0): 5}, "operator", "cancelled")
