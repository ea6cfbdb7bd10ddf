"""The local platform's schema registry, for real: it starts, answers the Confluent-compatible API with
BACKWARD compatibility (an incompatible version is refused), and the worker's registry client reads schemas
by id through its cache, telling an unknown id (a decision) from a registry that is down (a wait)."""

from __future__ import annotations

import json

import pytest

from local_platform.errors import PlatformError
from local_platform.schema_registry import SchemaRegistry
from replay_worker.connection.schema_registry import RegistrySchemas
from replay_worker.protocol.record_values import SchemaUnavailable

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "region", "type": ["null", "string"], "default": None}],
}
BREAKING = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}


def test_compatibility_is_backward(schema_registry: SchemaRegistry) -> None:
    assert schema_registry.request("GET", "/config")["compatibilityLevel"] == "BACKWARD"


def test_a_compatible_version_registers_and_a_breaking_one_is_refused(schema_registry: SchemaRegistry) -> None:
    subject = "platform-orders-value"
    first = schema_registry.register(subject, json.dumps(V1))
    second = schema_registry.register(subject, json.dumps(V2))
    assert first != second
    with pytest.raises(PlatformError, match="409"):
        schema_registry.register(subject, json.dumps(BREAKING))
    schema_registry.request("DELETE", f"/subjects/{subject}")


def test_the_worker_client_reads_by_id_once_and_knows_an_unknown_id(schema_registry: SchemaRegistry) -> None:
    schema_id = schema_registry.register("platform-client-value", json.dumps(V2))
    client = RegistrySchemas(schema_registry.url)
    schema = client.schema(schema_id)
    assert schema is not None and schema.schema_type == "AVRO" and json.loads(schema.text)["name"] == "Order"
    assert client.schema(schema_id) == schema
    assert client.requests == 1  # the second read came from the cache
    assert client.schema(987654) is None  # unknown: a decision (the record is undecodable)
    schema_registry.request("DELETE", "/subjects/platform-client-value")


def test_a_registry_nobody_listens_on_is_a_wait_not_a_decision() -> None:
    from local_platform.processes import free_port

    client = RegistrySchemas(f"http://127.0.0.1:{free_port()}/apis/ccompat/v7")
    with pytest.raises(SchemaUnavailable, match="cannot be reached"):
        client.schema(1)


def test_protobuf_schemas_read_as_descriptors_whether_registered_as_text_or_serialized(
    schema_registry: SchemaRegistry,
) -> None:
    from replay_worker.conformance.schema_filter_cases import PROTO_TEXT
    from replay_worker.protocol.record_values import InlineSchemas, ValueReader, encode_protobuf

    as_text = schema_registry.register(
        "platform-proto-text-value",
        'syntax = "proto3";\npackage shop;\nmessage Envelope { string source = 1; }\n'
        "message Order { int64 id = 1; string region = 4; }\n",
        "PROTOBUF",
    )
    as_descriptor = schema_registry.register("platform-proto-fdp-value", PROTO_TEXT, "PROTOBUF")
    client = RegistrySchemas(schema_registry.url)
    for schema_id in (as_text, as_descriptor):
        schema = client.schema(schema_id)
        assert schema is not None and schema.schema_type == "PROTOBUF"
        # Order is the second message in both files; region is field 4: b"\x22\x02eu".
        reader = ValueReader("protobuf", InlineSchemas({schema_id: schema}))
        assert reader.document(encode_protobuf(schema_id, (1,), b"\x22\x02eu"))["region"] == "eu"
    for subject in ("platform-proto-text-value", "platform-proto-fdp-value"):
        schema_registry.request("DELETE", f"/subjects/{subject}")


def test_a_wrong_registry_path_is_a_wait_naming_the_url_not_an_unknown_id(schema_registry: SchemaRegistry) -> None:
    # Apicurio's base URL without /apis/ccompat/v7: a 404 for every id, but not the registry's "not found".
    client = RegistrySchemas(schema_registry.base)
    with pytest.raises(SchemaUnavailable, match="without error_code 40403.*Confluent-compatible API"):
        client.schema(1)


def test_the_operators_plan_time_probe_tells_a_registry_from_a_wrong_url(schema_registry: SchemaRegistry) -> None:
    from local_platform.processes import free_port
    from reprise_operator.doors.schema_registry import registry_problem

    assert registry_problem(schema_registry.url) is None
    wrong_path = registry_problem(schema_registry.base)  # Apicurio without /apis/ccompat/v7
    assert wrong_path is not None and "HTTP 404" in wrong_path and "/apis/ccompat/v7" in wrong_path
    nobody = registry_problem(f"http://127.0.0.1:{free_port()}")
    assert nobody is not None and "cannot be reached" in nobody
