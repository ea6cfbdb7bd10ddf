"""The Kafka pool is bounded and fair between namespaces: a namespace whose calls all block (brokers that do not
answer) holds at most its share of the threads, and another namespace's calls still run (security review H4)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from reprise_operator.shared.kafka_pool import CURRENT_NAMESPACE, KafkaPool, on_behalf_of


def test_a_namespace_of_blocked_calls_cannot_take_the_threads_of_another() -> None:
    pool = KafkaPool(threads=4, per_namespace=2)
    release = threading.Event()
    running: list[str] = []
    lock = threading.Lock()

    def blocked() -> str:
        with lock:
            running.append("a")
        release.wait(30)  # a bound for a broken test, not a timing
        return "a"

    def quick() -> str:
        return "b"

    async def scenario() -> None:
        with on_behalf_of("team-a"):
            flood = [asyncio.create_task(pool.run(blocked)) for _ in range(10)]
        await asyncio.sleep(0)
        with on_behalf_of("team-b"):
            other = await asyncio.wait_for(pool.run(quick), 20)
        assert other == "b", "team-b's call ran while team-a's were all blocked"
        assert pool.in_flight("team-a") == 2, "team-a holds only its share of the pool"
        with lock:
            assert len(running) <= 2, "no more than team-a's share of its calls ever started"
        release.set()
        assert await asyncio.gather(*flood) == ["a"] * 10, "the rest of team-a's calls run in turn"
        assert pool.in_flight("team-a") == 0

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        pool.shutdown()


def test_calls_outside_a_reconcile_count_to_the_operator_itself() -> None:
    assert CURRENT_NAMESPACE.get() == ""
    with on_behalf_of("team-a"):
        assert CURRENT_NAMESPACE.get() == "team-a"
    assert CURRENT_NAMESPACE.get() == ""


def test_a_namespace_always_leaves_a_thread_to_the_others() -> None:
    pool = KafkaPool(threads=4, per_namespace=10)
    assert pool.per_namespace == 3
    pool.shutdown()
    with pytest.raises(ValueError):
        KafkaPool(threads=0, per_namespace=1)
