"""The Java library (`java/`): its Maven test suite, run against this session's real broker.

One entry for every Java test set: the conformance vectors (filters, wire, commit marks, guard traces, replay
rules; the replay traces through the Java testee and the one trace runner), the unit tests, and the integration tests of the guard, the handover topic, the replay role and the
Spring Kafka hook on the real broker. Then interoperability: a Handover run by the Python replay role against
live services guarded by the Java library, with kill -9 of both sides, checked like the Python-only runs. Maven resolves its dependencies into `~/.m2` (outside the repository) and
builds into the cache (`$REPRISE_CACHE/build/java-...`), never into the checkout.

The integration tests fail (never skip) when REPRISE_TEST_BOOTSTRAP is missing, so this file passes only when
the whole suite ran: it reads Surefire's reports and checks that enough tests ran and none failed or skipped.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from local_platform import processes
from local_platform.cache import cache_root
from local_platform.kafka_broker import KafkaBroker
from local_platform.prerequisites import missing
from tests.integration.replay_worker.harness import Processes
from tests.integration.replay_worker.test_handover_split import run_handover
from tests.unit.conformance.replay_trace_runner import run_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
JAVA = REPO / "java"
VECTORS = REPO / "conformance" / "vectors"
#: Fewer than this means test sets were lost (the vector files alone make about 480 cases).
MIN_TESTS = 450
#: Integration test classes that must have run against the broker.
INTEGRATION_CLASSES = (
    "io.reprise.kafka.topic.HandoverTopicIntegrationTest",
    "io.reprise.kafka.guard.GuardedConsumerIntegrationTest",
    "io.reprise.kafka.guard.PoisonRecordsIntegrationTest",
    "io.reprise.kafka.spring.GuardedConsumerFactoryIntegrationTest",
    "io.reprise.kafka.replay.ReplayRoleBrokerTest",
    "io.reprise.kafka.replay.ReplayRoleProcessTest",
)


def _build_dir() -> Path:
    """Per checkout, so two clones on one machine never share build output."""
    digest = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    return cache_root() / "build" / f"java-{digest}"


def _reports(reports: Path) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for path in sorted(reports.glob("TEST-*.xml")):
        root = ET.parse(path).getroot()
        found[root.get("name", path.stem)] = {
            k: int(root.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")
        }
    return found


def _tail(log: Path, lines: int = 80) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@pytest.mark.timeout(1800)
def test_java_suite(kafka: KafkaBroker) -> None:
    for tool in ("java", "mvn"):
        problem = missing(tool)
        assert problem is None, problem
    assert VECTORS.is_dir(), f"{VECTORS} is missing: the Java suite runs the shared conformance vectors"
    build = _build_dir()
    reports = build / "surefire-reports"
    if reports.is_dir():
        for old in reports.iterdir():
            old.unlink()
    build.mkdir(parents=True, exist_ok=True)
    log = build / "mvn-test.log"
    env = {k: v for k, v in os.environ.items() if k != "REPRISE_CONFORMANCE_DIR"}
    env["REPRISE_TEST_BOOTSTRAP"] = kafka.bootstrap
    command = ["mvn", "-B", f"-Dreprise.build.dir={build}", f"-Dreprise.conformance.dir={VECTORS}", "test"]
    with log.open("w") as out:
        done = subprocess.run(
            command, cwd=JAVA, env=env, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=1700
        )
    found = _reports(reports)
    failed = {name: counts for name, counts in found.items() if counts["failures"] or counts["errors"]}
    assert done.returncode == 0 and not failed, (
        f"the Java suite failed (exit {done.returncode}; failing classes: {sorted(failed)}); log {log}:\n{_tail(log)}"
    )
    total = sum(c["tests"] for c in found.values())
    skipped = sum(c["skipped"] for c in found.values())
    assert total > MIN_TESTS, f"only {total} Java tests ran (expected more than {MIN_TESTS}); log {log}"
    assert skipped == 0, f"{skipped} Java tests were skipped; log {log}"
    for name in INTEGRATION_CLASSES:
        assert found.get(name, {}).get("tests", 0) > 0, f"{name} did not run; log {log}"


# -- interoperability: the Python replay role against the Java guard


class JavaLiveProcesses(Processes):
    """The harness's processes, with the live service being the Java guard's (`LedgerLiveService`)."""

    classpath: str = ""

    def live(
        self, name: str, bootstrap: str, group: str, topic: str, out_dir: Path, handover_topic: str, batch: int = 200
    ) -> processes.ManagedProcess:
        # A small JVM: the machine runs brokers, replay workers and several of these at once.
        argv = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            self.classpath,
            "io.reprise.kafka.guard.LedgerLiveService",
            bootstrap,
            group,
            topic,
            str(out_dir),
            handover_topic,
        ]
        return self.start(name, argv, {"LIVE_BATCH": str(batch)})


@pytest.fixture(scope="module")
def java_classpath() -> str:
    """The library, its test classes and their dependencies, compiled into the cache's build folder."""
    build = _build_dir()
    build.mkdir(parents=True, exist_ok=True)
    listing = build / "test-classpath.txt"
    log = build / "mvn-classpath.log"
    with log.open("w") as out:
        done = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                f"-Dreprise.build.dir={build}",
                "test-compile",
                "dependency:build-classpath",
                f"-Dmdep.outputFile={listing}",
                "-Dmdep.includeScope=test",
            ],
            cwd=JAVA,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=900,
        )
    assert done.returncode == 0, f"building the Java classes failed; log {log}:\n{_tail(log)}"
    return os.pathsep.join([str(build / "test-classes"), str(build / "classes"), listing.read_text().strip()])


@pytest.mark.timeout(900)
def test_python_replay_role_against_the_java_guard(
    kafka, topic_name, handover_topic, procs, out_dir, worker_env, java_classpath
) -> None:
    java = JavaLiveProcesses(procs.log_dir)
    java.classpath = java_classpath
    try:
        report, allowance = run_handover(
            kafka, topic_name, handover_topic, java, out_dir, worker_env, faults=["kill-live", "kill-replay"], seed=7
        )
    finally:
        java.stop_all()
    print(report.summary())
    assert report.lost == [], report.summary()
    assert any(f is not None for f in report.first_skipped.values()), "the Java guard never skipped: nothing was tested"
    duplicates = sum(report.duplicates.values()) - len(report.duplicates)
    assert duplicates <= allowance, report.summary()


# -- the replay traces, run by the one trace runner through the Java testee (conformance/REPLAY_TRACES.md)

REPLAY_TESTEE = JAVA / "src" / "test" / "java" / "io" / "reprise" / "kafka" / "conformance" / "ReplayTraceTestee.java"


@pytest.mark.timeout(900)
def test_the_java_replay_book_passes_every_replay_trace(java_classpath) -> None:
    if not REPLAY_TESTEE.exists():
        pytest.skip(f"no Java replay testee yet ({REPLAY_TESTEE.relative_to(REPO)}): the Java ReplayBook is not ported")
    argv = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", java_classpath]
    count, failures = run_process([*argv, "io.reprise.kafka.conformance.ReplayTraceTestee"])
    assert not failures, f"{len(failures)} replay-trace runs failed in Java:\n" + "\n".join(map(str, failures[:10]))
    assert count > 1000, f"only {count} replay-trace steps ran"
