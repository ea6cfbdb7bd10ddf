"""Fixtures of the API tests: the generated CRDs installed on the real API server, and one namespace
shared by the tests that only dry-run (creating a namespace per table row would be slow for nothing)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from reprise_operator.api import KINDS
from tests.fixtures.kube import wait_for

CRDS = Path(__file__).resolve().parents[3] / "crds"


@pytest.fixture(scope="session")
def reprise_crds(kube) -> list[str]:
    """Apply crds/ (as committed) and wait until the API server serves the three kinds."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    names = [kind.crd_name for kind in KINDS]

    def established() -> bool:
        # Polled rather than `kubectl wait`, which errors out on a CRD that has no status yet.
        for name in names:
            conditions = kubectl_json(kube, "get", "crd", name).get("status", {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_for(established, 60, "the Reprise CRDs to be Established")
    return names


@pytest.fixture(scope="module", autouse=True)
def without_the_operator(operator) -> Iterator[None]:
    """These tests check the API server's own answers (admission, defaults, round trips, updates): an
    operator reconciling the same objects would add status and change them underneath. The session's
    operator, whichever test file on this worker started it, is stopped for the module."""
    operator.stop()
    try:
        yield
    finally:
        operator.start()


@pytest.fixture(scope="module")
def shared_namespace(kube, reprise_crds) -> Iterator[str]:
    name = f"api-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kube.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def kubectl_json(kube, *args: str) -> Any:
    return json.loads(kube.kubectl(*args, "-o", "json").stdout)
