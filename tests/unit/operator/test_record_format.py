"""A resource's record format and schema registry, in the worker's terms: the published filter names the
values' format and the registry, and the registry's credentials reach the pods only as Secret references."""

from __future__ import annotations

from reprise_operator.api.common import Filter, RecordFormat, SchemaRegistryConnection, SecretReference
from reprise_operator.core.standby import registry_credentials_env
from reprise_operator.kinds.reconsume.rules import worker_filter

REGISTRY = SchemaRegistryConnection(url="http://registry.kafka:8081", credentials_secret=SecretReference(name="sr"))


def test_an_avro_filter_publishes_its_format_and_registry() -> None:
    api_filter = Filter.model_validate({"jsonFields": [{"path": "region", "values": ["eu"]}]})
    spec = worker_filter(api_filter, RecordFormat.model_validate({"value": "avro"}), REGISTRY)
    assert spec.to_obj(inline_keys=True) == {
        "json": [{"path": "region", "equals": "eu"}],
        "valueFormat": "avro",
        "registry": "http://registry.kafka:8081",
    }


def test_a_json_filter_publishes_what_older_guards_read() -> None:
    api_filter = Filter.model_validate({"jsonFields": [{"path": "region", "values": ["eu"]}]})
    published = worker_filter(api_filter, RecordFormat(), None).to_obj(inline_keys=True)
    assert "valueFormat" not in published and "registry" not in published


def test_no_filter_over_avro_values_still_names_the_format() -> None:
    spec = worker_filter(None, RecordFormat.model_validate({"value": "protobuf"}), REGISTRY)
    assert (spec.value_format, spec.registry, spec.json_matches) == ("protobuf", REGISTRY.url, ())


def test_registry_credentials_are_secret_references_not_values() -> None:
    env = registry_credentials_env("sr")
    assert [e["name"] for e in env] == ["REPRISE_SCHEMA_REGISTRY_USERNAME", "REPRISE_SCHEMA_REGISTRY_PASSWORD"]
    assert all("value" not in e and e["valueFrom"]["secretKeyRef"]["name"] == "sr" for e in env)
    assert [e["valueFrom"]["secretKeyRef"]["key"] for e in env] == ["username", "password"]
    assert registry_credentials_env(None) == []
