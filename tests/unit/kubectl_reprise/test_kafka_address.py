"""`kubectl reprise plan` maps a manifest's in-cluster Kafka name as the operator does (issue 32 item 2): from
REPRISE_KAFKA_BOOTSTRAP_ALIASES when exported, else from the local platform whose API server it talks to."""

from __future__ import annotations

import pytest

from kubectl_reprise.connection import PluginError
from kubectl_reprise.kafka_address import addressing
from reprise_operator.shared.bootstrap_aliases import resolve

API = "https://127.0.0.1:39443"
STATE = {"api_server": API, "kafka_bootstrap_aliases": "*.kafka:*=127.0.0.1:39092"}


def test_the_local_platform_it_talks_to_gives_the_mapping():
    found = addressing(API + "/", {}, STATE)
    assert resolve("kafka-bootstrap.kafka:9092", found.aliases) == "127.0.0.1:39092"
    assert found.source == "the local platform (make run)"


def test_another_cluster_gets_no_mapping_from_a_local_platform_that_runs_beside_it():
    found = addressing("https://prod.example:6443", {}, STATE)
    assert found.aliases == () and resolve("kafka-bootstrap.kafka:9092", found.aliases) == "kafka-bootstrap.kafka:9092"
    assert addressing(API, {}, None).aliases == ()


def test_the_exported_variable_wins_and_a_malformed_one_is_named():
    found = addressing(API, {"REPRISE_KAFKA_BOOTSTRAP_ALIASES": "*.kafka:*=10.0.0.1:9092"}, STATE)
    assert resolve("kafka-bootstrap.kafka:9092", found.aliases) == "10.0.0.1:9092"
    assert found.source == "REPRISE_KAFKA_BOOTSTRAP_ALIASES"
    with pytest.raises(PluginError, match="REPRISE_KAFKA_BOOTSTRAP_ALIASES: 'nonsense' is not pattern=host:port"):
        addressing(API, {"REPRISE_KAFKA_BOOTSTRAP_ALIASES": "nonsense"}, STATE)


def test_the_local_platform_records_the_mapping_it_gives_its_operator(tmp_path):
    from local_platform.platform import IN_CLUSTER_KAFKA, LocalPlatform

    platform = LocalPlatform(tmp_path, state_file=None, kafka=False)
    assert platform.kafka_bootstrap_aliases is None  # no broker, nothing to map to
    assert IN_CLUSTER_KAFKA == "*.kafka:*"
