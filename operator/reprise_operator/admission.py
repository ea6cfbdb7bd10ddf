"""The validating admission webhook: a resource asks for nothing its creator could not do directly.

For every CREATE and UPDATE of Reconsume, Backfill and LakeReplay the API server sends the request here; the
rights the request implies (`implied_rights`) are put to the API server as SubjectAccessReviews in the
requesting user's name, and any one missing refuses the request with a message that names, for each, the field,
the right and the user. Thin: the rules are in `implied_rights`, the reviews in `kube`.

Fails closed: the webhook is registered with failurePolicy Fail, and a review that cannot be asked refuses.
Status writes go through the status subresource, which the webhook does not match.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import kopf
from pydantic import ValidationError

from .api import GROUP, KINDS, VERSION
from .implied_rights import Right, approval_rights, refusal, spec_changed, spec_rights
from .kube import KubeUnavailable
from .runtime import Runtime
from .settings import OperatorSettings

log = logging.getLogger("reprise.admission")

#: The handler id, and so the webhook's URL path (`/rights`) and its name in a configuration Kopf manages.
WEBHOOK_ID = "rights"

_SPECS = {kind.plural: kind.spec for kind in KINDS}


def _requested(plural: str, old: dict | None, new: dict) -> list[Right]:
    rights = []
    if spec_changed(old, new):
        try:
            spec = _SPECS[plural].model_validate(new.get("spec") or {})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise kopf.AdmissionError(f"spec.{where}: {error['msg']}", code=422) from None
        rights += spec_rights(spec)
    return rights + approval_rights(plural, old, new)


def register(registry: kopf.OperatorRegistry, rt: Runtime) -> None:
    plurals = set(_SPECS)

    async def check(body: Any, userinfo: Any, resource: Any, **kwargs: Any) -> None:
        # Kopf passes `old` (None on CREATE) and `new` among its keyword arguments.
        old, new = kwargs.get("old"), kwargs.get("new")
        namespace = body["metadata"].get("namespace") or ""
        rights = _requested(resource.plural, dict(old) if old else None, dict(new) if new else dict(body))
        if not rights:
            return
        user = dict(userinfo)
        try:
            answers = await asyncio.gather(
                *(
                    rt.kube.aio.user_may(user, namespace, r.verb, r.group, r.resource, r.subresource, r.name)
                    for r in rights
                )
            )
        except KubeUnavailable as exc:
            raise kopf.AdmissionError(f"could not check the requester's rights, try again: {exc}", code=503) from None
        # Every missing right at once: whoever fixes the request (or the roles) sees the whole list.
        missing = [
            refusal(r, namespace, user.get("username", "?")) for r, allowed in zip(rights, answers) if not allowed
        ]
        if missing:
            message = "; ".join(missing)
            log.info("refused %s %s/%s: %s", resource.plural, namespace, body["metadata"].get("name"), message)
            raise kopf.AdmissionError(message, code=403)

    kopf.on.validate(
        lambda r: r.group == GROUP and r.version == VERSION and r.plural in plurals,
        id=WEBHOOK_ID,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )(check)


def configure(settings: kopf.OperatorSettings, operator: OperatorSettings) -> None:
    """Kopf's admission settings: an HTTPS server with the mounted certificate and, for an operator outside
    the cluster, a configuration Kopf writes (url clientConfig) and empties when it stops."""
    certs = Path(operator.webhook_cert_dir or ".")
    ca = certs / "ca.crt"
    settings.admission.server = kopf.WebhookServer(
        addr=operator.webhook_address or None,
        port=operator.webhook_port,
        certfile=certs / "tls.crt",
        pkeyfile=certs / "tls.key",
        cafile=ca if ca.exists() else None,
    )
    settings.admission.managed = operator.webhook_configuration
