"""The handover protocol against a simulated partition, with random interleavings and crashes. Pure.

The live side runs the real `GuardBook` (the same calls, in the same order, as `GuardedConsumer` makes) and
the replay side the real `replay_finish`, around a model of Kafka for one partition: a log, each group's
committed offset with its metadata, the stored offset of the live consumer, and the handover topic's S and H.
Each step picks an action at random: produce, a live batch, a replay batch, the live side learning the
handover state late, a crash of either side (state since its last commit lost), a restart.

Checked at the end of every run (HANDOVER.md section 7):
- nothing is lost: every matching record from S is processed by some group, every record the live group
  is responsible for by the live group;
- from the first skipped offset F on, every record is processed by exactly one group, except for the
  duplicates a crash may cause: at most the records the crashed party had processed but not committed.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from replay_worker.protocol.filters import RecordFilter
from replay_worker.guard.guard_book import GuardBook
from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.protocol.finish_rules import replay_finish
from replay_worker.protocol.guard_rules import ActiveHandover, ack_due

TOPIC = "t"
KEY = (TOPIC, 0)
REPLAY = "ns/model/1"
MATCH = RecordFilter.compile(
    __import__("replay_worker.protocol.filters", fromlist=["FilterSpec"]).FilterSpec.parse({"headers": {"kind": ["m"]}})
)


def _headers(matching: bool) -> list[tuple[str, bytes]]:
    return [("kind", b"m" if matching else b"o")]


@dataclass
class LiveInstance:
    book: GuardBook
    fetch: int
    stored: tuple[int, str | None] | None = None
    handed_uncommitted: set[int] = field(default_factory=set)


@dataclass
class ReplayInstance:
    position: int
    finished: bool = False
    processed_uncommitted: set[int] = field(default_factory=set)


@dataclass
class World:
    rng: random.Random
    #: The service's `enable.auto.offset.store`: true, or it stores what it processed itself.
    auto_store: bool = True
    log: list[bool] = field(default_factory=list)  # per offset: does the record match the replay's filter
    start: int = 0  # S
    handover: int | None = None  # H, published
    live_committed: tuple[int, str | None] = (0, None)
    replay_committed: tuple[int, str | None] = (0, None)
    live_ledger: Counter[int] = field(default_factory=Counter)
    replay_ledger: Counter[int] = field(default_factory=Counter)
    live: LiveInstance | None = None
    replay: ReplayInstance | None = None
    guard_seen: int | None = None  # U from the last `guard` record
    observed_frontier: int = 0  # the live side's position as the replay last read it
    first_skipped: int | None = None
    duplicate_allowance: int = 0
    tickets: int = 0
    batch: int = 7
    live_start: int = 0
    acked: bool = False

    # -- the view the guard gets of the handover topic

    def active(self) -> dict[tuple[str, int], ActiveHandover]:
        return {KEY: ActiveHandover(REPLAY, self.start, self.handover, MATCH)}

    # -- parties

    def produce(self, count: int) -> None:
        for _ in range(count):
            self.log.append(self.rng.random() < 0.6)

    def start_live(self) -> None:
        offset, metadata = self.live_committed
        book = GuardBook(auto_store=self.auto_store)
        self.tickets += 1
        book.assign(KEY, offset, CommitMark.decode(metadata), self.tickets)
        self.live = LiveInstance(book, fetch=offset)
        # The barrier: the new owner releases the partition with a view as new as the topic is now.
        target = book.release(KEY, self.active()[KEY])
        if target is not None:
            self.live.fetch = target

    def crash_live(self) -> None:
        assert self.live is not None
        self.duplicate_allowance += len(self.live.handed_uncommitted)
        self.live = None

    def live_learns(self) -> None:
        assert self.live is not None
        seeks = self.live.book.apply(self.active())
        if KEY in seeks:
            self.live.fetch = seeks[KEY]

    def live_batch(self) -> None:
        live = self.live
        assert live is not None
        book = live.book
        end = min(len(self.log), live.fetch + self.rng.randint(1, self.batch))
        offsets = list(range(live.fetch, end))
        live.fetch = end
        if offsets:
            if not book.guarded:
                for o in offsets:
                    self._hand(o)
                for store in book.handed_unguarded({KEY: offsets[-1] + 1}):
                    live.stored = (store.offset, store.metadata)
            else:
                for o in offsets:
                    if book.judge(KEY, o, None, _headers(self.log[o]), b"{}"):
                        self._hand(o)
                    elif self.first_skipped is None:
                        self.first_skipped = o
                store = book.after_batch(KEY)
                if store is not None:
                    live.stored = (store.offset, store.metadata)
            if not self.auto_store and book.parts[KEY].handed_until is not None:
                # The service stores what it processed (through the guard, which adds the mark).
                store = book.service_store(TOPIC, 0, book.parts[KEY].handed_until)
                live.stored = (store.offset, store.metadata)
            # The service processed the batch (the ledger) and commits what is stored; or librdkafka's
            # automatic commit sends the stored offsets now and then.
            roll = self.rng.random()
            if roll < 0.6:
                self._live_commit_stored()
            elif roll < 0.8:
                self._librdkafka_commit_stored()
        self._live_progress()

    def _hand(self, offset: int) -> None:
        assert self.live is not None
        self.live_ledger[offset] += 1
        self.live.handed_uncommitted.add(offset)

    def _live_commit(self, offset: int, metadata: str | None) -> None:
        assert self.live is not None
        self.live_committed = (offset, metadata)
        self.live.handed_uncommitted = {o for o in self.live.handed_uncommitted if o >= offset}

    def _live_commit_stored(self) -> None:
        """The service calls `GuardedConsumer.commit()`: the stored offsets, committed explicitly."""
        assert self.live is not None
        for store in self.live.book.stored_offsets():
            # The service has done its part: a crash after this may only duplicate records handed later.
            self.live.handed_uncommitted = {o for o in self.live.handed_uncommitted if o >= store.offset}
            self._live_commit(store.offset, store.metadata)

    def _librdkafka_commit_stored(self) -> None:
        """librdkafka's own commit of stored offsets (enable.auto.commit): only offsets above the committed one
        are sent, an equal or lower one silently not, whatever its metadata."""
        assert self.live is not None
        if self.live.stored is not None and self.live.stored[0] > self.live_committed[0]:
            self._live_commit(*self.live.stored)

    def _live_progress(self) -> None:
        live = self.live
        assert live is not None
        book = live.book
        for tail in book.take_guard_commits():
            self._live_commit(tail.offset, tail.metadata)
        for report in book.skip_reports():
            self.guard_seen = report.seen_until
        for store in book.floor_commits(lambda _key: live.fetch):
            live.stored = (store.offset, None)
            self._live_commit(store.offset, None)
            book.floor_done(store)
        offset, metadata = self.live_committed
        if self.handover is not None and ack_due(self.handover, offset, CommitMark.decode(metadata)):
            self.acked = True

    def start_replay(self) -> None:
        offset, metadata = self.replay_committed
        instance = ReplayInstance(position=offset)
        mark = CommitMark.decode(metadata)
        if mark is not None and mark.finished:
            instance.finished = True
            self.handover = offset  # re-published from the mark (idempotent)
        self.replay = instance

    def crash_replay(self) -> None:
        assert self.replay is not None
        self.duplicate_allowance += len(self.replay.processed_uncommitted)
        self.replay = None

    def replay_batch(self, crash_before_publish: bool = False) -> None:
        replay = self.replay
        assert replay is not None
        if replay.finished:
            return
        end = min(len(self.log), replay.position + self.rng.randint(1, self.batch))
        for o in range(replay.position, end):
            if self.log[o]:
                self.replay_ledger[o] += 1
                replay.processed_uncommitted.add(o)
        replay.position = end
        self.replay_committed = (end, None)
        replay.processed_uncommitted.clear()
        at_end = replay.position == len(self.log)
        # The replay reads the live side's position now and then (every check interval): often stale.
        if self.rng.random() < 0.3:
            self.observed_frontier = max(self.live_committed[0], self.guard_seen or 0)
        frontier = self.observed_frontier
        reason = replay_finish("Handover", replay.position, at_end=at_end, live_committed=frontier)
        if reason is not None:
            self.replay_committed = (replay.position, CommitMark(REPLAY, finished=reason).encode())
            replay.finished = True
            if crash_before_publish:
                self.replay = None
                return
            self.handover = replay.position

    # -- checks

    def check(self) -> tuple[list[int], int]:
        """(lost offsets, duplicates from F on)."""
        lost = []
        duplicates = 0
        first = self.first_skipped
        for o, matching in enumerate(self.log):
            live, replay = self.live_ledger[o], self.replay_ledger[o]
            live_owes = o >= self.live_start and (
                not matching or o < self.start or (self.handover is not None and o >= self.handover)
            )
            replay_owes = matching and o >= self.start and (self.handover is None or o < self.handover)
            if (live_owes and live == 0) or (replay_owes and live + replay == 0):
                lost.append(o)
            if first is not None and o >= first:
                duplicates += max(0, live + replay - 1)
            elif not matching and o >= self.live_start:
                duplicates += max(0, live - 1)
        return lost, duplicates


def run(seed: int, crashes: bool, steps: int = 400, auto_store: bool = True) -> World:
    rng = random.Random(seed)
    world = World(rng, auto_store=auto_store)
    world.produce(rng.randint(20, 60))
    # The live group has processed a prefix before the replay starts.
    world.live_start = rng.randint(0, len(world.log))
    world.live_committed = (world.live_start, None)
    for o in range(world.live_start):
        world.live_ledger[o] += 1
    world.start = rng.randint(0, world.live_start)
    world.replay_committed = (world.start, None)
    world.start_live()
    # The live guard starts without knowing about the replay: it learns S late.
    world.live.book.parts[KEY].rules.update(None)  # type: ignore[union-attr]
    world.live = LiveInstance(GuardBook(auto_store=auto_store), fetch=world.live_committed[0])
    world.tickets += 1
    world.live.book.assign(KEY, world.live_committed[0], None, world.tickets)
    world.live.book.release(KEY, None)
    world.start_replay()
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.15:
            world.produce(rng.randint(1, 6))
        elif roll < 0.45:
            if world.live is None:
                world.start_live()
            else:
                world.live_batch()
        elif roll < 0.7:
            if world.replay is None:
                world.start_replay()
            else:
                world.replay_batch(crash_before_publish=crashes and rng.random() < 0.05)
        elif roll < 0.85:
            if world.live is not None:
                world.live_learns()
        elif crashes and roll < 0.92:
            if world.live is not None:
                world.crash_live()
        elif crashes:
            if world.replay is not None and rng.random() < 0.5:
                world.crash_replay()
    # Drain: no more records, no more crashes; both sides run until the handover is acknowledged.
    for _ in range(5000):
        if world.replay is None:
            world.start_replay()
        if world.live is None:
            world.start_live()
        world.replay_batch()
        world.live_learns()
        world.live_batch()
        if world.acked and world.live is not None and world.live.fetch >= len(world.log):
            break
    assert world.acked, f"seed {seed}: never acknowledged (H={world.handover}, live committed={world.live_committed})"
    return world


#: Runs per case in `make test`; tests/soak runs the same model over many more seeds.
SEEDS = range(150)


@pytest.mark.parametrize("auto_store", [True, False], ids=["auto-store", "service-stores"])
@pytest.mark.parametrize("seed", SEEDS)
def test_exactly_one_group_from_the_first_skip_without_crashes(seed: int, auto_store: bool) -> None:
    world = run(seed, crashes=False, auto_store=auto_store)
    lost, duplicates = world.check()
    assert lost == [], f"seed {seed}: lost {lost[:10]}"
    assert duplicates == 0, f"seed {seed}: {duplicates} duplicates from F={world.first_skipped}, H={world.handover}"


@pytest.mark.parametrize("auto_store", [True, False], ids=["auto-store", "service-stores"])
@pytest.mark.parametrize("seed", SEEDS)
def test_crashes_lose_nothing_and_duplicate_at_most_the_uncommitted_batches(seed: int, auto_store: bool) -> None:
    world = run(1000 + seed, crashes=True, auto_store=auto_store)
    lost, duplicates = world.check()
    assert lost == [], f"seed {seed}: lost {lost[:10]}"
    assert duplicates <= world.duplicate_allowance, (
        f"seed {seed}: {duplicates} duplicates, allowed {world.duplicate_allowance} (uncommitted at crashes)"
    )


def test_the_model_exercises_seek_backs_and_windows() -> None:
    """Guard against a model that passes because it never reaches the interesting paths."""
    seeks = windows = early = 0
    for seed in range(200):
        world = run(seed, crashes=False)
        if world.first_skipped is not None and world.handover is not None:
            if world.handover < world.first_skipped:
                early += 1
            if world.live_ledger and any(
                world.live_ledger[o] and world.replay_ledger[o] == 0 and world.log[o]
                for o in range(world.handover, len(world.log))
            ):
                seeks += 1
        windows += 1 if world.first_skipped is not None else 0
    assert windows > 50 and seeks > 20
