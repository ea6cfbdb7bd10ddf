"""WorkerSettings: the operator's contract (env round trip), flags over env, and errors that name the setting."""

from __future__ import annotations

import pytest

from replay_worker.settings import ENV_NAMES, SettingsError, WorkerSettings, build_parser

BASE = {
    "REPRISE_BOOTSTRAP_SERVERS": "kafka:9092",
    "REPRISE_REPLAY_ID": "shop/orders-fix/1a2b3c4d",
    "REPRISE_TOPICS": "orders, payments",
    "REPRISE_REPLAY_GROUP": "reprise-shop-orders-fix",
    "REPRISE_HANDLER": "accounts.handlers:apply",
}


def settings(**env: str) -> WorkerSettings:
    return WorkerSettings.from_env({**BASE, **env})


def test_defaults_and_parsing() -> None:
    s = settings()
    assert s.topics == ("orders", "payments")
    assert s.mode == "Drain" and s.role == "replay"
    assert s.start.kind == "earliest"
    assert s.handover_topic == "reprise.handover"
    assert s.batch_size == 1000 and s.metrics_port == 9400


def test_every_field_round_trips_through_to_env() -> None:
    s = settings(
        REPRISE_MODE="handover",
        REPRISE_LIVE_GROUP="orders-service",
        REPRISE_START='{"duration":"2h"}',
        REPRISE_ALLOW_CLAMP="true",
        REPRISE_FILTER='{"headers":{"type":["OrderPaid"]},"json":[{"path":"a.b","in":[1,2]}]}',
        REPRISE_DLQ_TOPIC="orders-dlq",
        REPRISE_BATCH_SIZE="250",
        REPRISE_MAX_RECORDS_PER_SECOND="1500.5",
        REPRISE_MAX_BYTES_PER_SECOND="1000000",
        REPRISE_METRICS_PORT="9500",
        REPRISE_KAFKA_CONFIG_DIR="/etc/reprise/kafka",
        REPRISE_EXIT_WHEN_DONE="yes",
        REPRISE_CHECK_INTERVAL="0.5",
        REPRISE_LOG_LEVEL="debug",
        REPRISE_HANDLER_RETRIES="5",
    )
    env = s.to_env()
    assert all(name.startswith("REPRISE_") for name in env)
    assert "REPRISE_MEMBER_NAME" not in env  # each pod names itself
    again = WorkerSettings.from_env(env).with_changes(member_name=s.member_name)
    assert again == s
    assert env["REPRISE_MODE"] == "Handover" and env["REPRISE_POISON_POLICY"] == "dead-letter"


def test_to_env_leaves_defaults_out() -> None:
    assert set(settings().to_env()) == {
        "REPRISE_BOOTSTRAP_SERVERS",
        "REPRISE_REPLAY_ID",
        "REPRISE_TOPICS",
        "REPRISE_REPLAY_GROUP",
        "REPRISE_HANDLER",
    }


def test_flags_win_over_environment() -> None:
    s = WorkerSettings.from_args(
        ["--mode", "Parallel", "--live-group", "live", "--batch-size", "7", "--allow-clamp"], env=BASE
    )
    assert (s.mode, s.live_group, s.batch_size, s.allow_clamp) == ("Parallel", "live", 7, True)


def test_a_dead_letter_topic_turns_the_policy_to_dead_letter() -> None:
    assert settings(REPRISE_DLQ_TOPIC="dlq").poison_policy == "dead-letter"
    assert settings(REPRISE_DLQ_TOPIC="dlq", REPRISE_POISON_POLICY="skip").poison_policy == "skip"


@pytest.mark.parametrize(
    "env, names",
    [
        ({"REPRISE_BATCH_SIZE": "many"}, ["REPRISE_BATCH_SIZE", "--batch-size", "whole number"]),
        ({"REPRISE_MODE": "Sideways"}, ["REPRISE_MODE", "--mode", "Parallel, Handover, Drain"]),
        ({"REPRISE_START": '{"timestamp":"yesterday"}'}, ["REPRISE_START", "ISO-8601"]),
        ({"REPRISE_START": "{not json"}, ["REPRISE_START", "not valid JSON"]),
        ({"REPRISE_FILTER": '{"header":{}}'}, ["REPRISE_FILTER", "unknown field"]),
        ({"REPRISE_ALLOW_CLAMP": "maybe"}, ["REPRISE_ALLOW_CLAMP", "boolean"]),
        ({"REPRISE_MODE": "Parallel"}, ["REPRISE_LIVE_GROUP", "--live-group", "Parallel"]),
        (
            {"REPRISE_MODE": "Handover", "REPRISE_LIVE_GROUP": "l", "REPRISE_END": '{"snapshot":true}'},
            ["REPRISE_END", "Handover"],
        ),
        ({"REPRISE_FORWARD_TOPIC": "out"}, ["exactly one of REPRISE_HANDLER"]),
        ({"REPRISE_HANDLER": "no_colon"}, ["package.module:function"]),
        ({"REPRISE_POISON_POLICY": "dead-letter"}, ["REPRISE_DLQ_TOPIC"]),
        ({"REPRISE_MODE": "Parallel", "REPRISE_LIVE_GROUP": "reprise-shop-orders-fix"}, ["must differ"]),
    ],
)
def test_errors_name_the_variable_and_the_flag(env: dict[str, str], names: list[str]) -> None:
    with pytest.raises(SettingsError) as error:
        settings(**env)
    for name in names:
        assert name in str(error.value)


def test_required_settings() -> None:
    with pytest.raises(SettingsError, match="REPRISE_BOOTSTRAP_SERVERS"):
        WorkerSettings.from_env({"REPRISE_REPLAY_ID": "x", "REPRISE_TOPICS": "t"})
    with pytest.raises(SettingsError, match="REPRISE_REPLAY_GROUP"):
        WorkerSettings.from_env({k: v for k, v in BASE.items() if k != "REPRISE_REPLAY_GROUP"})


def test_forward_topic_must_not_be_a_source() -> None:
    with pytest.raises(SettingsError, match="read its own output"):
        settings(REPRISE_HANDLER="", REPRISE_FORWARD_TOPIC="orders")


def test_backfill_needs_keys_and_a_target() -> None:
    env = {"REPRISE_ROLE": "backfill", "REPRISE_REPLAY_GROUP": "", "REPRISE_HANDLER": ""}
    with pytest.raises(SettingsError, match="REPRISE_FORWARD_TOPIC"):
        settings(**env)
    with pytest.raises(SettingsError, match="keys"):
        settings(**env, REPRISE_FORWARD_TOPIC="target")
    s = settings(**env, REPRISE_FORWARD_TOPIC="target", REPRISE_FILTER='{"keys":["a","b"]}')
    assert s.role == "backfill" and s.filter.keys == ("a", "b")


def test_every_field_has_a_variable_and_a_flag_in_the_help() -> None:
    help_text = build_parser().format_help()
    for field_name, env in ENV_NAMES.items():
        assert env in help_text, field_name
        assert "--" + env.removeprefix("REPRISE_").lower().replace("_", "-") in help_text


def test_described_counts_keys_instead_of_listing_them() -> None:
    s = settings(REPRISE_FILTER='{"keys":["secret-customer-1","secret-customer-2"]}')
    text = str(s.described())
    assert "secret-customer-1" not in text and "<2 keys>" in text


def test_follow_is_for_parallel_only():
    """A shadow hold (Reconsume completion.hold) runs its workers with REPRISE_FOLLOW."""
    base = dict(
        bootstrap_servers="k:9092", replay_id="r", topics=("t",), replay_group="rg", live_group="live", handler="m:f"
    )
    assert WorkerSettings(**base, mode="Parallel", follow=True).to_env()["REPRISE_FOLLOW"] == "true"
    with pytest.raises(SettingsError, match="REPRISE_FOLLOW"):
        WorkerSettings(**base, mode="Handover", follow=True)
