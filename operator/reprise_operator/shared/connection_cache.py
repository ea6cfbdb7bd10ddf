"""Which Kafka connections the operator keeps open: at most a set number, and none that sat unused too long.

A connection (an admin client and its offset readers, or a handover topic's follower and writer) costs threads
and memory, and tenants choose how many distinct ones exist (one per bootstrap list and Secret content). Kept
forever, a few hundred of them took the shared operator down (security review H4). So the cache is an LRU with
a bound on its size and an idle time; what leaves it is retired: closed at once when no call is using it, else
by the last call that was (so a call in flight never has its client closed under it, and the open connections
number at most the bound plus the calls in flight, which the Kafka pool bounds in turn).

Pure bookkeeping with threads only; the clock is injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Generic, Hashable, Iterator, TypeVar


class ConnectionRetired(RuntimeError):
    """The connection was retired (evicted) before this call could use it: the caller asks the cache again."""


class Retirable:
    """A cached connection that counts the calls using it and is closed by the last one after `retire`."""

    def __init__(self) -> None:
        self._use_lock = threading.Lock()
        self._calls = 0
        self._retired = False

    def enter(self) -> bool:
        """Hold the connection open for one call; False (and nothing held) if it was retired already."""
        with self._use_lock:
            if self._retired:
                return False
            self._calls += 1
            return True

    def leave(self) -> None:
        """The end of a call that `enter` let in; the last one out of a retired connection closes it."""
        with self._use_lock:
            self._calls -= 1
            last = self._retired and self._calls == 0
        if last:
            self.close()

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """`enter` and `leave` around a block; ConnectionRetired if it was retired already."""
        if not self.enter():
            raise ConnectionRetired("this Kafka connection was closed to make room; ask again")
        try:
            yield
        finally:
            self.leave()

    @property
    def retired(self) -> bool:
        return self._retired

    def retire(self) -> None:
        """Close now if unused, else when the last call using it ends. Idempotent."""
        with self._use_lock:
            if self._retired:
                return
            self._retired = True
            unused = self._calls == 0
        if unused:
            self.close()

    def close(self) -> None:
        """Release the clients (threads, sockets, memory). Called once, by `retire` or the last call."""


K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Retirable)


class ConnectionCache(Generic[K, V]):
    """An LRU of connections with a size bound and an idle time; what it drops is handed to `on_evict`
    (outside its lock: closing a client may block, so the owner decides on which thread that happens)."""

    def __init__(
        self,
        limit: int,
        idle_seconds: float,
        on_evict: Callable[[V], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError("a connection cache holds at least one connection")
        self.limit = limit
        self.idle_seconds = idle_seconds
        self._on_evict = on_evict
        self._clock = clock
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The connection of `key`, made with `make` when absent; it becomes the most recently used."""
        evicted: list[V] = []
        with self._lock:
            now = self._clock()
            evicted += self._drop_idle(now)
            found = self._entries.pop(key, None)
            value = found[0] if found is not None and not found[0].retired else make()
            self._entries[key] = (value, now)
            while len(self._entries) > self.limit:
                evicted.append(self._entries.popitem(last=False)[1][0])
        for old in evicted:
            self._on_evict(old)
        return value

    def sweep(self) -> int:
        """Evict every connection unused for `idle_seconds`; how many (the operator calls it periodically, so
        connections of resources that are gone do not wait for the next `get`)."""
        with self._lock:
            evicted = self._drop_idle(self._clock())
        for old in evicted:
            self._on_evict(old)
        return len(evicted)

    def _drop_idle(self, now: float) -> list[V]:
        dropped: list[V] = []
        while self._entries:
            key, (value, used) = next(iter(self._entries.items()))
            if now - used < self.idle_seconds:
                break  # in LRU order: every later entry was used more recently
            del self._entries[key]
            dropped.append(value)
        return dropped

    def values(self) -> list[V]:
        with self._lock:
            return [value for value, _ in self._entries.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> list[V]:
        """Empty the cache; what it held (the owner closes them)."""
        with self._lock:
            values = [value for value, _ in self._entries.values()]
            self._entries.clear()
        return values
