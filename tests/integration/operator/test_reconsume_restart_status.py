"""A restarted operator never reports a Handover replay as less far than it already reported (issue 18, item 1).

The operator is restarted (SIGKILL, then started again, as a crash and a new pod would) while a real Handover
replay runs on the local platform. Every status the API server stores for the resource is collected through a
watch, and no write may show fewer partitions handed over, or fewer records processed, than the one before it:
a follow step must not report from a view of the handover topic older than what was already reported.
"""

from __future__ import annotations

import json
import threading

import pytest

from .scenario import PARTITIONS, KeepProducing, apply, reconsume, wait_phase
from tests.fixtures.kube import wait_for

pytestmark = pytest.mark.integration

NAME = "restarted"


class StatusWrites:
    """Every distinct status the API server stored for one Reconsume, in order, from a watch."""

    def __init__(self, kube, namespace: str, name: str) -> None:
        self.kube, self.namespace, self.name = kube, namespace, name
        self.statuses: list[dict] = []
        self.gaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "StatusWrites":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        from kubernetes import client, watch
        from kubernetes.client.exceptions import ApiException

        api = self.kube.api_client()
        custom = client.CustomObjectsApi(api)
        version = None
        try:
            while not self._stop.is_set():
                stream = watch.Watch()
                kwargs = {"field_selector": f"metadata.name={self.name}", "timeout_seconds": 5}
                if version is not None:
                    kwargs["resource_version"] = version
                try:
                    for event in stream.stream(
                        custom.list_namespaced_custom_object,
                        "reprise.io",
                        "v1alpha1",
                        self.namespace,
                        "reconsumes",
                        **kwargs,
                    ):
                        body = event["object"]
                        version = body["metadata"]["resourceVersion"]
                        status = body.get("status") or {}
                        if not self.statuses or self.statuses[-1] != status:
                            self.statuses.append(status)
                        if self._stop.is_set():
                            break
                except ApiException as exc:
                    if exc.status != 410:
                        raise
                    version, self.gaps = None, self.gaps + 1  # expired: a gap, counted, never hidden
        finally:
            api.close()

    def progress(self) -> list[tuple[int, int]]:
        """(handed-over partitions, processed) of every write that carried progress."""
        found = []
        for status in self.statuses:
            progress = status.get("progress")
            if progress:
                handed = sum(1 for p in progress.get("partitions") or [] if p.get("state") == "HandedOver")
                found.append((handed, progress.get("processed", 0)))
        return found


def current(kube, namespace: str) -> dict:
    return json.loads(kube.kubectl("get", "reconsume", NAME, "-n", namespace, "-o", "json").stdout).get("status") or {}


def test_a_restarted_operator_never_reports_less_progress_than_before(
    kube, kafka, operator, namespace, topic_name, live_service
):
    restarts_with_progress = 0
    with KeepProducing(kafka.bootstrap, topic_name), StatusWrites(kube, namespace, NAME) as writes:
        body = reconsume(NAME, kafka.bootstrap, topic_name, "Handover", "accounts", str(live_service))
        body["spec"]["consumer"]["env"].append({"name": "REPRISE_MAX_RECORDS_PER_SECOND", "value": "100"})
        apply(kube, namespace, body)
        # Restart once the replay has reported records processed, and again once a partition is handed over
        # (if the replay is still running by then): the new operator's first reports must not go back.
        wait_for(
            lambda: (current(kube, namespace).get("progress") or {}).get("processed", 0) > 0,
            120,
            "the replay to report records processed",
        )
        operator.kill()
        operator.start()
        restarts_with_progress += 1
        wait_for(
            lambda: (
                (current(kube, namespace).get("progress") or {}).get("processed", 0) > 0
                and len(writes.progress()) > restarts_with_progress + 1
            ),
            60,
            "a report from the restarted operator",
        )

        def handed_over_or_done() -> bool:
            status = current(kube, namespace)
            parts = (status.get("progress") or {}).get("partitions") or []
            return status.get("phase") != "Running" or any(p.get("state") == "HandedOver" for p in parts)

        wait_for(handed_over_or_done, 180, "a partition handed over")
        if current(kube, namespace).get("phase") == "Running":
            operator.kill()
            operator.start()
            restarts_with_progress += 1
        wait_phase(kube, namespace, "reconsume", NAME, "Complete", 240, operator)
    reports = writes.progress()
    assert restarts_with_progress >= 1 and len(reports) >= 2, reports
    assert writes.gaps == 0, "the watch missed writes (resourceVersion expired)"
    for before, after in zip(reports, reports[1:]):
        assert after[0] >= before[0], f"handed-over partitions went back from {before[0]} to {after[0]}: {reports}"
        assert after[1] >= before[1], f"processed went back from {before[1]} to {after[1]}: {reports}"
    assert reports[-1][0] == PARTITIONS
