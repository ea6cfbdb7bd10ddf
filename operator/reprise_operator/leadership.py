"""Leader election on a coordination.k8s.io Lease, so two operator replicas run safely.

Only the holder of the Lease runs Kopf; the other replica waits. A leader that cannot renew its Lease
before it expires stops the process at once (Kubernetes restarts it as a follower) rather than risk two
operators acting on the same resources.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("reprise.leadership")

LEASE_NAME = "reprise-operator"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_expired(renew_time: str | None, duration_seconds: int, now: datetime) -> bool:
    """Pure: whether a Lease last renewed at `renew_time` has lapsed at `now`."""
    if not renew_time:
        return True
    renewed = datetime.fromisoformat(renew_time.replace("Z", "+00:00"))
    return now - renewed > timedelta(seconds=duration_seconds)


class Leadership:
    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        identity: str | None = None,
        duration_seconds: int = 15,
        renew_every: float = 5.0,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.duration = duration_seconds
        self.renew_every = renew_every
        self.on_lost = on_lost or (lambda: os._exit(1))
        self._stop = threading.Event()

    def _try_acquire(self) -> bool:
        now = _now()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "renewTime": _fmt(now),
        }
        try:
            lease = self.api.read_namespaced_lease(LEASE_NAME, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {"metadata": {"name": LEASE_NAME}, "spec": {**spec, "acquireTime": _fmt(now), "leaseTransitions": 0}}
            try:
                self.api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as create_exc:
                if create_exc.status == 409:
                    return False
                raise
        holder = lease.spec.holder_identity
        renew = lease.spec.renew_time.isoformat() if lease.spec.renew_time else None
        if holder != self.identity and not lease_expired(renew, lease.spec.lease_duration_seconds or self.duration, now):
            return False
        if holder != self.identity:
            spec["acquireTime"] = _fmt(now)
            spec["leaseTransitions"] = (lease.spec.lease_transitions or 0) + 1
        body = {"metadata": {"name": LEASE_NAME, "resourceVersion": lease.metadata.resource_version}, "spec": spec}
        try:
            self.api.replace_namespaced_lease(LEASE_NAME, self.namespace, body)
            return True
        except ApiException as exc:
            if exc.status == 409:  # someone else renewed or took it between our read and write
                return False
            raise

    def acquire(self) -> None:
        """Block until this process holds the Lease, then keep renewing it in a thread."""
        announced = False
        while not self._stop.is_set():
            try:
                if self._try_acquire():
                    break
            except ApiException as exc:
                log.warning("leader election: %s %s", exc.status, exc.reason)
            if not announced:
                log.info("waiting to become leader (Lease %s/%s)", self.namespace, LEASE_NAME)
                announced = True
            self._stop.wait(2.0)
        log.info("became leader as %s", self.identity)
        threading.Thread(target=self._renew_loop, name="lease-renew", daemon=True).start()

    def _renew_loop(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.renew_every):
            try:
                if self._try_acquire():
                    last_ok = time.monotonic()
                    continue
                log.error("lost the leader Lease to another replica; stopping")
                self.on_lost()
                return
            except Exception as exc:  # network trouble: keep trying until the Lease would lapse
                log.warning("renewing the leader Lease failed: %s", exc)
            if time.monotonic() - last_ok > self.duration:
                log.error("could not renew the leader Lease for %ss; stopping", self.duration)
                self.on_lost()
                return

    def release(self) -> None:
        self._stop.set()
