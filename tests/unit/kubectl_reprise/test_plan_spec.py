"""`kubectl reprise plan` refuses a manifest the way the API server does: a misspelled field is named as an unknown
field (issue 32 item 5), not reported as the required field it was meant to be."""

from __future__ import annotations

import pytest

from kubectl_reprise.plan import PlanRefused, parse_spec

SPEC = {
    "kafka": {"bootstrapServers": "kafka-bootstrap.kafka:9092"},
    "topics": ["users"],
    "consumerGroup": "accounts-service",
    "mode": "Rewind",
    "liveDeployment": {"name": "accounts"},
    "start": {"duration": "1h"},
}


def refusal(spec: dict) -> PlanRefused:
    with pytest.raises(PlanRefused) as caught:
        parse_spec({"apiVersion": "reprise.io/v1alpha1", "kind": "Reconsume", "spec": spec})
    return caught.value


def test_a_misspelled_field_is_named_as_unknown_with_the_field_it_may_mean():
    spec = {k: v for k, v in SPEC.items() if k != "consumerGroup"} | {"consumerGrup": "accounts-service"}
    refused = refusal(spec)
    assert refused.reason == "InvalidSpec"
    assert 'unknown field "spec.consumerGrup"' in refused.message
    assert 'did you mean "spec.consumerGroup"' in refused.message


def test_an_unknown_nested_field_is_named_with_its_path():
    refused = refusal(SPEC | {"kafka": {"bootstrapServers": "k:9092", "bootstrapServer": "k:9092"}})
    assert 'unknown field "spec.kafka.bootstrapServer"' in refused.message


def test_a_missing_field_alone_is_still_named_as_required():
    refused = refusal({k: v for k, v in SPEC.items() if k != "consumerGroup"})
    assert refused.message.startswith("spec.consumerGroup: Field required")
