"""The validating admission webhook: a resource asks for nothing its creator could not do directly.

For every CREATE and UPDATE of Reconsume, Backfill and LakeReplay the API server sends an AdmissionReview
here; the rights the request implies (`implied_rights`) are put to the API server as SubjectAccessReviews in
the requesting user's name, and any one missing refuses the request with a message that names, for each, the
field, the right and the user. Thin: the rules are in `implied_rights`, the reviews in `kube`.

Served by every replica from the start, not only by the leader: Kopf's own admission machinery runs inside
`kopf.run`, which a standby replica never reaches while it waits for the Lease, and the Service in front of
the webhook sends requests to every ready replica. So Kopf's `WebhookServer` (HTTPS, and a restart when the
mounted certificate changes) runs here in a thread of its own, with `review` as its handler.

Fails closed: the webhook is registered with failurePolicy Fail, and a review that cannot be asked refuses.
Status writes go through the status subresource, which the webhook does not match.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
from pathlib import Path
from typing import Any

import kopf
from pydantic import ValidationError

from .api import GROUP, KINDS, VERSION
from .rules.implied_rights import Right, approval_rights, refusal, spec_changed, spec_rights
from .doors.kube import Kube, KubeUnavailable
from .shared.settings import OperatorSettings

log = logging.getLogger("reprise.admission")

#: The webhook's URL path, and its name in a configuration the operator writes itself.
PATH = "/rights"
WEBHOOK_NAME = "rights.reprise.io"

_SPECS = {kind.plural: kind.spec for kind in KINDS}


class Refused(Exception):
    """The request is refused; the message goes back to the requester through the API server."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def requested(plural: str, old: dict | None, new: dict) -> list[Right]:
    """What the request asks for: the spec's rights on a create or a spec change, and any approval it gives."""
    rights = []
    if spec_changed(old, new):
        try:
            spec = _SPECS[plural].model_validate(new.get("spec") or {})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise Refused(f"spec.{where}: {error['msg']}", 422) from None
        rights += spec_rights(spec)
    return rights + approval_rights(plural, old, new)


async def decide(kube: Kube, request: dict, approver_role: str) -> None:
    """Raise `Refused` unless the request's user holds every right the request implies."""
    plural = (request.get("resource") or {}).get("resource")
    if request.get("subResource") or plural not in _SPECS or request.get("operation") not in ("CREATE", "UPDATE"):
        return  # not ours to judge (the configuration does not send these)
    new, old = request.get("object") or {}, request.get("oldObject")
    namespace = request.get("namespace") or ""
    rights = requested(plural, old, new)
    if not rights:
        return
    user = dict(request.get("userInfo") or {})
    try:
        answers = await asyncio.gather(
            *(kube.aio.user_may(user, namespace, r.verb, r.group, r.resource, r.subresource, r.name) for r in rights)
        )
    except KubeUnavailable as exc:
        raise Refused(f"could not check the requester's rights, try again: {exc}", 503) from None
    # Every missing right at once: whoever fixes the request (or the roles) sees the whole list.
    username = user.get("username", "?")
    missing = [refusal(r, namespace, username, approver_role) for r, allowed in zip(rights, answers) if not allowed]
    if missing:
        message = "; ".join(missing)
        log.info("refused %s %s/%s: %s", plural, namespace, (new.get("metadata") or {}).get("name"), message)
        raise Refused(message, 403)


async def review(kube: Kube, admission_review: dict, approver_role: str) -> dict:
    """An AdmissionReview answered: allowed, or refused with the reason."""
    request = admission_review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    try:
        await decide(kube, request, approver_role)
    except Refused as exc:
        response = {**response, "allowed": False, "status": {"code": exc.code, "message": str(exc)}}
    except Exception as exc:  # fail closed, and say why (never a Secret value: none is read here)
        log.exception("admission review failed")
        response = {**response, "allowed": False, "status": {"code": 500, "message": f"admission failed: {exc}"}}
    return {
        "apiVersion": admission_review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


def configuration(name: str, client_config: dict, namespaces: tuple[str, ...]) -> dict:
    """The ValidatingWebhookConfiguration of an operator that registers itself (outside the cluster); the
    chart's template (templates/admission/) writes the same for a Service."""
    webhook: dict[str, Any] = {
        "name": WEBHOOK_NAME,
        "clientConfig": client_config,
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": [VERSION],
                "resources": sorted(_SPECS),
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1"],
    }
    if namespaces:
        webhook["namespaceSelector"] = {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]
        }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "reprise"}},
        "webhooks": [webhook],
    }


async def _serve(kube: Kube, settings: OperatorSettings, namespaces: tuple[str, ...]) -> None:
    certs = Path(settings.webhook_cert_dir or ".")
    ca = certs / "ca.crt"
    # No path on the server: it routes every POST to `handle` (Kopf's route is `<path>/<handler id>`).
    server = kopf.WebhookServer(
        addr=settings.webhook_address or None,
        port=settings.webhook_port,
        certfile=certs / "tls.crt",
        pkeyfile=certs / "tls.key",
        cafile=ca if ca.exists() else None,
    )

    async def handle(request: Any, **_: Any) -> Any:
        return await review(kube, request, settings.approver_role)

    async with server:
        async for client_config in server(handle):
            log.info("serving admission reviews at %s", client_config.get("url"))
            if settings.webhook_configuration:
                config = {
                    "url": (client_config.get("url") or "") + PATH,
                    "caBundle": client_config.get("caBundle") or "",
                }
                if not config["caBundle"]:
                    config["caBundle"] = base64.b64encode((certs / "tls.crt").read_bytes()).decode()
                body = configuration(settings.webhook_configuration, config, namespaces)
                await asyncio.to_thread(kube.put_validating_webhook_configuration, body)


def start(kube: Kube, settings: OperatorSettings, namespaces: tuple[str, ...]) -> threading.Thread:
    """Serve the webhook in a daemon thread with its own event loop, from now until the process ends."""

    def run() -> None:
        try:
            asyncio.run(_serve(kube, settings, namespaces))
        except Exception:
            log.exception("the admission webhook stopped; stopping the operator")
        # A replica that does not serve its webhook refuses every create (failurePolicy Fail) while looking
        # healthy: end the process so that Kubernetes restarts it, as a lost Lease does.
        os._exit(3)

    thread = threading.Thread(target=run, name="admission-webhook", daemon=True)
    thread.start()
    return thread
