"""How the plugin words an API server's refusal."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from kubectl_reprise.connection import explain


def refusal(status: int, message: str) -> ApiException:
    exc = ApiException(status=status, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def test_the_webhooks_refusal_of_an_approval_is_shown_as_it_is() -> None:
    message = (
        'admission webhook "rights.reprise.io" denied the request: metadata.annotations["reprise.io/approve"] '
        'needs "approve reconsumes.reprise.io/r" in namespace a, which user carol may not do '
        "(the verb approve is granted by the ClusterRole reprise-approver)"
    )
    said = str(explain(refusal(403, message), "approving reconsume/r"))
    assert said == f"approving reconsume/r: {message}"


def test_an_rbac_refusal_still_says_what_to_ask_for() -> None:
    said = str(explain(refusal(403, 'reconsumes.reprise.io "r" is forbidden: User "x" cannot patch'), "approving r"))
    assert said == "approving r: forbidden for this user; ask for RBAC on reprise.io resources"
