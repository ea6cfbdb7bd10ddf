"""The webhook's settings and the configuration an operator outside the cluster writes for itself."""

from __future__ import annotations

import pytest

from reprise_operator.admission import WEBHOOK_NAME, configuration
from reprise_operator.api import KINDS
from reprise_operator.shared.settings import OperatorSettings, SettingsError


def test_no_port_no_webhook() -> None:
    assert OperatorSettings.from_env({}).webhook_port == 0


def test_a_port_needs_the_certificate_folder_and_says_so() -> None:
    with pytest.raises(SettingsError, match="REPRISE_WEBHOOK_CERT_DIR is required with REPRISE_WEBHOOK_PORT"):
        OperatorSettings.from_env({"REPRISE_WEBHOOK_PORT": "9443"})
    with pytest.raises(SettingsError, match="REPRISE_WEBHOOK_PORT"):
        OperatorSettings.from_env({"REPRISE_WEBHOOK_PORT": "70000", "REPRISE_WEBHOOK_CERT_DIR": "/tls"})


def test_the_settings_read() -> None:
    settings = OperatorSettings.from_env(
        {
            "REPRISE_WEBHOOK_PORT": "9443",
            "REPRISE_WEBHOOK_CERT_DIR": "/tls",
            "REPRISE_WEBHOOK_ADDRESS": "127.0.0.1",
            "REPRISE_WEBHOOK_CONFIGURATION": "reprise.io",
            "REPRISE_APPROVER_ROLE": "ship-reprise-approver",
        }
    )
    assert (settings.webhook_port, settings.webhook_cert_dir, settings.webhook_address) == (9443, "/tls", "127.0.0.1")
    assert settings.webhook_configuration == "reprise.io"
    assert settings.approver_role == "ship-reprise-approver"


def test_the_own_configuration_fails_closed_on_creates_and_updates_of_the_kinds_only() -> None:
    body = configuration("reprise.io", {"url": "https://127.0.0.1:1/rights", "caBundle": "Q0E="}, ("team-a",))
    (hook,) = body["webhooks"]
    assert hook["name"] == WEBHOOK_NAME and hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    (rule,) = hook["rules"]
    assert sorted(rule["resources"]) == sorted(k.plural for k in KINDS)
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a"]
    assert "namespaceSelector" not in configuration("x", {"url": "u"}, ())["webhooks"][0]
