"""Turns a pydantic model's JSON schema into a structural OpenAPI v3 schema the API server accepts.

Structural means: every node has a type, no $ref, no nullable unions, no `additionalProperties: false`.
Pydantic writes draft 2020-12 JSON Schema with `$defs`; this module inlines the definitions, collapses
`Optional[X]` (anyOf with null) into X, drops what Kubernetes does not take (`title`, `default: null`,
`propertyNames`), and keeps what it does (enum, pattern, bounds, defaults, format, `x-kubernetes-*`).
It refuses what it cannot translate faithfully rather than guessing.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from .common import IMMUTABLE_KEY, immutable_rule

#: Keys of JSON Schema that have no place in a CRD schema and carry nothing the API server would check.
_DROPPED = {"title", "examples", "propertyNames", "$schema"}
#: Keys we never expect from our models; reaching one means the model needs a different type.
_REFUSED = {"exclusiveMinimum", "exclusiveMaximum", "oneOf", "allOf", "not", "if", "then", "else", "$id"}
_VALIDATIONS = "x-kubernetes-validations"


class SchemaError(ValueError):
    """A model produced a schema that cannot become a structural CRD schema."""


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of `model`, with camelCase property names."""
    raw = model.model_json_schema(mode="validation", by_alias=True)
    definitions = raw.pop("$defs", {})
    return _convert(raw, definitions, model.__name__)


def _resolve(reference: str, definitions: dict[str, Any], where: str) -> dict[str, Any]:
    prefix = "#/$defs/"
    if not reference.startswith(prefix) or reference[len(prefix) :] not in definitions:
        raise SchemaError(f"{where}: cannot resolve {reference}")
    return definitions[reference[len(prefix) :]]


def _overlay(base: dict[str, Any], outer: dict[str, Any]) -> dict[str, Any]:
    """`outer`'s keys win (a field's description beats its type's docstring); CEL rules add up."""
    merged = dict(base)
    for key, value in outer.items():
        if key == _VALIDATIONS:
            merged[key] = list(base.get(key, [])) + list(value)
        else:
            merged[key] = value
    return merged


def _convert(node: dict[str, Any], definitions: dict[str, Any], where: str) -> dict[str, Any]:
    node = copy.deepcopy(node)
    for key in _DROPPED:
        node.pop(key, None)
    refused = _REFUSED.intersection(node)
    if refused:
        raise SchemaError(f"{where}: {sorted(refused)} cannot be expressed in a CRD schema; use ge/le and plain types")

    if "$ref" in node:
        target = _resolve(node.pop("$ref"), definitions, where)
        return _convert(_overlay(target, node), definitions, where)

    if "anyOf" in node:
        alternatives = node.pop("anyOf")
        non_null = [alt for alt in alternatives if alt.get("type") != "null"]
        if len(non_null) < len(alternatives):
            # Optional[X]: the API server drops nulls, and "absent" is how None is written.
            if node.get("default", "absent") is None:
                node.pop("default")
            if len(non_null) == 1:
                return _convert(_overlay(non_null[0], node), definitions, where)
        if not node.get("x-kubernetes-int-or-string"):
            raise SchemaError(f"{where}: a union is only allowed as int-or-string")
        node["anyOf"] = [_convert(alt, definitions, where) for alt in non_null]

    if IMMUTABLE_KEY in node:
        node[_VALIDATIONS] = list(node.get(_VALIDATIONS, [])) + [immutable_rule(node.pop(IMMUTABLE_KEY))]
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node.get("default", "absent") is None:
        node.pop("default")

    if node.get("x-kubernetes-preserve-unknown-fields"):
        node.pop("additionalProperties", None)
    elif node.get("additionalProperties") is False or node.get("additionalProperties") is True:
        # `false` is pydantic's extra="forbid" (the API server prunes unknown fields instead);
        # `true` would be an untyped map, which a structural schema cannot hold.
        if node.get("additionalProperties") is True and "properties" not in node:
            raise SchemaError(f"{where}: untyped map; give the values a type or use FreeformObject")
        node.pop("additionalProperties")

    if "properties" in node:
        node["properties"] = {
            name: _convert(sub, definitions, f"{where}.{name}") for name, sub in node["properties"].items()
        }
        if not node.get("required"):
            node.pop("required", None)
    if "items" in node:
        node["items"] = _convert(node["items"], definitions, f"{where}[]")
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _convert(node["additionalProperties"], definitions, f"{where}{{}}")

    if "type" not in node and not node.get("x-kubernetes-int-or-string"):
        raise SchemaError(f"{where}: no type")
    return node


def walk(schema: dict[str, Any], path: str = ""):
    """Yield (path, node) for every node of a converted schema: properties, list items, map values."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")
