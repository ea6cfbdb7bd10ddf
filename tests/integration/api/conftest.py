"""Fixtures of the API tests: the session operator stopped for the module, and one namespace shared by the
tests that only dry-run (creating a namespace per table row would be slow for nothing). The CRDs come from
the shared `reprise_crds` fixture (tests/fixtures/operator.py)."""

from __future__ import annotations

import json
import uuid
from typing import Any, Iterator

import pytest


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
