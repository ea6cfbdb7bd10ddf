"""The Python reference passes schema_filters.json, read from the committed file as a port reads it: the
schemas inline (no registry), `registry: unreachable` as a source whose every request fails."""

from __future__ import annotations

from typing import Any

import pytest

from replay_worker.protocol.filters import FilterSpecError, SchemaUnavailable, Undecodable, published_filter
from replay_worker.protocol.record_values import InlineSchemas, Schema

from .vectors import headers, ids, load, raw

VECTORS = load("schema_filters.json")
SCHEMAS = {int(i): Schema(s["schemaType"], s["schema"]) for i, s in VECTORS["schemas"].items()}


@pytest.mark.parametrize("case", VECTORS["cases"], ids=ids(VECTORS["cases"]))
def test_schema_filter_case(case: dict[str, Any]) -> None:
    schemas = InlineSchemas(SCHEMAS, unreachable=case["registry"] == "unreachable")
    matcher = published_filter(case["filter"], schemas)
    try:
        matched = matcher.matches(raw(case["key"]), headers(case["headers"]), raw(case["value"]))
        result = "match" if matched else "no-match"
    except Undecodable:
        result = "undecodable"
    except SchemaUnavailable:
        result = "wait"
    assert result == case["result"]


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=ids(VECTORS["invalid"]))
def test_invalid_schema_filter_case(case: dict[str, Any]) -> None:
    with pytest.raises(FilterSpecError) as caught:
        published_filter(case["filter"], InlineSchemas(SCHEMAS))
    assert {"code": caught.value.code, "field": caught.value.field} == case["error"]


def test_every_outcome_is_covered() -> None:
    # The file is only a test of a port if it holds every answer, the wait included.
    assert {c["result"] for c in VECTORS["cases"]} == {"match", "no-match", "undecodable", "wait"}
