"""The threads that wait on Kafka: a bounded pool, shared fairly between namespaces.

Every Kafka call of the operator blocks (confluent-kafka's futures, a flush, a bounded read), for up to 15 s
when the brokers do not answer. Run on the event loop's default executor, as they were, they shared its few
threads with every Kubernetes call, and a namespace that named unreachable brokers occupied all of them: every
other namespace's replays stalled (security review H4). Here they run on a pool of their own with a fixed
number of threads, and each namespace has a gate that lets at most `per_namespace` of its calls into the pool
at once (queued or running). So one namespace can hold at most that many threads, and the others always find
the rest; calls of one namespace wait in its own queue, in order.

The namespace is the one whose resource the running reconcile serves: `on_behalf_of(namespace)` sets it for a
reconcile (a context variable, so every call that reconcile makes, however deep, is counted to it); calls
outside any reconcile count to the operator itself ("").
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")

#: The namespace the running reconcile works for ("" outside any): whose share of the pool a call takes.
CURRENT_NAMESPACE: contextvars.ContextVar[str] = contextvars.ContextVar("reprise_namespace", default="")


@contextmanager
def on_behalf_of(namespace: str) -> Iterator[None]:
    """Count the Kafka calls made inside the block to `namespace`."""
    token = CURRENT_NAMESPACE.set(namespace)
    try:
        yield
    finally:
        CURRENT_NAMESPACE.reset(token)


class _Gate:
    """One namespace's share: a semaphore, how many calls await or hold it, and how many hold it (the gate is
    dropped when both are zero)."""

    def __init__(self, size: int) -> None:
        self.semaphore = asyncio.Semaphore(size)
        self.users = 0
        self.held = 0


class KafkaPool:
    """A bounded thread pool for blocking Kafka calls, with a per-namespace bound on the threads one
    namespace holds. `await pool.run(fn, *args)` from the event loop."""

    def __init__(self, threads: int, per_namespace: int) -> None:
        if threads < 1 or per_namespace < 1:
            raise ValueError("the Kafka pool needs at least one thread, and one per namespace")
        self.threads = threads
        #: A namespace may hold all threads only when the pool has one; else it leaves at least one to others.
        self.per_namespace = min(per_namespace, max(1, threads - 1))
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="reprise-kafka")
        self._gates: dict[str, _Gate] = {}

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on a pool thread, once the current namespace's gate lets it in."""
        namespace = CURRENT_NAMESPACE.get()
        gate = self._gates.get(namespace)
        if gate is None:
            gate = self._gates[namespace] = _Gate(self.per_namespace)
        gate.users += 1
        try:
            await gate.semaphore.acquire()
            gate.held += 1
            loop = asyncio.get_running_loop()
            try:
                work = self._executor.submit(functools.partial(fn, *args, **kwargs))
            except BaseException:
                self._release(namespace, gate)
                raise
            # Released when the thread is done, not when the awaiting reconcile is: a cancelled reconcile
            # leaves its call running, and that call still counts to its namespace until it returns.
            work.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release, namespace, gate))
            return await asyncio.wrap_future(work)
        finally:
            gate.users -= 1
            self._forget_idle(namespace, gate)

    def _release(self, namespace: str, gate: _Gate) -> None:
        gate.held -= 1
        gate.semaphore.release()
        self._forget_idle(namespace, gate)

    def _forget_idle(self, namespace: str, gate: _Gate) -> None:
        if gate.users == 0 and gate.held == 0 and self._gates.get(namespace) is gate:
            del self._gates[namespace]

    def background(self, fn: Callable[[], Any]) -> Future:
        """Run `fn` on a pool thread outside any namespace's share (closing an evicted client, which may block:
        never on the event loop)."""
        return self._executor.submit(fn)

    def in_flight(self, namespace: str) -> int:
        """Calls of `namespace` holding the gate now (queued in the pool or running)."""
        gate = self._gates.get(namespace)
        return gate.held if gate is not None else 0

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
