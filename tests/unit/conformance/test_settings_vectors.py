"""settings.json in the Python reference: the environment in, the normalised settings or `{code, field}` out,
read from the committed file the way the Java and Go runners read it; and the table it comes from agrees with
`WorkerSettings` (every field one row, the same defaults)."""

from __future__ import annotations

from typing import Any

import pytest

from replay_worker.conformance.settings_cases import SERVICE_HANDLER, outcome
from replay_worker.settings import ENV_NAMES, WorkerSettings
from replay_worker.settings_table import BY_ENV, SETTINGS, UNSUPPORTED, service_unsupported, unsupported_asked

from .vectors import ids, load

SETTINGS_JSON = load("settings.json")


@pytest.mark.parametrize("case", SETTINGS_JSON["cases"], ids=ids(SETTINGS_JSON["cases"]))
def test_settings_case(case: dict[str, Any]) -> None:
    assert outcome(case["env"]) == case["result"]


@pytest.mark.parametrize("case", SETTINGS_JSON["cases"], ids=ids(SETTINGS_JSON["cases"]))
@pytest.mark.parametrize("port", ["java", "go"])
def test_a_service_port_refuses_what_it_declares_unsupported(case: dict[str, Any], port: str) -> None:
    expected = case.get("ports", {}).get(port, case["result"])
    asked = unsupported_asked(case["env"], port)
    if asked is not None:
        assert expected == {"error": {"code": "unsupported", "field": asked}}
    else:
        assert expected == outcome({**case["env"], "REPRISE_HANDLER": SERVICE_HANDLER})


def test_the_published_lists_are_the_tables() -> None:
    assert SETTINGS_JSON["unsupported"] == {port: list(entries) for port, entries in UNSUPPORTED.items()}
    assert service_unsupported() == (
        "REPRISE_ROLE=backfill",
        "REPRISE_FOLLOW",
        "REPRISE_FORWARD_TOPIC",
        "REPRISE_FORWARD_TRANSACTIONAL",
    )


def test_every_worker_setting_is_one_row_with_the_same_default() -> None:
    assert sorted(ENV_NAMES.values()) == sorted(s.env for s in SETTINGS)
    defaults = WorkerSettings(bootstrap_servers="k:9092", replay_id="r", topics=("t",), replay_group="g", handler="m:f")
    rendered = defaults.to_env()
    for name, env in ENV_NAMES.items():
        row = BY_ENV[env]
        if row.default is None or env == "REPRISE_MEMBER_NAME":
            continue
        # to_env leaves a default out; the table's default, given back, must change nothing.
        again = WorkerSettings.from_env({**rendered, "REPRISE_BOOTSTRAP_SERVERS": "k:9092", env: row.default})
        assert getattr(again, name) == getattr(defaults, name), env
        assert env not in rendered, f"{env}: the table's default {row.default!r} is not WorkerSettings' default"


def test_an_unsupported_setting_asked_with_its_default_asks_nothing() -> None:
    assert unsupported_asked({"REPRISE_FOLLOW": "false", "REPRISE_FORWARD_TOPIC": ""}, "java") is None
    assert unsupported_asked({"REPRISE_FOLLOW": "True"}, "go") == "REPRISE_FOLLOW"
    assert unsupported_asked({"REPRISE_ROLE": "replay"}, "java") is None
    assert unsupported_asked({"REPRISE_ROLE": "Backfill"}, "java") == "REPRISE_ROLE"
