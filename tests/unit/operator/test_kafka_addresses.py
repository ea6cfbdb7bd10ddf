"""The normal form of a bootstrap list: spellings of the same brokers are one connection (security review H4)."""

from __future__ import annotations

import pytest

from reprise_operator.rules.kafka_addresses import normal_bootstrap


@pytest.mark.parametrize(
    "spelling",
    [
        "127.0.0.1:1234",
        "127.0.0.1:01234",
        "127.0.0.1:001234",
        " 127.0.0.1:1234 ",
        "127.0.0.1:1234,127.0.0.1:1234",
        "127.0.0.1:1234,127.0.0.1:01234",
        "PLAINTEXT://127.0.0.1:1234",
    ],
)
def test_spellings_of_one_address_are_one_normal_form(spelling: str) -> None:
    assert normal_bootstrap(spelling) == "127.0.0.1:1234"


def test_host_names_are_lower_cased_without_the_root_dot_and_lists_sorted() -> None:
    assert normal_bootstrap("Kafka-1.Kafka.:09092,KAFKA-0.kafka:9092,kafka-1.kafka:9092") == (
        "kafka-0.kafka:9092,kafka-1.kafka:9092"
    )
    assert normal_bootstrap("b:9092,a:9092") == normal_bootstrap("a:9092,b:9092") == "a:9092,b:9092"


def test_ipv6_literals_keep_their_brackets() -> None:
    assert normal_bootstrap("[::1]:09092") == "[::1]:9092"


def test_different_brokers_stay_different() -> None:
    assert normal_bootstrap("kafka:9092") != normal_bootstrap("kafka:9093")
    assert normal_bootstrap("kafka:9092") != normal_bootstrap("kafka:9092,other:9092")


def test_what_is_not_host_port_is_kept_for_the_client_to_refuse() -> None:
    assert normal_bootstrap("Kafka") == "kafka"
    assert normal_bootstrap("kafka:99999") == "kafka:99999"
