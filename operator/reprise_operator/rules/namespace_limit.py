"""The chart's limits on active resources, per namespace and in total: may this resource start planning now?

A resource is *active* from its admission to planning until it is finished (Complete or Failed) or deleted,
whatever its kind: in Planning, PlanReady, Running, Suspended and Draining.
- From planning, not from start: planning is where a resource first costs the shared operator (a Kafka
  connection, threads, calls of up to 15 s against brokers that do not answer). A tenant's flood of resources
  naming unreachable clusters never gets past planning (security review H4), so a gate at start would not
  hold it.
- PlanReady and Suspended count: a plan awaiting approval, or a suspended replay, moves on without passing
  the gate again, and holds its place (a replay group, a Deployment scaled to zero) meanwhile.
A resource over a limit stays Pending with the Waiting condition's reason `NamespaceLimit`, and is admitted
at a later poll once a slot frees. An admitted resource is never parked again: after a restart, or with a
lower limit, those already active keep running, and only new ones wait.

The operator learns which resources are active from their status before any of its handlers run (a Kopf
index fed from the initial listing, `observe`), and admits under one lock, so two resources cannot take the
last slot together. Pure bookkeeping; the reconcile turns a refusal into the condition.
"""

from __future__ import annotations

import threading

#: Phases of an admitted, unfinished resource (api.common.Phase values).
ACTIVE_PHASES = frozenset({"Planning", "PlanReady", "Running", "Suspended", "Draining"})
FINISHED_PHASES = frozenset({"Complete", "Failed"})

PER_NAMESPACE_VALUE = "limits.maxActivePerNamespace"
TOTAL_VALUE = "limits.maxActive"


def refusal(namespace: str, in_namespace: int, in_total: int, per_namespace: int, total: int) -> str | None:
    """Why one more resource of `namespace` may not become active, given the active counts; None when it
    may. A limit of 0 is no limit."""
    if per_namespace and in_namespace >= per_namespace:
        return (
            f"namespace {namespace} already has {in_namespace} active Reprise resources, its limit (the chart's "
            f"{PER_NAMESPACE_VALUE}={per_namespace}); this one starts planning when one of them finishes or is deleted"
        )
    if total and in_total >= total:
        return (
            f"the operator already has {in_total} active Reprise resources, its limit (the chart's "
            f"{TOTAL_VALUE}={total}); this one starts planning when one of them finishes or is deleted"
        )
    return None


class ActiveResources:
    """Which resources are active (by uid, with their namespace), and the admission of new ones."""

    def __init__(self, per_namespace: int, total: int) -> None:
        self.per_namespace = per_namespace
        self.total = total
        self._active: dict[str, str] = {}
        self._lock = threading.Lock()

    def observe(self, uid: str, namespace: str, phase: str | None) -> None:
        """What a resource's status says: active phases count as admitted, finished ones free the slot; Pending
        changes nothing (it may be admitted already, with Planning not yet written)."""
        with self._lock:
            if phase in ACTIVE_PHASES:
                self._active[uid] = namespace
            elif phase in FINISHED_PHASES:
                self._active.pop(uid, None)

    def admit(self, uid: str, namespace: str) -> str | None:
        """Count the resource as active if the limits allow; None when it is (or already was), else why not."""
        with self._lock:
            if uid in self._active:
                return None
            in_namespace = sum(1 for ns in self._active.values() if ns == namespace)
            refused = refusal(namespace, in_namespace, len(self._active), self.per_namespace, self.total)
            if refused is None:
                self._active[uid] = namespace
            return refused

    def release(self, uid: str) -> None:
        """The resource finished or is gone: its slot frees."""
        with self._lock:
            self._active.pop(uid, None)

    def count(self, namespace: str | None = None) -> int:
        with self._lock:
            if namespace is None:
                return len(self._active)
            return sum(1 for ns in self._active.values() if ns == namespace)
