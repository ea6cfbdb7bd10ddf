"""The replay worker against the real broker: the start, forwarding, faults, poison records, SIGTERM, markers.

Workers run as real processes (`python -m replay_worker`), so `kill -9` is a real crash. No timing
assertions: waits are bounded only so that a broken build fails instead of hanging.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.request
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from replay_worker.replay.bootstrap import bootstrap_replay
from replay_worker.protocol.commit_marks import CommitMark
from replay_worker.topic.handover_topic import HandoverTopic
from replay_worker.settings import WorkerSettings
from replay_worker.protocol.start_position import StartSpec

from .harness import committed, end_offsets, produce, read_log_lines, wait_for

pytestmark = pytest.mark.integration


def _exit_code(process, timeout: float = 120.0) -> int:
    return process.popen.wait(timeout=timeout)


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    """Every record of `topic`, read to the end of each partition: (partition, offset, key, value, headers, ts)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    records, done = [], set()
    ends = end_offsets(bootstrap, topic, partitions)
    done.update(p for p, end in ends.items() if end == 0)
    deadline = time.monotonic() + 120
    while len(done) < partitions and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition())
                continue
            records.append(
                (
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    message.headers(),
                    message.timestamp()[1],
                )
            )
    consumer.close()
    assert len(done) == partitions, "could not read the topic to its end"
    return records


def _all_finished(bootstrap: str, handover_topic: str, replay_id: str) -> bool:
    try:
        return HandoverTopic(bootstrap, handover_topic, timeout=10).read_replay(replay_id).all_handed_over
    except Exception:  # the broker may be restarting
        return False


# -- the start


# Concurrent bootstrappers fence each other, and confluent-kafka warns when a fenced producer's close cannot
# abort its transaction: expected here (the newer bootstrapper owns the transactional id).
@pytest.mark.filterwarnings("ignore:Producer abort_transaction failed during close:RuntimeWarning")
def test_the_start_is_resolved_once_by_concurrent_replicas(kafka, topic_name, handover_topic) -> None:
    kafka.create_topic(topic_name, 3)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    now = int(time.time() * 1000)
    # Timestamps 1 ms apart up to now, so replicas resolving "the last 200 ms" a moment apart would disagree.
    for n in range(900):
        producer.produce(topic_name, value=b"x", partition=n % 3, timestamp=now - 900 + n)
    producer.flush(30)
    settings = WorkerSettings(
        bootstrap_servers=kafka.bootstrap,
        replay_id=f"test/{topic_name}",
        topics=(topic_name,),
        replay_group=f"{topic_name}-replay",
        handler="json:dumps",
        handover_topic=handover_topic,
        start=StartSpec("duration", duration_s=0.2),
    )
    results: list = []
    errors: list = []
    barrier = threading.Barrier(6)

    def replica() -> None:
        try:
            barrier.wait()
            results.append(
                bootstrap_replay(settings.with_changes(member_name=threading.current_thread().name)).start_offsets()
            )
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=replica, name=f"replica-{i}") for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len(results) == 6 and all(r == results[0] for r in results)
    published = HandoverTopic(kafka.bootstrap, handover_topic).read_replay(settings.replay_id).start_offsets()
    assert published == results[0]
    group = committed(kafka.bootstrap, settings.replay_group, topic_name, 3)
    assert {(topic_name, p): o for p, (o, _) in group.items()} == published


def test_a_start_older_than_retention_fails_loudly_unless_clamping(
    kafka, topic_name, procs, worker_env, out_dir
) -> None:
    kafka.create_topic(topic_name, 1)
    produce(kafka.bootstrap, topic_name, 1, 100)
    admin = kafka.admin()  # kept referenced until its futures are done
    for future in admin.delete_records([TopicPartition(topic_name, 0, 50)]).values():
        future.result(timeout=30)
    refused = procs.worker("refused", worker_env(REPRISE_START='{"timestamp": 1}', REPRISE_EXIT_WHEN_DONE="true"))
    assert _exit_code(refused) == 3
    assert "older than the partition's log-start offset 50" in refused.log_path.read_text()
    clamped = procs.worker(
        "clamped",
        worker_env(REPRISE_START='{"timestamp": 1}', REPRISE_ALLOW_CLAMP="true", REPRISE_EXIT_WHEN_DONE="true"),
    )
    assert _exit_code(clamped) == 0
    assert sorted(o for (_, _, o) in read_log_lines(out_dir, "replay")) == list(range(50, 100))


# -- forwarding


def test_forward_keeps_key_headers_timestamp_and_partition(kafka, topic_name, procs, worker_env) -> None:
    # The records are dated 2023, so time retention would delete them (source and copy) at the broker's next
    # retention check, which a run of the suite sometimes hits: keep them.
    keep = {"retention.ms": "-1"}
    kafka.create_topic(topic_name, 4, config=keep)
    target = kafka.create_topic(f"{topic_name}-copy", 4, config=keep)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for n in range(2000):
        producer.produce(
            topic_name,
            key=f"k{n % 37}".encode(),
            partition=n % 4,
            timestamp=1_700_000_000_000 + n,
            value=json.dumps({"n": n, "kind": "even" if n % 2 == 0 else "odd"}).encode(),
            headers=[("n", str(n).encode()), ("source", b"test")],
        )
    producer.flush(30)
    worker = procs.worker(
        "forward",
        worker_env(
            REPRISE_HANDLER="",
            REPRISE_FORWARD_TOPIC=target,
            REPRISE_FILTER='{"json":[{"path":"kind","equals":"even"}]}',
            REPRISE_EXIT_WHEN_DONE="true",
        ),
    )
    assert _exit_code(worker) == 0, worker.log_tail(30)
    source = [r for r in _read_all(kafka.bootstrap, topic_name, 4) if json.loads(r[3])["kind"] == "even"]
    copied = _read_all(kafka.bootstrap, target, 4)
    strip = lambda rows: sorted((p, k, v, tuple(h or ()), ts) for p, _o, k, v, h, ts in rows)  # noqa: E731
    assert len(copied) == 1000
    assert strip(copied) == strip(source)
    # Order within a partition is kept too.
    for p in range(4):
        assert [r[3] for r in copied if r[0] == p] == [r[3] for r in sorted(source) if r[0] == p]


def test_transactional_forward_is_exactly_once_across_a_kill(kafka, topic_name, procs, worker_env) -> None:
    kafka.create_topic(topic_name, 4)
    target = kafka.create_topic(f"{topic_name}-copy", 4)
    produce(kafka.bootstrap, topic_name, 4, 20000)
    env = worker_env(
        REPRISE_HANDLER="",
        REPRISE_FORWARD_TOPIC=target,
        REPRISE_FORWARD_TRANSACTIONAL="true",
        REPRISE_BATCH_SIZE="500",
        REPRISE_MAX_RECORDS_PER_SECOND="4000",
        REPRISE_EXIT_WHEN_DONE="true",
    )
    first = procs.worker("eos", env)
    wait_for(
        lambda: sum(end_offsets(kafka.bootstrap, target, 4).values()) > 4000,
        120,
        "some records copied",
        processes_to_watch=[first],
    )
    procs.kill9(first)
    again = procs.worker("eos", env)  # the same member name: its transactional id fences the dead one
    assert _exit_code(again, 300) == 0, again.log_tail(30)
    copied = Counter(r[3] for r in _read_all(kafka.bootstrap, target, 4))
    source = Counter(r[3] for r in _read_all(kafka.bootstrap, topic_name, 4))
    assert copied == source


# -- faults: rebalances, kill -9, a broker restart


def test_rebalances_kills_and_a_broker_restart_lose_nothing(
    kafka, topic_name, procs, worker_env, out_dir, handover_topic
) -> None:
    partitions, records, batch = 6, 30000, 200
    kafka.create_topic(topic_name, partitions)
    produce(kafka.bootstrap, topic_name, partitions, records)
    env = worker_env(REPRISE_BATCH_SIZE=str(batch), REPRISE_MAX_RECORDS_PER_SECOND="2500")
    replay_id = env["REPRISE_REPLAY_ID"]

    def processed() -> int:
        return sum(read_log_lines(out_dir, "replay").values())

    r1, r2 = procs.worker("r1", env), procs.worker("r2", env)
    wait_for(lambda: processed() > 3000, 120, "the replay under way", processes_to_watch=[r1, r2])
    r3 = procs.worker("r3", env)  # a replica added: rebalance
    wait_for(lambda: processed() > 8000, 120, "more progress", processes_to_watch=[r1, r2, r3])
    r2.popen.send_signal(signal.SIGTERM)  # a replica removed cleanly: commit on revoke, leave the group
    assert _exit_code(r2) == 0
    wait_for(lambda: processed() > 12000, 120, "more progress", processes_to_watch=[r1, r3])
    procs.kill9(r1)  # a crash
    wait_for(lambda: processed() > 15000, 120, "more progress", processes_to_watch=[r3])
    kafka.restart()  # the broker goes away mid-replay and comes back on the same address
    r4 = procs.worker("r4", env)
    wait_for(
        lambda: _all_finished(kafka.bootstrap, handover_topic, replay_id),
        300,
        "every partition finished",
        processes_to_watch=[r3, r4],
    )
    counts = read_log_lines(out_dir, "replay")
    expected = {(topic_name, p, o) for p in range(partitions) for o in range(records // partitions)}
    assert set(counts) == expected, f"lost {len(expected - set(counts))}"
    duplicates = sum(counts.values()) - len(counts)
    print(f"records {len(counts)}, duplicates {duplicates}")
    # At most the uncommitted batches (the one in hand and the one whose commit was on its way) of the killed
    # replica and of the one replica running at the broker restart.
    assert duplicates <= batch * 2 * 2, duplicates
    finished = committed(kafka.bootstrap, env["REPRISE_REPLAY_GROUP"], topic_name, partitions)
    assert all(o == records // partitions and CommitMark.decode(m).finished for o, m in finished.values())


# -- operations


def test_poison_records_go_to_the_dead_letter_topic_and_the_replay_goes_on(
    kafka, topic_name, procs, worker_env, out_dir
) -> None:
    kafka.create_topic(topic_name, 2)
    dlq = kafka.create_topic(f"{topic_name}-dlq", 1)
    produce(kafka.bootstrap, topic_name, 2, 400, value_of=lambda n: b"poison" if n % 50 == 7 else b'{"ok":1}')
    worker = procs.worker(
        "w", worker_env(REPRISE_DLQ_TOPIC=dlq, REPRISE_EXIT_WHEN_DONE="true", REPRISE_HANDLER_RETRIES="1")
    )
    assert _exit_code(worker) == 0, worker.log_tail(30)
    dead = _read_all(kafka.bootstrap, dlq, 1)
    assert len(dead) == 8 and all(r[3] == b"poison" for r in dead)
    headers = dict(dead[0][4])
    assert headers["reprise.source.topic"] == topic_name.encode() and b"poison record" in headers["reprise.error"]
    assert sum(read_log_lines(out_dir, "replay").values()) == 392


def test_undecodable_records_are_counted_and_skipped_without_a_dlq(
    kafka, topic_name, procs, worker_env, out_dir
) -> None:
    kafka.create_topic(topic_name, 1)
    produce(
        kafka.bootstrap, topic_name, 1, 100, value_of=lambda n: b'"paid" but broken' if n == 10 else b'{"s":"paid"}'
    )
    worker = procs.worker(
        "w", worker_env(REPRISE_FILTER='{"json":[{"path":"s","equals":"paid"}]}', REPRISE_EXIT_WHEN_DONE="true")
    )
    assert _exit_code(worker) == 0
    assert sorted(o for (_, _, o) in read_log_lines(out_dir, "replay")) == [o for o in range(100) if o != 10]
    assert "poison record skipped" in worker.log_path.read_text()


def test_sigterm_finishes_the_batch_commits_and_leaves(kafka, topic_name, procs, worker_env, out_dir) -> None:
    kafka.create_topic(topic_name, 2)
    produce(kafka.bootstrap, topic_name, 2, 3000)
    env = worker_env(REPRISE_BATCH_SIZE="100", REPRISE_MAX_RECORDS_PER_SECOND="500", REPRISE_EXIT_WHEN_DONE="true")
    worker = procs.worker("w", env)
    wait_for(lambda: sum(read_log_lines(out_dir, "replay").values()) > 500, 60, "progress", processes_to_watch=[worker])
    worker.popen.send_signal(signal.SIGTERM)
    assert _exit_code(worker, 60) == 0
    done = sum(read_log_lines(out_dir, "replay").values())
    offsets = committed(kafka.bootstrap, env["REPRISE_REPLAY_GROUP"], topic_name, 2)
    assert sum(o for o, _ in offsets.values()) == done  # everything processed is committed, nothing more
    assert "partitions revoked" in worker.log_path.read_text()
    again = procs.worker("w2", {**env, "REPRISE_MAX_RECORDS_PER_SECOND": "0"})
    assert _exit_code(again) == 0
    counts = read_log_lines(out_dir, "replay")
    assert len(counts) == 3000 and max(counts.values()) == 1  # resumed from committed offsets: no duplicates


def test_a_stop_while_joining_the_group_leaves_at_once(kafka, topic_name, procs, worker_env, out_dir) -> None:
    """SIGTERM as the consumer has subscribed. Its first assignment is served by the last consume() or, when
    it arrives after that, by close() on a consumer being destroyed, whose committed offsets cannot be read
    (the worker retried that for a minute, holding the close up; the unit tests in
    test_consumer_rebalance.py pin that case down). Either way the worker leaves at once, and the next
    replica replays everything once."""
    kafka.create_topic(topic_name, 4)
    produce(kafka.bootstrap, topic_name, 4, 400)
    env = worker_env(REPRISE_EXIT_WHEN_DONE="true")
    worker = procs.worker("w", env)
    wait_for(
        lambda: "replay consumer started" in worker.log_path.read_text(),
        60,
        "the subscription",
        interval=0.005,
        processes_to_watch=[worker],
    )
    worker.popen.send_signal(signal.SIGTERM)
    assert _exit_code(worker, 60) == 0
    log = worker.log_path.read_text()
    assert "reading committed offsets failed" not in log and "did not return within" not in log, log[-3000:]
    assert "replay consumer stopped" in log
    again = procs.worker("w2", env)
    assert _exit_code(again) == 0
    counts = read_log_lines(out_dir, "replay")
    assert len(counts) == 400 and max(counts.values()) == 1


def test_transaction_markers_do_not_keep_lag_above_zero(kafka, topic_name, procs, worker_env) -> None:
    kafka.create_topic(topic_name, 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{topic_name}-tx"})
    producer.init_transactions(30)
    for _txn in range(5):
        producer.begin_transaction()
        for n in range(50):
            producer.produce(topic_name, value=b"{}", partition=n % 2)
        producer.commit_transaction(30)
    env = worker_env(REPRISE_MODE="Drain", REPRISE_EXIT_WHEN_DONE="true")
    worker = procs.worker("w", env)
    assert _exit_code(worker) == 0
    ends = end_offsets(kafka.bootstrap, topic_name, 2)
    offsets = committed(kafka.bootstrap, env["REPRISE_REPLAY_GROUP"], topic_name, 2)
    assert all(offsets[p][0] == ends[p] for p in range(2)), (offsets, ends)  # lag exactly 0, past the markers


def test_bounded_end_snapshot_stops_at_the_end_offsets_of_the_start(
    kafka, topic_name, procs, worker_env, out_dir, handover_topic
) -> None:
    kafka.create_topic(topic_name, 2)
    produce(kafka.bootstrap, topic_name, 2, 200)
    settings = WorkerSettings.from_env(worker_env(REPRISE_END='{"snapshot":true}'))
    bootstrap_replay(settings)  # the operator may bootstrap before the Deployment exists: the end is fixed now
    produce(kafka.bootstrap, topic_name, 2, 100)
    worker = procs.worker("w", worker_env(REPRISE_END='{"snapshot":true}', REPRISE_EXIT_WHEN_DONE="true"))
    assert _exit_code(worker) == 0
    assert sorted(o for (_, p, o) in read_log_lines(out_dir, "replay") if p == 0) == list(range(100))
    state = HandoverTopic(kafka.bootstrap, handover_topic).read_replay(settings.replay_id)
    assert {k: p.handover.reason for k, p in state.partitions.items()} == {
        (topic_name, 0): "end-bound",
        (topic_name, 1): "end-bound",
    }


def test_metrics_and_liveness_endpoint(kafka, topic_name, procs, worker_env) -> None:
    from local_platform.processes import free_port

    kafka.create_topic(topic_name, 1)
    produce(kafka.bootstrap, topic_name, 1, 50)
    port = free_port()
    worker = procs.worker("w", worker_env(REPRISE_METRICS_PORT=str(port)))

    def scrape(path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.read().decode()

    def finished() -> bool:
        try:
            return _metric(scrape("/metrics"), "reprise_worker_partitions_finished") == 1.0
        except OSError:  # not listening yet
            return False

    wait_for(finished, 60, "the partition finished, as the metrics say", processes_to_watch=[worker])
    metrics = scrape("/metrics")
    assert _metric(metrics, "reprise_worker_records_consumed_total") == 50.0
    assert _metric(metrics, "reprise_worker_records_delivered_total") == 50.0
    assert scrape("/healthz").strip() == "ok" and scrape("/readyz").strip() == "ready"


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def test_cli_help_is_readable() -> None:
    import subprocess
    import sys

    from .harness import REPO, python_env

    result = subprocess.run(
        [sys.executable, "-m", "replay_worker", "--help"],
        capture_output=True,
        text=True,
        env={**python_env(), "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 0
    assert "REPRISE_START" in result.stdout and "--mode" in result.stdout and "examples:" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "replay_worker", "--mode", "Sideways"],
        capture_output=True,
        text=True,
        env={**python_env(), "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        timeout=60,
    )
    assert bad.returncode == 2 and "REPRISE_MODE (--mode)" in bad.stderr
