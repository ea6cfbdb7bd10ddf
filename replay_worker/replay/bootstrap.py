"""Resolve a replay's start once and record it: the `replay` and `start` records and the replay group's
committed offsets, in one Kafka transaction.

Why a transaction, and why this shape (REFERENCE.md section 1, seed 003):

- Seeking to the start in the assignment callback re-seeks on every rebalance. Instead the start becomes
  the replay group's committed offsets before any replica joins, and every replica and every restart
  resumes from committed offsets.
- Several replicas start at once. Each one calls `init_transactions` with the same transactional id
  (`reprise-bootstrap-<replay id>`), which fences every earlier bootstrapper: an older one can no longer
  commit. Then it reads the handover topic; if the replay is already bootstrapped it is done, otherwise
  it resolves the start and commits, in one transaction, the `replay` + `start` records and the start
  offsets (`send_offsets_to_transaction`). So exactly one resolution wins, and the published S(p) always
  equals the offset the replay group starts from; no reader ever sees one without the other.
- A partition that already has a committed offset in the replay group keeps it (a resumed or pre-seeded
  replay), and its published start says so.

The operator may call `bootstrap_replay` itself before it creates the replay Deployment; the worker calls it
again on start, which is then a read.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..connection import kafka_clients
from ..protocol.handover import ReplayHandover
from ..protocol.wire import ReplayInfo, StartInfo, decode, encode
from ..topic.handover_topic import HandoverTopic, HandoverTopicError, now_ms
from ..settings import WorkerSettings
from ..protocol.start_position import (
    PartitionFacts,
    SpecError,
    StartDecision,
    StartOlderThanRetention,
    decide_partition,
)

log = logging.getLogger("replay_worker.bootstrap")

OFFSET_INVALID = -1001


class BootstrapError(RuntimeError):
    """The start could not be resolved or recorded; the message says why."""


def bootstrap_transactional_id(replay_id: str) -> str:
    return f"reprise-bootstrap-{replay_id}"


@dataclass(frozen=True)
class Plan:
    """What a bootstrap decided: the replay record and S(p) (+ end bound) of every partition."""

    replay: ReplayInfo
    starts: tuple[StartInfo, ...]


def partition_facts(
    consumer: Consumer, topics: tuple[str, ...], start_ts: int | None, end_ts: int | None, timeout: float
) -> list[PartitionFacts]:
    """Log start, end and time lookups of every partition of `topics`."""
    metadata = consumer.list_topics(timeout=timeout)
    partitions: list[TopicPartition] = []
    for topic in topics:
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            reason = found.error.str() if found is not None and found.error is not None else "it does not exist"
            raise BootstrapError(f"source topic {topic}: {reason}")
        partitions += [TopicPartition(topic, p) for p in sorted(found.partitions)]
    marks = {}
    for tp in partitions:
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        marks[(tp.topic, tp.partition)] = (low, high)
    start_lookup = _times(consumer, partitions, start_ts, timeout)
    end_lookup = _times(consumer, partitions, end_ts, timeout)
    return [
        PartitionFacts(
            tp.topic,
            tp.partition,
            *marks[(tp.topic, tp.partition)],
            time_lookup=start_lookup.get((tp.topic, tp.partition)),
            end_time_lookup=end_lookup.get((tp.topic, tp.partition)),
        )
        for tp in partitions
    ]


def _times(
    consumer: Consumer, partitions: list[TopicPartition], ts: int | None, timeout: float
) -> dict[tuple[str, int], int]:
    if ts is None:
        return {}
    found = consumer.offsets_for_times(
        [TopicPartition(tp.topic, tp.partition, ts) for tp in partitions], timeout=timeout
    )
    result = {}
    for tp in found:
        if tp.error is not None:
            raise BootstrapError(f"offsets_for_times on {tp.topic}[{tp.partition}]: {tp.error.str()}")
        result[(tp.topic, tp.partition)] = tp.offset
    return result


def decide_plan(
    settings: WorkerSettings, facts: list[PartitionFacts], committed: Mapping[tuple[str, int], int], now: int
) -> Plan:
    """The pure part of a bootstrap: start and end of every partition (raises on a start beyond retention)."""
    decisions: list[StartDecision] = []
    for f in facts:
        decisions.append(
            decide_partition(
                settings.start,
                settings.end,
                f,
                allow_clamp=settings.allow_clamp,
                now_ms=now,
                committed=committed.get((f.topic, f.partition)),
            )
        )
    replay = ReplayInfo(
        settings.replay_id,
        settings.mode,
        settings.replay_group or "",
        settings.live_group,
        settings.topics,
        settings.filter.to_obj(inline_keys=True),
        now,
    )
    starts = tuple(
        StartInfo(settings.replay_id, d.topic, d.partition, d.offset, d.end_offset, d.end_timestamp_ms, d.clamped, now)
        for d in decisions
    )
    return Plan(replay, starts)


def bootstrap_replay(
    settings: WorkerSettings,
    client_config: Mapping[str, str] | None = None,
    *,
    timeout: float = 30.0,
    attempts: int = 20,
    look_first: bool = True,
) -> ReplayHandover:
    """Make sure the replay is bootstrapped; return its handover state. Safe to call from every replica at
    once, and again after any crash. Raises `StartOlderThanRetention`/`SpecError` for a start that cannot
    be honoured (a configuration problem, not retried) and `BootstrapError` when Kafka keeps failing.

    `look_first=False` is for a caller that made sure the handover topic exists and comes before the replicas
    as a rule (the operator, while the Deployment's pods start): the look before taking the transactional id
    then only costs a reader, since the look after it decides anyway (a replica it fences retries and reads)."""
    assert settings.replay_group, "bootstrap needs the replay group"
    handover = HandoverTopic(
        settings.bootstrap_servers,
        settings.handover_topic,
        client_config,
        timeout=timeout,
        client_id=f"reprise-bootstrap-{settings.member_name}",
        reader_group=settings.replay_group,
    )
    base = kafka_clients.connection(
        settings.bootstrap_servers, client_config, f"reprise-bootstrap-{settings.member_name}"
    )
    last_error: Exception | None = None
    try:
        for attempt in range(attempts):
            try:
                # Look before taking the transactional id: a replica that finds the work done fences nobody,
                # so concurrent replicas stop contending as soon as one has succeeded.
                if look_first or attempt:
                    handover.ensure(create=True)
                    state = handover.read_replay(settings.replay_id)
                    if state.bootstrapped:
                        return state
                return _bootstrap_once(settings, base, handover, timeout)
            except (StartOlderThanRetention, SpecError):
                raise
            except (KafkaException, BootstrapError, HandoverTopicError, SystemError) as exc:
                # (SystemError: a KafkaException confluent-kafka-python#1708 turned into one; see kafka_clients.)
                last_error = exc
                if attempt + 1 == attempts:
                    break
                # Fenced by a concurrent bootstrapper, a coordinator moving, a broker restarting: back off
                # with jitter (so two replicas do not keep fencing each other) and look again.
                pause = min(5.0, 0.2 * 2**attempt) * (0.5 + random.random())
                log.warning(
                    "bootstrap attempt failed, retrying",
                    extra={"attempt": attempt + 1, "error": str(exc), "retry_in_s": round(pause, 2)},
                )
                time.sleep(pause)
        raise BootstrapError(f"could not bootstrap replay {settings.replay_id} after {attempts} attempts: {last_error}")
    finally:
        handover.close()


def _bootstrap_once(settings: WorkerSettings, base: dict, handover: HandoverTopic, timeout: float) -> ReplayHandover:
    producer = Producer(
        kafka_clients.producer_config(
            base,
            **{
                "transactional.id": bootstrap_transactional_id(settings.replay_id),
                # A bootstrapper that dies mid-transaction holds back read_committed readers of the handover topic
                # until the transaction times out (or the next bootstrapper fences it): keep that short.
                "transaction.timeout.ms": 15000,
                "linger.ms": 0,
            },
        )
    )
    consumer = Consumer(kafka_clients.consumer_config(base, settings.replay_group or ""))
    try:
        producer.init_transactions(timeout)
        # Fenced every earlier bootstrapper of this replay: what the topic says now is final.
        state = handover.read_replay(settings.replay_id)
        if state.bootstrapped:
            return state
        now = now_ms()
        facts = partition_facts(
            consumer,
            settings.topics,
            settings.start.lookup_timestamp(now),
            settings.end.timestamp_ms if settings.end and settings.end.kind == "timestamp" else None,
            timeout,
        )
        committed = {}
        found = consumer.committed([TopicPartition(f.topic, f.partition) for f in facts], timeout=timeout)
        for tp in found:
            if tp.error is not None:
                raise BootstrapError(f"reading committed offsets of {settings.replay_group}: {tp.error.str()}")
            if tp.offset >= 0:
                committed[(tp.topic, tp.partition)] = tp.offset
        plan = decide_plan(settings, facts, committed, now)
        producer.begin_transaction()
        for record in (plan.replay, *plan.starts):
            key, value = encode(record)
            producer.produce(settings.handover_topic, value=value, key=key, partition=0)
        offsets = [
            TopicPartition(s.topic, s.partition, s.offset)
            for s in plan.starts
            if (s.topic, s.partition) not in committed
        ]
        if offsets:
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout)
        producer.commit_transaction(timeout)
        log.info(
            "replay bootstrapped",
            extra={
                "replay_id": settings.replay_id,
                "partitions": len(plan.starts),
                "start_offsets": {f"{s.topic}[{s.partition}]": s.offset for s in plan.starts},
                "clamped": [f"{s.topic}[{s.partition}]" for s in plan.starts if s.clamped],
            },
        )
        state = ReplayHandover(settings.replay_id)
        for record in (plan.replay, *plan.starts):
            key, value = encode(record)
            rk, rec = decode(key, value)
            state.apply(rk, key, rec)
        return state
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(timeout)
            except KafkaException:
                pass
        raise
    finally:
        consumer.close()
        try:
            producer.flush(1.0)
        except KafkaException:
            pass  # fenced or failed: nothing of ours is left to deliver
        finally:
            producer.close()
