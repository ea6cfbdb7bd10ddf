"""Bootstrap aliases: how a spec's Kafka address becomes the one the operator reaches (local platform)."""

from __future__ import annotations

import pytest

from reprise_operator.api.reconsume import ReconsumeSpec
from reprise_operator.shared.bootstrap_aliases import AliasError, aliased_spec, parse, resolve
from reprise_operator.shared.settings import OperatorSettings, SettingsError

LOCAL = parse("*.kafka:*=127.0.0.1:39092")


@pytest.mark.parametrize(
    "servers, expected",
    [
        ("kafka-bootstrap.kafka:9092", "127.0.0.1:39092"),
        ("kafka-0.kafka:9093,kafka-1.kafka:9093,kafka-2.kafka:9093", "127.0.0.1:39092"),  # listed once
        ("broker.example.com:9092", "broker.example.com:9092"),  # no pattern matches: kept
        ("kafka-bootstrap.kafka.svc:9092", "kafka-bootstrap.kafka.svc:9092"),  # another name: not matched
        ("a.kafka:9092,b.other:9092", "127.0.0.1:39092,b.other:9092"),
    ],
)
def test_each_entry_is_mapped_by_the_first_matching_pattern(servers, expected):
    assert resolve(servers, LOCAL) == expected


def test_the_first_pattern_wins_and_no_aliases_maps_nothing():
    aliases = parse("a.kafka:9092=one:1, *.kafka:*=two:2")
    assert resolve("a.kafka:9092,b.kafka:9092", aliases) == "one:1,two:2"
    assert resolve("a.kafka:9092", ()) == "a.kafka:9092"


@pytest.mark.parametrize("text", ["*.kafka:*", "=127.0.0.1:1", "*.kafka:*=127.0.0.1", "x=host:port"])
def test_a_malformed_entry_is_refused_naming_the_setting(text):
    with pytest.raises(AliasError, match="REPRISE_KAFKA_BOOTSTRAP_ALIASES"):
        parse(text)
    with pytest.raises(SettingsError, match="REPRISE_KAFKA_BOOTSTRAP_ALIASES"):
        OperatorSettings.from_env({"REPRISE_KAFKA_BOOTSTRAP_ALIASES": text})


def test_settings_read_the_aliases_and_default_to_none():
    assert OperatorSettings.from_env({}).kafka_bootstrap_aliases == ()
    assert OperatorSettings.from_env(
        {"REPRISE_KAFKA_BOOTSTRAP_ALIASES": "*.kafka:*=127.0.0.1:39092"}
    ).kafka_bootstrap_aliases == (("*.kafka:*", "127.0.0.1:39092"),)


def test_a_typed_spec_gets_the_mapped_address_and_keeps_everything_else():
    spec = ReconsumeSpec.model_validate(
        {
            "kafka": {"bootstrapServers": "kafka-bootstrap.kafka:9092", "configFrom": {"secretRef": {"name": "s"}}},
            "topics": ["users"],
            "consumerGroup": "g",
            "mode": "Rewind",
            "liveDeployment": {"name": "d"},
            "start": {"earliest": True},
        }
    )
    mapped = aliased_spec(spec, LOCAL)
    assert mapped.kafka.bootstrap_servers == "127.0.0.1:39092"
    assert mapped.kafka.config_from == spec.kafka.config_from and mapped.topics == ["users"]
    assert spec.kafka.bootstrap_servers == "kafka-bootstrap.kafka:9092"  # the original is not changed
    assert aliased_spec(spec, parse("*.other:*=x:1")) is spec
