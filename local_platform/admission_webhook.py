"""The certificate of the operator's admission webhook when the operator runs on this machine (`make run`, the
test fixtures, the benchmarks): a CA and a server certificate for 127.0.0.1 made with the `openssl` command,
in the folder layout the operator reads (`REPRISE_WEBHOOK_CERT_DIR`: ca.crt, tls.crt, tls.key), and the
ValidatingWebhookConfiguration the operator writes for itself (`REPRISE_WEBHOOK_CONFIGURATION`), which
whoever stops the operator removes.

In a cluster the chart makes the certificate instead (Helm's genCA/genSignedCert) and ships the configuration.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .errors import PlatformError

#: The ValidatingWebhookConfiguration an operator outside the cluster writes itself.
CONFIGURATION = "reprise.io"


def make_certificates(folder: Path, days: int = 30) -> Path:
    """ca.crt, tls.crt and tls.key in `folder` (made once, kept for restarts); returns the folder."""
    if (folder / "tls.crt").exists() and (folder / "tls.key").exists() and (folder / "ca.crt").exists():
        return folder
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PlatformError(
            "openssl not found on PATH: the operator's admission webhook needs a certificate "
            "(Debian: apt-get install openssl), or run it without one with REPRISE_WEBHOOK_PORT=0"
        )
    folder.mkdir(parents=True, exist_ok=True)
    steps = [
        # The CA the API server trusts (its caBundle).
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            str(days),
            "-subj",
            "/CN=reprise-local-webhook-ca",
        ]
        + ["-keyout", "ca.key", "-out", "ca.crt"],
        [
            openssl,
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "tls.key",
            "-out",
            "tls.csr",
        ],
        # The API server checks the address it dials against the IP SANs.
        [openssl, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"]
        + ["-days", str(days), "-out", "tls.crt", "-extfile", "san.ext"],
    ]
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for argv in steps:
        done = subprocess.run(argv, cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            raise PlatformError(f"making the webhook certificate failed: {done.stderr.strip()[-500:]}")
    return folder


def webhook_env(folder: Path, port: int) -> dict[str, str]:
    """The operator's settings for a webhook on 127.0.0.1:`port` that registers itself."""
    return {
        "REPRISE_WEBHOOK_PORT": str(port),
        "REPRISE_WEBHOOK_ADDRESS": "127.0.0.1",
        "REPRISE_WEBHOOK_CERT_DIR": str(make_certificates(folder)),
        "REPRISE_WEBHOOK_CONFIGURATION": CONFIGURATION,
    }


def _admission_api(kubeconfig: Path):  # noqa: ANN202 - the client's type, imported lazily (seconds of import)
    from kubernetes import client, config

    return client.AdmissionregistrationV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def registered(kubeconfig: Path, port: int) -> bool:
    """Whether the configuration the operator writes exists and sends requests to `port`."""
    from kubernetes.client.exceptions import ApiException

    api = _admission_api(kubeconfig)
    try:
        found = api.read_validating_webhook_configuration(CONFIGURATION)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    finally:
        api.api_client.close()
    return any(f":{port}/" in (w.client_config.url or "") for w in found.webhooks or [])


def remove_configuration(kubeconfig: Path) -> None:
    """Delete the configuration, so that a stopped operator (the webhook fails closed) blocks no later create."""
    from kubernetes.client.exceptions import ApiException

    api = _admission_api(kubeconfig)
    try:
        api.delete_validating_webhook_configuration(CONFIGURATION)
    except ApiException as exc:
        if exc.status != 404:
            raise
    finally:
        api.api_client.close()
