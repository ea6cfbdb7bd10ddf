"""The replay consumer loop: read a batch, filter, deliver, commit, decide which partitions are finished.

The decisions (what to take, commit with which mark and when, when a partition finishes, what to commit again,
which progress to report, what a revoke drops) are `replay_book.ReplayBook`'s, pure and held by the replay-trace
vectors; this loop does the I/O around it: confluent-kafka, the delivery, the handover topic, metrics and logs.

The idioms (REFERENCE.md section 1, confluent-kafka's examples) and why:

- The start was recorded as the replay group's committed offsets by `bootstrap` before this loop joins the
  group, so an assignment never seeks: every replica and every restart resumes from committed offsets, and
  a rebalance cannot replay anything twice (seed 003's trap).
- `enable.auto.commit=false`, `enable.auto.offset.store=false`: a batch's offsets are committed only after
  its records are durable (`Delivery.checkpoint`), and nothing is lost. The commit of a batch is sent
  without waiting for it while the next batch is read; a forward may also let its producer finish one batch
  while it reads the next. So the duplicate window after a crash is the batch in hand plus the one or two
  before it whose commit had not landed yet.
- Rebalance callbacks only run inside `consume()`, and every batch is checkpointed before the next
  `consume()`; a revoke commits the revoked partitions' positions synchronously (commit on revoke).
  `on_lost` drops the partitions without committing (they are someone else's now).
- A partition is finished (handed over / drained) when `finish_rules.replay_finish` says so. Its final offset is
  committed with a `finished` mark in the commit metadata *before* H is published, so any replica that gets
  the partition later sees it is finished from the offset alone, and re-publishes H (idempotent).
- End of partition: the consumer's end-of-partition event carries the offset after the last readable
  record. With transactional producers that is past a commit marker no record ever reaches; committing it
  makes the replay group's lag really zero (KEDA #5675's "lag stays at 1").
- SIGTERM: the current batch is finished and committed, then the consumer closes (leaves the group) in
  `finally`.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from itertools import groupby
from typing import Mapping

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from ..connection import kafka_clients
from ..connection.kafka_clients import FETCH_TUNING
from .delivery import Delivery, DeliveryError, Outcome
from ..protocol.filters import RecordFilter, SchemaUnavailable, Undecodable
from ..protocol.handover import HandoverView, ReplayHandover
from .replay_book import Commit, Finishing, PartitionBook, PlannedPartition, ReplayBook
from ..protocol.wire import HandoverInfo, ProgressInfo, StartInfo
from ..topic.handover_topic import HandoverFollower, HandoverTopic, now_ms
from .metrics import WorkerMetrics
from ..settings import WorkerSettings
from .throttle import Throttle

#: Seconds between two `progress` records of one replica (the operator's status moves at this pace at most).
PROGRESS_INTERVAL = 2.0

log = logging.getLogger("replay_worker.consumer")

#: Seconds `consume()` waits for a full batch: when idle, and while partitions that finish at their end are
#: still reading (see `_consume_timeout`).
IDLE_WAIT = 0.2
FINISHING_WAIT = 0.05
#: How long a stop waits for the consumer to leave the group: well inside Kubernetes' default 30 s grace period.
CLOSE_WAIT = 15.0
#: Seconds between asks while the schema registry cannot be reached, growing per attempt up to the maximum.
REGISTRY_RETRY_S, REGISTRY_RETRY_MAX_S = 0.5, 5.0
#: A replica's session: librdkafka may lose a stopping member's LeaveGroup when the replicas stop together (the
#: Deployment's deletion) in the middle of the rebalance their leaving starts ("Timed out 1 in-flight" on the
#: GroupCoordinator); the member then stays in the group until its session times out, and the operator's
#: teardown waits for the group to be empty before deleting it. At the default 45 s that was most of an
#: end-to-end replay's time (benchmarks/end_to_end). Heartbeats come from librdkafka's own thread, so a slow
#: handler does not count against it. A member learns of a rebalance (a replica joining or leaving) from its next
#: heartbeat, and the replicas' start takes one or two rounds (the first replica joins alone and takes every
#: partition; see `kafka_clients.REPLAY_ASSIGNMENT`): at a heartbeat a second, each round waited most of a second
#: for it (benchmarks/end_to_end). Ten small requests a second per replica cost the broker and the replica little.
#: Settings of the same name in the Kafka config folder win.
GROUP_TUNING = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 100}

#: Batches' worth of tracked objects allocated (and not yet freed) before Python's cyclic garbage collector looks at
#: its youngest generation; its default is 700. A batch is thousands of Messages (each a tracked object) alive
#: together: at 700, each batch went through several collections that walked it, moved it to older generations and
#: walked it again there (a full collection about every 100,000 records, over everything the process holds), about a
#: tenth of a handler-mode worker's CPU. With room for a few batches, a batch is freed before a collection sees it.
GC_BATCHES = 4

#: Message's own methods, unbound: mapped over a batch they cost a tenth of `methodcaller("value")`'s
#: generic attribute lookup and binding per record (measured: value 26 ns against 105, topic 48 against 498).
_error = Message.error
_topic = Message.topic
_partition = Message.partition
_offset = Message.offset

_MEMBERSHIP_ERRORS = {
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError._ASSIGNMENT_LOST,
}


@dataclass(frozen=True)
class _ReplayFacts:
    """What the worker needs from the handover topic, as a snapshot (the follower thread makes it)."""

    handover_offsets: Mapping[tuple[str, int], int]
    guard_positions: Mapping[tuple[str, int], int]
    planned: frozenset[tuple[str, int]]


def _facts_of(replay_id: str):
    def derive(view: HandoverView) -> _ReplayFacts:
        replay = view.replay(replay_id)
        return _ReplayFacts(
            dict(replay.handover_offsets()),
            {
                k: p.guard.seen_until
                for k, p in replay.partitions.items()
                if p.guard is not None and p.guard.seen_until is not None
            },
            frozenset(k for k, p in replay.partitions.items() if p.start is not None),
        )

    return derive


class ReplayConsumer:
    """One replica of the replay group. `run()` returns when stopped (SIGTERM) or, with `exit_when_done`,
    when every partition of the replay is finished."""

    def __init__(
        self,
        settings: WorkerSettings,
        client_config: Mapping[str, str] | None,
        delivery: Delivery,
        record_filter: RecordFilter,
        metrics: WorkerMetrics,
        state: ReplayHandover,
    ) -> None:
        self.settings = settings
        self.delivery = delivery
        self.filter = record_filter
        self._predicate = record_filter.predicate()
        self._value_predicate = record_filter.value_predicate()
        #: The one topic every record comes from, when the subscription names one topic (not a `^` pattern):
        #: then a batch's runs are found by partition alone, without reading each record's topic.
        self._only_topic = (
            settings.topics[0] if len(settings.topics) == 1 and not settings.topics[0].startswith("^") else None
        )
        self.metrics = metrics
        self.book = ReplayBook(
            settings.replay_id,
            settings.mode,
            {},
            follow=settings.follow,
            transactional=bool(getattr(delivery, "transactional", False)),
        )
        self.plan = {k: p.start for k, p in state.partitions.items() if p.start is not None}
        self.throttle = Throttle(settings.max_records_per_second, settings.max_bytes_per_second)
        self._base = kafka_clients.connection(
            settings.bootstrap_servers, client_config, f"reprise-{settings.member_name}"
        )
        self._client_config = client_config
        #: Every assigned partition (also those taken while stopping, which `parts` leaves out), and the
        #: consumer's position of each as of the last batch (see `_take_whole`).
        self._assigned: dict[tuple[str, int], TopicPartition] = {}
        self._delivered: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._live_reader: kafka_clients.GroupOffsetReader | None = None
        self._handover: HandoverTopic | None = None
        self._follower: HandoverFollower[_ReplayFacts] | None = None
        self._live: dict[tuple[str, int], int] = {}
        self._last_check = 0.0
        self._last_metrics = 0.0
        self._reading = False
        self._ends: dict[tuple[str, int], int] = {}
        self._progress_topic: HandoverTopic | None = None
        self._admin: AdminClient | None = None
        #: When the last `progress` records were sent.
        self._last_report = 0.0
        self.ready = False
        self.done = False
        #: The group rebalances cooperatively (an assignment adds to the partitions held) rather than eagerly (an
        #: assignment is the whole of them, every partition having been revoked before): from the consumer's
        #: settings, `kafka_clients.REPLAY_ASSIGNMENT`.
        self._cooperative = False

    @property
    def plan(self) -> Mapping[tuple[str, int], StartInfo]:
        """The replay's `start` records: the partitions it reads, from where, to which end bound."""
        return self._plan

    @plan.setter
    def plan(self, plan: Mapping[tuple[str, int], StartInfo]) -> None:
        self._plan = plan
        self.book.plan = {k: PlannedPartition(s.offset, s.end_offset, s.end_timestamp_ms) for k, s in plan.items()}

    @property
    def parts(self) -> dict[tuple[str, int], PartitionBook]:
        """This replica's partitions, as the book holds them."""
        return self.book.parts

    # -- control

    def request_stop(self) -> None:
        """Finish the current batch, commit, leave the group (the SIGTERM path)."""
        self._stop.set()
        if self._follower is not None:
            # Its read (up to its interval) ends while the loop finishes its batch, not after: the loop's close
            # waits for it, and a stopping replica's pod is what a replay's teardown waits for.
            self._follower.request_stop()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the loop

    def run(self) -> None:
        s = self.settings
        self._handover = HandoverTopic(
            s.bootstrap_servers,
            s.handover_topic,
            self._client_config,
            client_id=f"reprise-{s.member_name}",
            reader_group=s.replay_group,
        )
        # Made now, so its connection and producer id are ready when the first partition finishes (made
        # then, they held the finish up by a few hundred milliseconds on a busy broker).
        self._handover.producer  # noqa: B018 - the property makes the producer
        if s.mode in ("Parallel", "Handover") and s.live_group:
            self._live_reader = kafka_clients.GroupOffsetReader(self._base, s.live_group)
        config = kafka_clients.consumer_config(
            {**FETCH_TUNING, **GROUP_TUNING, **self._base}, s.replay_group or "", on_commit=self._on_commit
        )
        self._cooperative = "cooperative" in str(config["partition.assignment.strategy"])
        consumer = self._consumer = Consumer(config)
        # The slow checks (the live group's offsets, end offsets, progress records) run in the follower's
        # thread: each is a request to Kafka, and the consume loop must not wait for them.
        self._progress_topic = HandoverTopic(
            s.bootstrap_servers,
            s.handover_topic,
            self._client_config,
            client_id=f"reprise-{s.member_name}-progress",
            reader_group=s.replay_group,
        )
        self._follower = HandoverFollower(
            s.bootstrap_servers,
            s.handover_topic,
            self._client_config,
            _facts_of(s.replay_id),
            interval=0.2,
            on_tick=self._background_checks,
            client_id=f"reprise-{s.member_name}-follower",
            reader_group=s.replay_group,
        ).start()
        collection_thresholds = gc.get_threshold()
        gc.set_threshold(max(collection_thresholds[0], GC_BATCHES * s.batch_size), *collection_thresholds[1:])
        try:
            consumer.subscribe(
                list(s.topics), on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
            self.ready = True
            log.info(
                "replay consumer started",
                extra={
                    "mode": s.mode,
                    "topics": list(s.topics),
                    "replay_group": s.replay_group,
                    "partitions_planned": len(self.plan),
                },
            )
            while not self._stop.is_set():
                if self._turn(consumer, consumer.consume(s.batch_size, self._consume_timeout())):
                    log.info("every partition of the replay is finished; exiting")
                    self.done = True
                    break
            self._checkpoint(consumer, force=True)  # SIGTERM: the last batches are committed before leaving
        finally:
            gc.set_threshold(*collection_thresholds)
            self.ready = False
            if self._follower is not None:
                self._follower.stop()  # first: its thread reads the consumer's end offsets
            # Commits nothing itself (auto commit is off); leaves the group now, or gives up after CLOSE_WAIT.
            kafka_clients.close_within(consumer.close, CLOSE_WAIT, "consumer")
            self.delivery.close()
            if self._handover is not None:
                self._handover.close()
            self._progress_topic.close()
            if self._live_reader is not None:
                self._live_reader.close()
            log.info("replay consumer stopped")

    def _consume_timeout(self) -> float:
        """How long `consume()` may wait for a full batch. While a partition that finishes at its end (Drain,
        or an end bound) is still reading, not long: once the prefetched records are read, what comes next is
        its last records or its end-of-partition event, and a batch that will not fill is returned only at the
        timeout (a whole idle wait per event was most of the time from a Drain's last record to its finish).
        Not long either while a commit's result is awaited: a finish may wait for it (`_reseal_finished`)."""
        if self.book.commits_in_flight:
            return FINISHING_WAIT
        drain = self.settings.mode == "Drain"
        for p in self.parts.values():
            if not (p.at_end or p.finished) and (drain or p.end_offset is not None or p.end_timestamp_ms is not None):
                return FINISHING_WAIT
        return IDLE_WAIT

    def _turn(self, consumer: Consumer, messages: list[Message]) -> bool:
        """One turn of the loop on a consumed batch: process it, metrics when due, finish what the mode says, seal
        finished marks again. True when the replay is done and the worker is to exit."""
        self.metrics.beat()
        self._process(consumer, messages)
        if time.monotonic() - self._last_metrics >= self.settings.check_interval:
            self._last_metrics = time.monotonic()
            self._update_metrics()
        self._decide(consumer)
        self._reseal_finished(consumer)
        return self.settings.exit_when_done and self._all_done()

    def _process(self, consumer: Consumer, messages: list[Message]) -> None:
        book = self.book
        book.read(messages)
        if self._take_whole(consumer, messages):
            # The common batch: taken as it is; every per-record step ran in C. A Message's len() is its
            # value's (0 without one), so the bytes are counted without building a list of the values.
            batch = messages
        else:
            batch = book.take(self._end_of)
        if not book.anything_to_deliver(batch):
            return
        size = sum(map(len, batch))
        if batch and not self._reading:
            self._reading = True
            log.info("first records read", extra={"records": len(batch)})
        self.metrics.consumed.inc(len(batch))
        self.metrics.bytes.inc(size)
        if not self.throttle.unlimited and batch:
            self._wait(self.throttle.delay(len(batch), size, time.monotonic()))
        outcome = self._deliver(batch)
        self.metrics.delivered.inc(outcome.delivered)
        if outcome.dead_lettered:
            self.metrics.dead_lettered.inc(outcome.dead_lettered)
        if outcome.poison_skipped:
            self.metrics.poison_skipped.inc(outcome.poison_skipped)
        book.end_positions()
        self._checkpoint(consumer)

    def _take_whole(self, consumer: Consumer, messages: list[Message]) -> bool:
        """Whether the batch is processed as it is, and if so note each partition's new position: no event in
        it (an end of partition), and every partition it touches is this replica's, still reading, with no end
        bound. Per batch, not per record.

        First from the consumer's positions (one call): librdkafka's position of a partition is the offset
        after the last record (or transaction marker) it returned, and is reset when the partition is assigned.
        A partition whose position did not change since the last batch returned nothing; one that moved
        returned its records from our position up to its new one, at most one per offset. So when the spans of
        the partitions that moved add up to the batch's size, every offset of every span holds a record of the
        batch: the new positions are exactly those the records give, and no other partition is in the batch.
        When they add up to more (a transaction marker or a compacted record leaves an offset without one),
        the batch's runs of one partition give the positions (`_take_runs`)."""
        if not messages:
            return False
        moved = self._moved(consumer)
        if moved is None or next(filter(_error, messages), None) is not None:  # filter(): 15% under any(map())
            return False
        if sum(at - part.position for part, at in moved) != len(messages):
            return self._take_runs(messages)
        self.book.advance(moved)
        return True

    def _moved(self, consumer: Consumer) -> list[tuple[PartitionBook, int]] | None:
        """The partitions taken as they come whose consumer position passed ours since the last batch, with
        that position; None when one that is not taken as it comes (finished, bounded, not ours) moved."""
        assigned = self._assigned
        try:
            positions = consumer.position(list(assigned.values()))
        except KafkaException:
            return None
        parts = self.parts
        delivered = self._delivered
        moved = []
        taken_as_they_come = True
        # In the order asked (reading each one's topic would make a new string and hash it); the partition
        # numbers say so.
        for key, tp in zip(assigned, positions):
            if tp.partition != key[1]:
                return None
            at = tp.offset
            if at == delivered.get(key, OFFSET_INVALID):
                continue  # nothing returned since the last batch
            delivered[key] = at  # every partition's, whatever is made of the batch
            part = parts.get(key)
            if part is None or not part.taken_as_it_comes:
                taken_as_they_come = False
            elif at > part.position:  # type: ignore[operator]
                moved.append((part, at))
        return moved if taken_as_they_come else None

    def _take_runs(self, messages: list[Message]) -> bool:
        """`_take_whole` from the batch's runs of one partition's records and the last record of each (records
        of a partition come in order, so the last of its runs holds its position): every per-record step in C.
        With one subscribed topic, by partition alone: reading each record's topic (a new string) and comparing
        it was a fifth of the worker's own cost per record."""
        only_topic = self._only_topic
        if only_topic is not None:
            last = [
                ((only_topic, partition), _offset(deque(run, maxlen=1)[0]))
                for partition, run in groupby(messages, _partition)
            ]
        else:
            last = [
                ((topic, partition), _offset(deque(run, maxlen=1)[0]))
                for partition, same_partition in groupby(messages, _partition)
                for topic, run in groupby(same_partition, _topic)
            ]
        parts = self.parts
        taken = []
        for key, offset in last:
            part = parts.get(key)
            if part is None or not part.taken_as_it_comes:
                return False
            taken.append((part, offset))
        # In order: a later run of the same partition is further on.
        self.book.advance((part, offset + 1) for part, offset in taken)
        return True

    def _deliver(self, batch: list[Message]) -> Outcome:
        """Filter the batch and hand the matches on."""
        if self.filter.matches_everything:
            matching = batch
            self.metrics.matched.inc(len(batch))
            return self.delivery.deliver(matching)
        waited = 0
        while True:
            try:
                matching, poison = self._filtered(batch)
                break
            except SchemaUnavailable as exc:
                # No decision without the schema (HANDOVER.md section 4, "Schemas"): the batch waits, nothing
                # of it is delivered, skipped or committed, and the same records are judged once the registry
                # answers. Stopped while waiting: out without a commit (the next replica reads them again).
                waited += 1
                self.metrics.registry_waiting.set(1)
                if waited == 1 or waited % 30 == 0:
                    log.warning("waiting for the schema registry", extra={"reason": str(exc), "attempt": waited})
                if self._stop.wait(min(REGISTRY_RETRY_S * waited, REGISTRY_RETRY_MAX_S)):
                    raise
        if waited:
            self.metrics.registry_waiting.set(0)
            log.info("the schema registry answers again", extra={"attempts": waited})
        self.metrics.matched.inc(len(matching))
        self.metrics.skipped.inc(len(batch) - len(matching) - len(poison))
        outcome = self.delivery.deliver(matching)
        for message, reason in poison:
            self.delivery.poison(message, reason, outcome)
        return outcome

    def _filtered(self, batch: list[Message]) -> tuple[list[Message], list[tuple[Message, str]]]:
        """The batch's matching records, and its undecodable ones with why; `SchemaUnavailable` when a schema
        could not be fetched (no record of the batch is judged then)."""
        predicate = self._predicate
        by_value = self._value_predicate
        poison: list[tuple[Message, str]] = []
        try:
            if by_value is not None:
                # A comprehension, not `compress(batch, map(by_value, ...))`: called from bytecode, the filter's
                # frame is entered without a C call (about 70 instructions a record fewer, callgrind).
                matching = [message for message in batch if by_value(message.value())]
            else:
                matching = [message for message in batch if predicate(message)]
        except Undecodable:
            # Rare: go again one by one to set the undecodable records apart.
            matching = []
            for message in batch:
                try:
                    if predicate(message):
                        matching.append(message)
                except Undecodable as exc:
                    poison.append((message, f"undecodable: {exc}"))
        return matching, poison

    def _checkpoint(self, consumer: Consumer, force: bool = False) -> None:
        """Commit the positions once what was delivered is durable (the book says what and how: a forward whose
        records are still in flight may wait one more batch instead of blocking on the producer, which keeps
        sending while the next batch is read; forced, on a stop: every position, synchronously)."""
        decision = self.book.checkpoint(self.delivery.in_flight, force)
        if decision is True:
            self.delivery.checkpoint(consumer, [])  # dead letters still become durable
        elif isinstance(decision, Commit):
            self._commit(consumer, decision)

    def _commit(self, consumer: Consumer, commit: Commit) -> bool:
        """Make a commit the book asked for (after making the batch durable); retry while Kafka is briefly
        unavailable. False when this replica is no longer a member (the rebalance that follows takes the
        partitions away).

        A batch's commit is asynchronous (a round trip per batch would cost a fifth of a forward's speed);
        a failed one is noticed in `_on_commit` and the positions are committed again with the next batch.
        Finishing a partition, a revoke and a stop commit synchronously."""
        offsets = [
            TopicPartition(o.topic, o.partition, o.offset)
            if o.metadata is None
            else TopicPartition(o.topic, o.partition, o.offset, metadata=o.metadata)
            for o in commit.offsets
        ]
        deadline = time.monotonic() + 60.0
        while True:
            try:
                self.delivery.checkpoint(consumer, offsets, asynchronous=not commit.sync)
                break
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() in _MEMBERSHIP_ERRORS:
                    log.warning(
                        "commit refused: no longer a member; the partitions move to another replica",
                        extra={"error": error.str()},
                    )
                    self.metrics.errors.inc()
                    self.book.committed(commit, ok=False)
                    return False
                if error.fatal() or time.monotonic() > deadline:
                    raise
                self.metrics.errors.inc()
                log.warning("commit failed, retrying", extra={"error": error.str()})
                time.sleep(0.5)
        self.metrics.commits.inc()
        self.book.committed(commit)
        position = self.metrics.position
        parts = self.parts
        for o in commit.offsets:
            if (o.topic, o.partition) in parts:
                position(o.topic, o.partition, o.offset)
        return True

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The result of a commit (served inside consume()). A failed one is retried with the next batch,
        synchronously."""
        failed = [tp for tp in partitions if error is not None or tp.error is not None]
        self.book.answered((tp.topic, tp.partition) for tp in failed)
        if not failed:
            return
        self.metrics.errors.inc()
        log.warning(
            "a commit failed; it is made again with the next batch",
            extra={
                "error": (error or failed[0].error).str(),
                "partitions": [f"{tp.topic}[{tp.partition}]" for tp in failed],
            },
        )

    def _end_of(self, message: Message) -> bool:
        """Whether a consumed item with an error is an end-of-partition event (the book notes it); other errors
        are counted and logged, or raised when fatal."""
        error: KafkaError = message.error()
        if error.code() == KafkaError._PARTITION_EOF:
            return True
        if error.fatal():
            raise KafkaException(error)
        self.metrics.errors.inc()
        log.warning("consumer error", extra={"error": error.str(), "code": error.code()})
        return False

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.2))
            self.metrics.beat()

    # -- finishing partitions

    def _decide(self, consumer: Consumer) -> None:
        book = self.book
        book.live = self._live
        book.guards = self._follower.snapshot.guard_positions if self._follower else {}
        finishing = book.decide()
        if finishing is not None:
            self._finish(consumer, finishing)

    def _finish(self, consumer: Consumer, finishing: Finishing) -> None:
        """Commit the stop offsets with `finished` marks, then publish them as H, then stop reading those
        partitions. Partitions that finish together share one commit and one publish."""
        handovers = self.book.finished(finishing, self._commit(consumer, finishing.commit))
        if not handovers:
            return  # not a member any more: whoever gets the partitions decides again
        self._publish_handover(
            *[
                HandoverInfo(
                    self.settings.replay_id,
                    h.topic,
                    h.partition,
                    h.offset,
                    h.reason,
                    self.settings.member_name,
                    now_ms(),
                )
                for h in handovers
            ]
        )
        for h in handovers:
            self._pause(consumer, h.topic, h.partition)
            self.metrics.partition(h.topic, h.partition, position=h.offset, state="finished")
            self.metrics.finished_partitions.inc()
            log.info(
                "partition finished",
                extra={"topic": h.topic, "partition": h.partition, "handover_offset": h.offset, "reason": h.reason},
            )

    def _reseal_finished(self, consumer: Consumer) -> None:
        commit = self.book.resealing()
        if commit is not None:
            self._commit(consumer, commit)

    def _publish_handover(self, *records: HandoverInfo) -> None:
        assert self._handover is not None
        deadline = time.monotonic() + 120.0
        while True:
            try:
                self._handover.publish(*records)
                return
            except Exception as exc:
                # H must be durable before anyone acts on it; the replay already stopped the partitions, so
                # retrying here only delays the live side. A restart would re-publish from the commit mark.
                if time.monotonic() > deadline:
                    raise
                self.metrics.errors.inc()
                log.warning("publishing the handover offset failed, retrying", extra={"error": str(exc)})
                time.sleep(1.0)

    def _pause(self, consumer: Consumer, topic: str, partition: int) -> None:
        try:
            consumer.pause([TopicPartition(topic, partition)])
        except KafkaException as exc:
            log.debug("pause failed (partition no longer assigned)", extra={"error": str(exc)})

    def _all_done(self) -> bool:
        """Every planned partition is finished: here (this replica's own) or as the handover topic says."""
        facts = self._follower.snapshot if self._follower else None
        self.book.published = facts.handover_offsets if facts is not None else {}
        return self.book.done()

    # -- slow checks: the live group's offsets, end offsets for lag

    def _background_checks(self) -> None:
        """In the follower's thread, every check interval: the live group's offsets (Parallel, Handover), the
        end offsets (for lag), progress records. Results are swapped in whole; the loop only reads them."""
        if time.monotonic() - self._last_check < self.settings.check_interval:
            return
        self._last_check = time.monotonic()
        parts = list(self.parts.values())
        self._report_progress()
        active = [p for p in parts if not p.finished]
        if self._live_reader is not None and active:
            try:
                self._live = self._live_offsets([TopicPartition(p.topic, p.partition) for p in active])
            except Exception as exc:
                self.metrics.errors.inc()
                log.warning("reading the live group's offsets failed", extra={"error": str(exc)})
        # End offsets through a client of this thread's own: the main consumer is only ever called from the
        # consume loop (a librdkafka call on it from a second thread during a rebalance callback can deadlock
        # with the GIL).
        if parts:
            try:
                self._ends = self._end_offsets([TopicPartition(p.topic, p.partition) for p in parts])
            except Exception as exc:
                log.debug("reading end offsets failed", extra={"error": str(exc)})

    def _end_offsets(self, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        if self._admin is None:
            self._admin = AdminClient(kafka_clients.admin_config(self._base))
        futures = self._admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=10,
        )
        ends = {}
        for tp, future in futures.items():
            ends[(tp.topic, tp.partition)] = int(future.result(timeout=15).offset)
        return ends

    def _update_metrics(self) -> None:
        ends = self._ends
        for part in list(self.parts.values()):
            high = ends.get(part.key)
            if high is not None and part.position is not None:
                goal = high if part.end_offset is None else min(high, part.end_offset)
                self.metrics.partition(part.topic, part.partition, position=part.position, end=goal)

    def _report_progress(self) -> None:
        """Publish the committed position of partitions that moved (at most every PROGRESS_INTERVAL s), so
        the operator follows this replay by tailing the handover topic instead of querying its group."""
        if time.monotonic() - self._last_report < PROGRESS_INTERVAL:
            return
        self._last_report = time.monotonic()
        s = self.settings
        records = [
            ProgressInfo(s.replay_id, p.topic, p.partition, p.committed, p.at_end, s.member_name, now_ms())
            for p in self.book.progress()
        ]
        if not records:
            return
        assert self._progress_topic is not None
        try:
            self._progress_topic.publish(*records)
        except Exception as exc:  # advisory: the next report says it again
            self.book.progress_failed()
            log.warning("publishing progress failed", extra={"error": str(exc)})

    def _live_offsets(self, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        assert self._live_reader is not None
        result = {}
        for tp in self._live_reader.committed(partitions, timeout=15):
            if tp.error is None and tp.offset >= 0:
                result[(tp.topic, tp.partition)] = tp.offset
        return result

    # -- rebalance callbacks (run inside consume())

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.inc()
        if self._cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._assigned[key] = TopicPartition(tp.topic, tp.partition)
            self._delivered.pop(key, None)  # librdkafka's position starts again too
        if self.stopping:
            # Served by close() when a rebalance was under way at the stop: the consumer is leaving, so the
            # partitions are only taken to complete the protocol, not read (reading their committed offsets
            # would fail while the consumer is being destroyed). The next owner starts from the commits.
            log.info(
                "partitions assigned while stopping; left to the next owner",
                extra={"partitions": [f"{tp.topic}[{tp.partition}]" for tp in partitions]},
            )
            return
        committed = self._committed(consumer, partitions)
        to_pause = []
        for tp in partitions:
            found = committed.get((tp.topic, tp.partition))
            offset, metadata = found if found is not None else (None, None)
            assigned = self.book.assign(tp.topic, tp.partition, offset, metadata)
            if assigned.start_commit is not None:
                start = assigned.start_commit.offsets[0].offset
                consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, start)], asynchronous=False)
                log.warning(
                    "planned partition had no committed offset; committed its published start",
                    extra={"topic": tp.topic, "partition": tp.partition, "start": start},
                )
            if assigned.pause:
                to_pause.append(tp)
            h = assigned.handover
            if h is not None:
                # The previous owner may have died between its commit and its publish: publish again (the
                # same H under the same key: idempotent).
                self._publish_handover(
                    HandoverInfo(
                        self.settings.replay_id,
                        h.topic,
                        h.partition,
                        h.offset,
                        h.reason,
                        self.settings.member_name,
                        now_ms(),
                    )
                )
                self.metrics.partition(tp.topic, tp.partition, position=h.offset, state="finished")
            elif not assigned.pause:
                position = self.parts[(tp.topic, tp.partition)].position
                self.metrics.partition(tp.topic, tp.partition, position=position, state="replaying")
        if to_pause:
            consumer.pause(to_pause)
        self.metrics.assigned_partitions.set(len(self.parts))
        log.info(
            "partitions assigned",
            extra={
                "partitions": [f"{tp.topic}[{tp.partition}]" for tp in partitions],
                "finished": [f"{tp.topic}[{tp.partition}]" for tp in to_pause],
            },
        )

    def _committed(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """The group's committed offsets of these partitions, with their metadata (the book reads the marks)."""
        found = kafka_clients.read_committed(consumer, partitions, "committed offsets", log)
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in found if tp.offset >= 0}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.inc()
        # Synchronously, even when an asynchronous commit of the same positions may still be on its way.
        commit, _ = self.book.revoke((tp.topic, tp.partition) for tp in partitions)
        if commit is not None:
            try:
                self._commit(consumer, commit)
            except (KafkaException, DeliveryError) as exc:
                log.warning("commit on revoke failed", extra={"error": str(exc)})
        self._drop(partitions)
        log.info("partitions revoked", extra={"partitions": [f"{tp.topic}[{tp.partition}]" for tp in partitions]})

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.inc()
        self.book.lost((tp.topic, tp.partition) for tp in partitions)
        self._drop(partitions)
        log.warning(
            "partitions lost (not committed; the new owner resumes from the last commit)",
            extra={"partitions": [f"{tp.topic}[{tp.partition}]" for tp in partitions]},
        )

    def _drop(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self.parts.pop(key, None)
            self._assigned.pop(key, None)
            self._delivered.pop(key, None)
            self.metrics.forget(tp.topic, tp.partition)
        self.metrics.assigned_partitions.set(len(self.parts))
