"""The Kopf handlers: thin functions that hand each trigger of every kind in `KINDS` to the lifecycle driver.

Triggers, for every kind:
- create and resume: reconcile at once (a new replay gets its plan and its consumers without waiting);
- a watch event that changed what a person controls (`spec.suspend`, `spec.approval`, the approve
  annotation): reconcile at once;
- a timer every `poll_interval`: follow Kafka and the handover state, looking again every `SOON_LOOK_S` while a
  replay is about to move on (`progress.looks_soon`);
- delete: the finalizer cleans up everything Reprise made before the resource goes.

The timer interval comes from the settings, so the handlers are registered by `register()` at start
rather than by decorators at import time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from .shared import metrics
from .api import GROUP, VERSION
from .api.verify import CUTOVER_ANNOTATION, REVERIFY_ANNOTATION
from .shared.constants import APPROVE_ANNOTATION, FINALIZER
from .core.cutover import keeps_children
from .core.driver import KindLifecycle, transition
from .kinds.lifecycles import KINDS
from .shared.kafka_pool import on_behalf_of
from .core.lifecycle import FINISHED, TEMPORARY, WAITS, Resource, memory_of, retry_delay, run_reconcile
from .core.runtime import Runtime

log = logging.getLogger("reprise.handlers")

#: Seconds between two attempts of a cleanup that waits (pods stopping, the live side acknowledging).
CLEANUP_WAIT = 2.0

#: Seconds between two looks at a resource that expects to move on before its next poll (`memory.soon`).
SOON_LOOK_S = 0.5
#: Seconds between two looks while only the live side's acknowledgements are awaited (`memory.settling`): they
#: come within a second of the last handover offset, and the look after the last one moves the replay on.
SETTLE_LOOK_S = 0.1
#: Poll intervals one timer call keeps looking soon at most. The rules of `progress.looks_soon` span up to three
#: (the first interval of a replay, then an ETA within two): a timer call that stopped after one left a replay
#: whose end was due to the next poll, a whole interval after the call (the timer is not sharp).
SOON_LOOKS_FOR = 3


def _controls(body: Any) -> tuple:
    spec = body.get("spec") or {}
    annotations = body["metadata"].get("annotations") or {}
    return (
        spec.get("suspend"),
        spec.get("approval"),
        annotations.get(APPROVE_ANNOTATION),
        annotations.get(CUTOVER_ANNOTATION),
        annotations.get(REVERIFY_ANNOTATION),
    )


def register_kind(registry: kopf.OperatorRegistry, rt: Runtime, lifecycle: KindLifecycle) -> None:
    kind, plural = lifecycle.kind, lifecycle.plural

    async def step(resource: Resource, memory: Any) -> None:
        await transition(lifecycle, resource, memory)

    async def reconcile(body: Any, memo: Any, **_: Any) -> None:
        memory_of(memo).extra["controls"] = _controls(body)
        await run_reconcile(kind, plural, rt, body, memo, step)

    async def poll(body: Any, memo: Any, stopped: Any = None, **_: Any) -> None:
        # Only the timer waits out a failure's backoff; a person's change (create, resume, event) is acted on at once.
        memory = memory_of(memo)
        memory.extra["controls"] = _controls(body)
        await run_reconcile(kind, plural, rt, body, memo, step, backoff=True)
        # A resource about to move on (its last records due, acknowledgements awaited) is looked at again every
        # SOON_LOOK_S for up to SOON_LOOKS_FOR poll intervals: waiting out the interval was most of the time from
        # a replay's last record to Complete (benchmarks/end_to_end). The lock is released in between, so a
        # person's change is not held up.
        loop = asyncio.get_running_loop()
        until = loop.time() + SOON_LOOKS_FOR * rt.settings.poll_interval
        while memory.soon and loop.time() < until and not stopped:
            await asyncio.sleep(SETTLE_LOOK_S if memory.settling else SOON_LOOK_S)
            await run_reconcile(kind, plural, rt, body, memo, step, backoff=True)

    async def on_event(body: Any, memo: Any, type: str | None = None, **_: Any) -> None:
        if type not in ("ADDED", "MODIFIED") or body["metadata"].get("deletionTimestamp"):
            return
        memory = memory_of(memo)
        if "controls" in memory.extra and memory.extra["controls"] != _controls(body):
            await reconcile(body=body, memo=memo)

    async def on_delete(body: Any, memo: Any, **_: Any) -> None:
        # The cleanup waits here until it is done rather than raising kopf.TemporaryError: Kopf logs every
        # temporary error at ERROR, and waiting for pods to stop or for the live side to acknowledge is
        # routine (INFO). Transient failures (Kafka or the API unreachable) back off and log a WARNING.
        memory = memory_of(memo)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        said, failures = "", 0
        with on_behalf_of(namespace):  # the cleanup's Kafka calls take this namespace's share of the pool
            while True:
                async with memory.lock:
                    status = dict(memory.status if memory.status is not None else body.get("status") or {})
                    resource = Resource(kind, plural, body, status, rt)
                    if resource.phase in FINISHED and not keeps_children(resource):
                        break
                    try:
                        await lifecycle.cleanup(resource, memory)
                        break
                    except WAITS as exc:
                        failures, delay = 0, CLEANUP_WAIT
                        if str(exc) != said:
                            log.info("%s %s/%s: cleanup waits: %s", kind, namespace, name, exc)
                        said = str(exc)
                    except TEMPORARY as exc:
                        failures += 1
                        delay = retry_delay(failures, CLEANUP_WAIT)
                        if str(exc) != said:
                            log.warning("%s %s/%s: cleanup retries in %.0fs: %s", kind, namespace, name, delay, exc)
                        said = str(exc)
                await asyncio.sleep(delay)
        metrics.PHASES.forget(kind, namespace, name)
        rt.active.release(body["metadata"]["uid"])

    async def observe(body: Any, **_: Any) -> None:
        # A Kopf index that keeps nothing: it sees every object's status before any handler runs (at start,
        # from the initial listing), so the limits count the resources already active before admitting more.
        meta = body["metadata"]
        rt.active.observe(meta["uid"], meta["namespace"], (body.get("status") or {}).get("phase"))
        return None

    resource = (GROUP, VERSION, plural)
    kopf.on.create(*resource, registry=registry, id=f"{plural}-create")(reconcile)
    kopf.on.resume(*resource, registry=registry, id=f"{plural}-resume")(reconcile)
    kopf.on.event(*resource, registry=registry, id=f"{plural}-event")(on_event)
    kopf.timer(*resource, registry=registry, id=f"{plural}-poll", interval=rt.settings.poll_interval, sharp=False)(poll)
    kopf.on.delete(*resource, registry=registry, id=f"{plural}-cleanup")(on_delete)
    kopf.index(*resource, registry=registry, id=f"{plural}-active")(observe)


def register(registry: kopf.OperatorRegistry, rt: Runtime) -> None:
    for lifecycle in KINDS:
        register_kind(registry, rt, lifecycle)


def configure(settings: kopf.OperatorSettings) -> None:
    """Kopf's own settings: our finalizer name, bookkeeping in annotations, Events from INFO up."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="reprise.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="reprise.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 120
    settings.watching.client_timeout = 150
    settings.networking.request_timeout = 60
    settings.execution.max_workers = 64
