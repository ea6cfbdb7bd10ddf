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
from datetime import datetime, timedelta
from typing import Callable

from replay_worker.contract import parse_rfc3339, rfc3339_micros, utc_now

from .kube import ApiError, Kube, KubeUnavailable

log = logging.getLogger("reprise.leadership")

LEASE_NAME = "reprise-operator"


def lease_expired(renew_time: str | None, duration_seconds: int, now: datetime) -> bool:
    """Pure: whether a Lease last renewed at `renew_time` has lapsed at `now`."""
    if not renew_time:
        return True
    return now - parse_rfc3339(renew_time) > timedelta(seconds=duration_seconds)


class Leadership:
    """Decides who leads; every read and write of the Lease goes through `kube.Kube`."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        identity: str | None = None,
        duration_seconds: int = 15,
        renew_every: float = 5.0,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.duration = duration_seconds
        self.renew_every = renew_every
        self.on_lost = on_lost or (lambda: os._exit(1))
        self._stop = threading.Event()

    def _try_acquire(self) -> bool:
        now = utc_now()
        spec: dict[str, object] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "renewTime": rfc3339_micros(now),
        }
        lease = self.kube.get_lease(self.namespace, LEASE_NAME)
        if lease is None:
            spec.update(acquireTime=rfc3339_micros(now), leaseTransitions=0)
            return self.kube.create_lease(self.namespace, {"metadata": {"name": LEASE_NAME}, "spec": spec})
        held = lease.get("spec") or {}
        holder = held.get("holderIdentity")
        if holder != self.identity and not lease_expired(
            held.get("renewTime"), held.get("leaseDurationSeconds") or self.duration, now
        ):
            return False
        if holder != self.identity:
            spec["acquireTime"] = rfc3339_micros(now)
            spec["leaseTransitions"] = (held.get("leaseTransitions") or 0) + 1
        # The resourceVersion makes the write fail (409) when someone else renewed or took it since our read.
        meta = {"name": LEASE_NAME, "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")}
        return self.kube.replace_lease(self.namespace, LEASE_NAME, {"metadata": meta, "spec": spec})

    def acquire(self) -> None:
        """Block until this process holds the Lease, then keep renewing it in a thread."""
        announced = False
        while not self._stop.is_set():
            try:
                if self._try_acquire():
                    break
            except (KubeUnavailable, ApiError) as exc:
                log.warning("leader election: %s", exc)
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
