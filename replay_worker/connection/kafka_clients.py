"""librdkafka settings for every client the worker and the guard make, from one place.

Connection settings come from the bootstrap servers plus a folder of files, one librdkafka setting per file
(file name = key, content = value), mounted from the user's Secret. Those values are credentials: they are
read here, handed to librdkafka, and never logged, put in metrics or in the handover topic. Only the
names of the keys may be logged.

Each client type gets only the settings that apply to it (`setting_scopes`: `consumer.`/`producer.`/`admin.`
prefixes, and librdkafka's consumer-only and producer-only settings), so one Secret serves them all without
librdkafka warning from every client. The worker's own settings go on top, because its correctness depends on
them (manual offset storing and commits, the replay group's assignment strategy, idempotent producers): a Secret
cannot switch them off.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from .librdkafka_levels import LibrdkafkaLevels
from .setting_scopes import settings_for

_client_log = logging.getLogger("replay_worker.librdkafka")
_client_log.addFilter(LibrdkafkaLevels())

#: Fetch defaults of the replay consumer (`consumer`): prefetch generously (the Python side is the bottleneck;
#: librdkafka fills its queue meanwhile) within the worker's memory budget. fetch.wait.max.ms: a partition's
#: end-of-partition event comes with the first fetch that finds nothing new, which the broker holds this long
#: (500 ms by default: most of the time from a Drain's last record to its finish); at the end, a fetch every
#: 100 ms. Settings of the same name in the Kafka config folder win.
FETCH_TUNING = {
    "fetch.max.bytes": 52428800,
    "queued.max.messages.kbytes": 32768,
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": 100,
}


class KafkaConfigError(ValueError):
    """The Kafka config folder cannot be read; the message names the folder or file, never a value."""


def load_config_dir(path: str | Path | None) -> dict[str, str]:
    """The settings in `path`: every regular file whose name does not start with a dot.

    Kubernetes mounts a Secret as files plus `..data` links; those dot-names are skipped. One trailing
    newline is removed, since editors and `kubectl create secret --from-file` often leave one.
    """
    if path is None:
        return {}
    folder = Path(path)
    if not folder.is_dir():
        raise KafkaConfigError(f"REPRISE_KAFKA_CONFIG_DIR {folder} is not a directory")
    values: dict[str, str] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or not entry.is_file():
            continue
        try:
            text = entry.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise KafkaConfigError(f"cannot read Kafka setting file {entry}: {type(exc).__name__}") from None
        values[entry.name] = text[:-1] if text.endswith("\n") else text
    return _without_named_files(values, folder)


def _without_named_files(values: dict[str, str], folder: Path) -> dict[str, str]:
    """The settings without the files a `*.location` setting names in this folder (`ssl.ca.location` =
    `/etc/reprise/kafka/ca.crt` and a key `ca.crt`): such a file is the value of that setting, not a setting of
    its own (librdkafka would refuse `ca.crt` as an unknown property). The operator gives the same file inline
    (`replay_worker.connection.setting_allow_list`), so one Secret serves both."""
    here = {str(folder).rstrip("/"), "/etc/reprise/kafka"}
    named = {
        os.path.basename(value.strip())
        for key, value in values.items()
        if key.endswith(".location") and os.path.dirname(value.strip()) in here
    }
    return {key: value for key, value in values.items() if key not in named}


def connection(
    bootstrap_servers: str, extra: Mapping[str, str] | None = None, client_id: str = "reprise-worker"
) -> dict[str, Any]:
    """Settings every client shares: where Kafka is and how to authenticate (from the config folder)."""
    config: dict[str, Any] = {"client.id": client_id, **dict(extra or {}), "bootstrap.servers": bootstrap_servers}
    config["logger"] = _client_log
    return config


#: The replay group's assignment strategy: eager (every rebalance revokes every partition and assigns anew), not
#: cooperative-sticky. The replicas of a replay start together, and the first to join takes every partition; with
#: cooperative rebalancing each later join then takes two rounds (revoke, then assign), and librdkafka (2.16) lets
#: a member that learns of a round from a heartbeat join again only a second after its previous join (the
#: join interval of `rd_kafka_cgrp_join_state_serve`), so three replicas settled a second per round, two to three
#: seconds after the first read (benchmarks/end_to_end). An eager member that learns of a rebalance revokes
#: everything and joins again at once (librdkafka skips the interval after an unassign), so the same start settles
#: in one or two rounds of a few hundred milliseconds. What eager costs, a pause of every replica while one joins
#: or leaves, is what a replay can afford: its replicas start together and leave together, and a rebalance never
#: loses or repeats a record here (commit on revoke; the next owner resumes from the committed offset).
#: Round robin, not range: with several topics, range balances each topic on its own and gives the first members
#: more. Every member of a group must use the same kind (eager or cooperative): this is the replay group's alone. A
#: replica of an older worker (cooperative-sticky) in the same replay, as in a rolling update of the replay's
#: Deployment, has the newer ones' joins refused (INCONSISTENT_GROUP_PROTOCOL, logged as a consumer error and
#: retried by librdkafka) until it has left; nothing is read twice or lost meanwhile.
REPLAY_ASSIGNMENT = "roundrobin"


def consumer_config(base: Mapping[str, Any], group_id: str, **overrides: Any) -> dict[str, Any]:
    """A member of the replay group: stores and commits only what it processed; eager assignment
    (`REPLAY_ASSIGNMENT`)."""
    config = settings_for("consumer", base)
    config.update(
        {
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "partition.assignment.strategy": REPLAY_ASSIGNMENT,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            # Partitions without a committed offset are outside the replay's plan (see consumer.py); they are
            # never read, so the reset policy only decides where librdkafka parks them.
            "auto.offset.reset": "latest",
        }
    )
    config.update(overrides)
    return config


def reader_config(base: Mapping[str, Any], group_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    """A consumer used with `assign()` only (no group): bounded reads and the handover-topic tail.

    librdkafka needs a group id and looks its coordinator up, although the reader never joins or commits. So it
    carries `group_id` when the caller has one its principal may describe (the replay group, the live group):
    under tenant ACLs the placeholder `reprise-reader-unused`, outside every team's prefixes, had each reader log
    "FindCoordinator response error: Group authorization failed" (issue 27)."""
    config = settings_for("consumer", base)
    config.update(
        {
            "group.id": group_id or "reprise-reader-unused",  # never joined: assign() only
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    config.update(overrides)
    return config


def producer_config(base: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """An idempotent producer: retries never duplicate or reorder records within a partition."""
    config = settings_for("producer", base)
    config.update({"enable.idempotence": True, "acks": "all"})
    config.update(overrides)
    # Transactional producers (the bootstrap's) log through Python logging too: their raw stderr lines were the
    # FATAL/TXNERR of a routine fence on the operator's terminal (librdkafka_levels). They logged to stderr
    # because of confluent-kafka-python#1708 (a log line served while a transactional call raises turned the
    # KafkaException into a SystemError); with confluent-kafka 2.16 a fenced producer's calls raise
    # KafkaException with the logger set (its log lines are served by the next poll), and the bootstrap retries
    # a SystemError as well, should it come back.
    return config


def admin_config(base: Mapping[str, Any]) -> dict[str, Any]:
    return settings_for("admin", base)


class GroupOffsetReader:
    """Reads another group's committed offsets (with their metadata) without joining that group.

    Not `AdminClient.list_consumer_group_offsets`: librdkafka (2.15 and 2.16 at least) crashes the whole
    process (SIGSEGV in rd_kafka_cgrp_op) when the broker answers that request with an error, which a
    loading or moving group coordinator does. A consumer that carries the group id and never subscribes
    asks the same question through the consumer-group code path, which handles those errors.
    """

    def __init__(self, base: Mapping[str, Any], group_id: str) -> None:
        from confluent_kafka import Consumer

        config = {k: v for k, v in settings_for("consumer", base).items() if k != "group.id"}
        config.update({"group.id": group_id, "enable.auto.commit": False})
        self.group_id = group_id
        self._consumer = Consumer(config)

    def committed(self, partitions: list[Any], timeout: float = 15.0) -> list[Any]:
        """TopicPartitions with the committed offset (-1001 when none) and its metadata."""
        return self._consumer.committed(partitions, timeout=timeout)

    def close(self) -> None:
        self._consumer.close()


def close_within(close: Callable[[], object], seconds: float, what: str) -> bool:
    """Call `close()` (a librdkafka client's), giving up after `seconds`: True when it returned in time.

    A consumer's close serves the rebalance still under way and leaves the group, so it waits on callbacks
    and on the group coordinator; a callback that blocked there held stops up for minutes (see
    `read_committed`), and a coordinator that does not answer can do the same. What close would still do is
    not needed for correctness: the positions were committed before it, and a member that never says goodbye
    is dropped by the group after `session.timeout.ms`. So a stop waits a bounded time and then exits without
    it, rather than holding the pod in Terminating until the kubelet's SIGKILL. An error close raises is
    logged and counts as returned.
    """
    outcome: dict[str, BaseException] = {}

    def closing() -> None:
        try:
            close()
        except BaseException as exc:  # reported below, in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=closing, name=f"close-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        _client_log.warning(
            f"closing the {what} did not return within {seconds:.0f}s; exiting without it "
            "(its positions are committed; the group drops the member after its session timeout)"
        )
        return False
    if "error" in outcome:
        _client_log.warning(f"closing the {what} failed", extra={"error": str(outcome["error"])})
    return True


def read_committed(
    consumer: Any, partitions: list[Any], what: str, log: logging.Logger, patience: float = 60.0
) -> list[Any]:
    """The group's committed offsets of `partitions` (TopicPartitions with offset and metadata), read in a
    rebalance callback. Failures are retried for `patience` seconds, because a coordinator that moves or is
    still loading its offsets refuses for a while, and an unreadable offset must never be taken for "none"
    (that would rewind to the start). Not when the consumer is being destroyed: close() can serve an
    assignment that was under way, and no retry can read through a closing consumer.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    deadline = time.monotonic() + patience
    while True:
        try:
            found = consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in partitions], timeout=15)
            failed = [tp for tp in found if tp.error is not None]
            if failed:
                raise KafkaException(failed[0].error)
            return found
        except KafkaException as exc:
            if time.monotonic() > deadline or exc.args[0].code() == KafkaError._DESTROY:
                raise
            log.warning(f"reading {what} failed, retrying", extra={"error": str(exc)})
            time.sleep(0.5)
