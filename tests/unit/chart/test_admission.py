"""The chart's admission webhook as rendered: the configuration the API server calls, its certificate, and
the operator settings that serve it (operator/reprise_operator/admission.py)."""

from __future__ import annotations

import base64
import subprocess

from reprise_operator.api import KINDS

from .conftest import NAMESPACE, find, one
from .test_render import FULLNAME, operator_container, settings_of


def webhook(docs: list[dict]) -> dict:
    (hook,) = one(docs, "ValidatingWebhookConfiguration", FULLNAME)["webhooks"]
    return hook


def certificate_text(secret: dict) -> str:
    pem = base64.b64decode(secret["data"]["tls.crt"])
    return subprocess.run(
        ["openssl", "x509", "-noout", "-text"], input=pem, capture_output=True, check=True
    ).stdout.decode()


def test_the_webhook_checks_every_create_and_update_of_the_three_kinds_and_fails_closed(render) -> None:
    hook = webhook(render())
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    (rule,) = hook["rules"]
    assert rule["apiGroups"] == ["reprise.io"] and rule["operations"] == ["CREATE", "UPDATE"]
    assert sorted(rule["resources"]) == sorted(kind.plural for kind in KINDS), "not the status subresource"
    assert hook["clientConfig"]["service"] == {
        "name": f"{FULLNAME}-webhook",
        "namespace": NAMESPACE,
        "path": "/rights",
        "port": 443,
    }
    assert "namespaceSelector" not in hook, "the whole cluster, as the operator watches it"


def test_the_ca_bundle_is_the_ca_of_the_served_certificate_for_the_service_name(render) -> None:
    docs = render()
    secret = one(docs, "Secret", f"{FULLNAME}-webhook-tls")
    assert webhook(docs)["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    text = certificate_text(secret)
    assert f"DNS:{FULLNAME}-webhook.{NAMESPACE}.svc" in text
    ca = base64.b64decode(secret["data"]["ca.crt"])
    leaf = base64.b64decode(secret["data"]["tls.crt"])
    with_ca = subprocess.run(
        ["bash", "-c", 'openssl verify -CAfile <(printf "%s" "$CA") <(printf "%s" "$LEAF")'],
        env={"CA": ca.decode(), "LEAF": leaf.decode(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert with_ca.returncode == 0, with_ca.stderr


def test_the_operator_serves_it_from_the_mounted_secret(render) -> None:
    docs = render()
    container = operator_container(docs)
    settings = settings_of(container)
    assert settings.webhook_port == 9443 and settings.webhook_configuration is None, "the chart ships it"
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "webhook-tls")
    assert settings.webhook_cert_dir == mount["mountPath"]
    pod = one(docs, "Deployment", FULLNAME)["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == f"{FULLNAME}-webhook-tls"
    assert settings.approver_role == f"{FULLNAME}-approver"


def test_watched_namespaces_narrow_the_webhook_and_a_url_replaces_the_service(render) -> None:
    docs = render({"watchNamespaces": ["team-a", "team-b"], "admission": {"url": "https://127.0.0.1:18443"}})
    hook = webhook(docs)
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
    ]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:18443/rights"
    assert "service" not in hook["clientConfig"]
    assert "IP Address:127.0.0.1" in certificate_text(one(docs, "Secret", f"{FULLNAME}-webhook-tls"))


def test_turned_off_there_is_no_webhook_and_no_port(render) -> None:
    docs = render({"admission": {"enabled": False}})
    assert not find(docs, "ValidatingWebhookConfiguration") and not find(docs, "Secret")
    container = operator_container(docs)
    assert settings_of(container).webhook_port == 0
    assert [p["name"] for p in container["ports"]] == ["metrics"]
