"""Rendering the chart with the real helm binary (built once into the cache by local_platform.toolchain)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "reprise"
RELEASE, NAMESPACE = "ship", "reprise-system"
#: What every install must give with the default `networkPolicy.enabled` (the chart fails without it): the API
#: server's and the brokers' addresses. Rendered first, so a test's own values win (`kafkaPeers: []` removes them).
SITE = {
    "networkPolicy": {
        "apiServerPeers": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
        "kafkaPeers": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kafka"}}}],
    }
}


class RenderError(AssertionError):
    """helm refused the values (schema, a `fail` in a template) or the templates are broken."""


@pytest.fixture(scope="session")
def helm() -> Path:
    from local_platform.toolchain import ensure_helm

    return ensure_helm()


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def render(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., list[dict[str, Any]]]:
    """`render({"operator": {"replicas": 2}})`: the documents `helm template` gives for these values, on top
    of the SITE values."""
    folder = tmp_path_factory.mktemp("values")
    site = folder / "site.yaml"
    site.write_text(yaml.safe_dump(SITE))
    count = 0

    def _render(values: dict[str, Any] | None = None, *extra: str) -> list[dict[str, Any]]:
        nonlocal count
        count += 1
        path = folder / f"values-{count}.yaml"
        path.write_text(yaml.safe_dump(values or {}))
        proc = run_helm(
            helm,
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--values",
            str(site),
            "--values",
            str(path),
            *extra,
        )
        if proc.returncode != 0:
            raise RenderError(proc.stderr.strip())
        return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]

    return _render


def find(
    docs: list[dict[str, Any]], kind: str, name: str | None = None, namespace: str | None = None
) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == kind
        and (name is None or d["metadata"]["name"] == name)
        and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name, namespace)
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[d['metadata']['name'] for d in found]}"
    return found[0]
