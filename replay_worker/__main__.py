"""`python -m replay_worker`: read the settings, bootstrap the replay, run the loop; stop cleanly on SIGTERM.

Exit codes: 0 done or stopped; 2 bad settings or Kafka config folder; 3 the start cannot be honoured
(older than retention without clamping, or an impossible offset); 1 anything else (Kubernetes restarts the
pod, and the worker resumes from committed offsets).
"""

from __future__ import annotations

import logging
import resource
import signal
import sys
import time
from typing import Any, Mapping, Sequence

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from .connection import kafka_clients
from . import logging as worker_logging
from .replay.bootstrap import BootstrapError, bootstrap_replay
from .replay.delivery import (
    DeadLetters,
    Delivery,
    ForwardDelivery,
    HandlerDelivery,
    HandlerLoadError,
    TransactionalForwardDelivery,
    choose_partition_mapping,
    load_handler,
)
from .protocol.filters import FilterSpecError, RecordFilter
from .connection.kafka_clients import KafkaConfigError, load_config_dir
from .connection.schema_registry import filter_schemas
from .replay.metrics import HealthServer, WorkerMetrics
from .settings import SettingsError, WorkerSettings
from .protocol.start_position import SpecError, StartOlderThanRetention

log = logging.getLogger("replay_worker")

#: A loop that has not gone round for this long is reported dead on /healthz.
STALE_AFTER_S = 120.0


class _Exit(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _partition_counts(base: Mapping[str, Any], topics: Sequence[str]) -> dict[str, int]:
    metadata = AdminClient(kafka_clients.admin_config(base)).list_topics(timeout=30)
    counts = {}
    for topic in topics:
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise _Exit(
                2,
                f"topic {topic} does not exist (or is not readable): "
                f"{found.error.str() if found is not None and found.error else 'not found'}",
            )
        counts[topic] = len(found.partitions)
    return counts


def build_delivery(settings: WorkerSettings, config: Mapping[str, str]) -> Delivery:
    base = kafka_clients.connection(settings.bootstrap_servers, config, f"reprise-{settings.member_name}")
    if settings.handler:
        handler = load_handler(settings.handler)
        dlq_producer = None
        if settings.dlq_topic and settings.poison_policy == "dead-letter":
            dlq_producer = Producer(kafka_clients.producer_config(base, **{"linger.ms": 5}))
        dead_letters = DeadLetters(settings.replay_id, settings.dlq_topic if dlq_producer else None, dlq_producer)
        return HandlerDelivery(handler, dead_letters, settings.handler_retries)
    assert settings.forward_topic
    counts = _partition_counts(base, [*settings.topics, settings.forward_topic])
    target = counts.pop(settings.forward_topic)
    mapping = choose_partition_mapping(counts, target)
    dlq = settings.dlq_topic if settings.poison_policy == "dead-letter" else None
    log.info(
        "forwarding",
        extra={
            "forward_topic": settings.forward_topic,
            "partition_mapping": mapping,
            "transactional": settings.forward_transactional,
        },
    )
    if settings.forward_transactional:
        return TransactionalForwardDelivery(
            base, settings.forward_topic, mapping, dlq, settings.replay_id, settings.member_name
        )
    return ForwardDelivery(base, settings.forward_topic, mapping, dlq, settings.replay_id)


def run_replay(settings: WorkerSettings, config: Mapping[str, str], metrics: WorkerMetrics, stop_hooks: list) -> int:
    from .replay.consumer import ReplayConsumer

    record_filter = RecordFilter.compile(settings.filter, filter_schemas(settings.filter))
    holder: dict[str, Any] = {}
    stop_hooks.append(lambda: holder.__setitem__("stop", True))  # a SIGTERM during the bootstrap
    server = None
    if settings.metrics_port:
        # Served from the start: alive (not ready) while the bootstrap retries against a Kafka that is away.
        server = HealthServer(
            settings.metrics_port,
            metrics.render,
            alive=lambda: time.monotonic() - metrics.heartbeat < STALE_AFTER_S,
            ready=lambda: bool(holder.get("worker") and holder["worker"].ready),
        ).start()
    try:
        state = bootstrap_replay(settings, config)
        delivery = build_delivery(settings, config)
        worker = holder["worker"] = ReplayConsumer(settings, config, delivery, record_filter, metrics, state)
        stop_hooks.append(worker.request_stop)
        if holder.get("stop"):
            delivery.close()
            return 0
        # A replica's fixed cost (start, imports, bootstrap, clients) against what its reading costs: each
        # replica pays the first, so it is what CPU per record grows by with the replicas (benchmarks/end_to_end).
        log.info("replay role ready", extra={"cpu_s": _cpu_seconds()})
        worker.run()
        log.info("replay role done", extra={"cpu_s": _cpu_seconds()})
    finally:
        if server is not None:
            server.stop()
    return 0


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 3)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = WorkerSettings.from_args(argv)
    except SettingsError as exc:
        print(f"replay_worker: {exc}", file=sys.stderr)
        return 2
    worker_logging.setup(settings.log_level, replay_id=settings.replay_id, member=settings.member_name)
    stop_hooks: list = []
    stopping = {"signal": None}

    def on_signal(signum: int, _frame: object) -> None:
        # Finish the batch, commit, leave the group: the loop checks the flag between batches.
        stopping["signal"] = signum
        log.info("stop requested", extra={"signal": signal.Signals(signum).name})
        for hook in stop_hooks:
            hook()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        config = load_config_dir(settings.kafka_config_dir)
        log.info("starting", extra={"settings": settings.described(), "kafka_config_keys": sorted(config)})
        metrics = WorkerMetrics(settings.replay_id, settings.member_name)
        if settings.role == "backfill":
            from .replay.backfill import run_backfill

            return run_backfill(settings, config, metrics, stop_hooks)
        return run_replay(settings, config, metrics, stop_hooks)
    except (KafkaConfigError, HandlerLoadError, FilterSpecError, _Exit) as exc:
        log.error(str(exc))
        return exc.code if isinstance(exc, _Exit) else 2
    except (StartOlderThanRetention, SpecError) as exc:
        log.error(str(exc), extra={"reason": "StartNotAvailable"})
        return 3
    except BootstrapError as exc:
        log.error(str(exc))
        return 1
    except Exception:
        log.exception("worker failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
