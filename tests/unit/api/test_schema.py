"""The generated OpenAPI schemas: structural, described, bounded for CEL, and in line with the models."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from reprise_operator.api import KINDS
from reprise_operator.api.common import KindDefinition
from reprise_operator.api.generate import crd
from reprise_operator.api.openapi import SchemaError, structural_schema, walk

from pydantic import BaseModel, Field

from tests.integration.api.invalid_cases import EXAMPLES


def root_schema(kind: KindDefinition) -> dict[str, Any]:
    return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.fixture(params=KINDS, ids=lambda k: k.kind)
def kind(request) -> KindDefinition:
    return request.param


def test_every_field_has_a_description(kind: KindDefinition) -> None:
    missing = [
        path
        for path, node in walk(root_schema(kind))
        # metadata is ObjectMeta, described by the API server; the API server forbids more than a type here.
        if path != "metadata" and not path.endswith(("[]", "{}")) and not node.get("description", "").strip()
    ]
    assert missing == [], f"{kind.kind}: fields without a description: {missing}"


def test_schema_is_structural(kind: KindDefinition) -> None:
    for path, node in walk(root_schema(kind)):
        assert "$ref" not in node and "title" not in node and "allOf" not in node, path
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path}: no type"
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), f"{path}: a union that is not int-or-string"
        assert node.get("additionalProperties") not in (True, False), path
        assert node.get("default", "set") is not None, f"{path}: default null"
        if "properties" in node:
            assert set(node.get("required", [])) <= set(node["properties"]), path


def test_status_is_schema_checked(kind: KindDefinition) -> None:
    status = root_schema(kind)["properties"]["status"]
    assert not status.get("x-kubernetes-preserve-unknown-fields")
    free = [path for path, node in walk(status, "status") if node.get("x-kubernetes-preserve-unknown-fields")]
    assert free == ["status.kopf"], "only Kopf's own bookkeeping may be free-form in status"
    props = status["properties"]
    for name in (
        "phase",
        "observedGeneration",
        "conditions",
        "children",
        "plan",
        "progress",
        "startedAt",
        "completedAt",
    ):
        assert name in props, f"{kind.kind} status lacks {name}"
    assert props["phase"]["enum"] == [
        "Pending",
        "Planning",
        "PlanReady",
        "Running",
        "Suspended",
        "Draining",
        "Complete",
        "Failed",
    ]
    condition = props["conditions"]["items"]
    assert set(condition["required"]) == {"type", "status", "reason", "lastTransitionTime"}
    assert condition["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert condition["properties"]["lastTransitionTime"]["format"] == "date-time"
    assert props["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_strings_and_lists_in_spec_are_bounded_for_cel_cost(kind: KindDefinition) -> None:
    """CEL rules are admitted only when their worst-case cost is bounded, which needs these limits."""
    spec = root_schema(kind)["properties"]["spec"]
    unbounded = []
    for path, node in walk(spec, "spec"):
        if node.get("type") == "string" and not ({"maxLength", "enum", "format"} & set(node)):
            unbounded.append(path)
        if node.get("type") == "array" and "maxItems" not in node:
            unbounded.append(path)
        if node.get("type") == "object" and "additionalProperties" in node and "maxProperties" not in node:
            unbounded.append(path)
    assert unbounded == [], f"{kind.kind}: unbounded fields: {unbounded}"


def test_every_rule_message_names_a_field(kind: KindDefinition) -> None:
    for path, node in walk(root_schema(kind)):
        for entry in node.get("x-kubernetes-validations", []):
            message = entry["message"]
            leaf = node.get("type") == "string"  # the API server prefixes the leaf's path itself
            assert leaf or "spec." in message or "metadata." in message or "consumer" in message, (path, message)


def test_replay_defining_fields_are_immutable_and_lifecycle_fields_are_not() -> None:
    immutable = {
        "Reconsume": {"topics", "consumerGroup", "mode", "start", "filter", "liveDeployment", "replayGroup"},
        "Backfill": {"topic", "keys", "keysFrom", "source"},
        "LakeReplay": {"source", "backfillTopic", "drainGroup", "then"},
    }
    mutable = {"suspend", "approval", "cleanup", "completion", "consumer", "downstreamGroups", "barrier", "spark"}
    for kind in KINDS:
        props = root_schema(kind)["properties"]["spec"]["properties"]
        for name, node in props.items():
            rules = [r["rule"] for r in node.get("x-kubernetes-validations", [])]
            if name in immutable[kind.kind]:
                assert "self == oldSelf" in rules, f"{kind.kind}.spec.{name} should be immutable"
            elif name in mutable:
                assert "self == oldSelf" not in rules, f"{kind.kind}.spec.{name} should stay mutable"
        assert "self == oldSelf" in [
            r["rule"] for r in props["kafka"]["properties"]["bootstrapServers"]["x-kubernetes-validations"]
        ]


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: a missing property with a default gets it (then
    its own defaults), recursively into present objects, list items and map values."""
    value = copy.deepcopy(value)
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        value = {k: apply_defaults(schema["additionalProperties"], v) for k, v in value.items()}
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value = [apply_defaults(schema["items"], v) for v in value]
    return value


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_schema_defaults_are_the_model_defaults(example) -> None:
    """The API server's defaulting and pydantic's must agree, or the operator and kubectl see different
    objects (and a round trip through the API server changes it)."""
    document = yaml.safe_load(example.read_text())
    kind = next(k for k in KINDS if k.kind == document["kind"])
    spec_schema = root_schema(kind)["properties"]["spec"]
    assert apply_defaults(spec_schema, document["spec"]) == kind.spec.model_validate(document["spec"]).dump()


def test_printer_columns_point_at_fields(kind: KindDefinition) -> None:
    root = root_schema(kind)
    paths = {f".{p}" for p, _ in walk(root)}
    for column in kind.printer_columns:
        if column.json_path == ".metadata.creationTimestamp":
            continue
        assert column.json_path in paths, f"{kind.kind} column {column.name}: {column.json_path} is not in the schema"


def test_converter_refuses_what_it_cannot_express() -> None:
    class Exclusive(BaseModel):
        count: int = Field(gt=0, description="x")

    class Untyped(BaseModel):
        value: Any = Field(description="x")

    with pytest.raises(SchemaError, match="exclusiveMinimum"):
        structural_schema(Exclusive)
    with pytest.raises(SchemaError, match="no type"):
        structural_schema(Untyped)
