"""settings.json: the `REPRISE_*` environment in, the normalised settings or a `{code, field}` refusal out
(`replay_worker/settings_table.py`, `replay_worker/settings.py`).

Each refusal case breaks one rule only, so a port may check in any order. `result` is the reference's outcome;
`ports` gives a port's own outcome where it differs: a setting the port declares unsupported (refused with code
`unsupported`, before anything else), or the delivery, which in the Java and Go roles is the service's own
handler (so `REPRISE_HANDLER` is never required there and its text is not checked).
"""

from __future__ import annotations

from typing import Any

from ..settings import ENV_NAMES, SettingsError, WorkerSettings
from ..settings_table import PORTS, REFUSAL_CODES, SETTINGS, UNSUPPORTED, unsupported_asked

#: What a port's normalised settings are compared on: every setting except the JSON specs (held by
#: replay_start.json and filters.json) and the ones a service port only carries (handler, result file).
COMPARED: tuple[str, ...] = tuple(
    s.env for s in SETTINGS if s.type != "json" and s.env not in ("REPRISE_HANDLER", "REPRISE_RESULT_FILE")
)

#: The delivery of a service port: its own handler (the operator's stand-in, `standby.SERVICE_DELIVERY`).
SERVICE_HANDLER = "service:own-handler"

BASE = {
    "REPRISE_BOOTSTRAP_SERVERS": "kafka:9092",
    "REPRISE_REPLAY_ID": "shop/orders-replay/1",
    "REPRISE_TOPICS": "orders",
    "REPRISE_REPLAY_GROUP": "orders-replay",
    "REPRISE_HANDLER": "shop.handlers:apply",
    "REPRISE_MEMBER_NAME": "orders-replay-0",
}

LIVE = {"REPRISE_MODE": "Parallel", "REPRISE_LIVE_GROUP": "orders"}

#: (name, changes to BASE: a value of None removes the variable).
CASES: tuple[tuple[str, dict[str, str | None]], ...] = (
    ("defaults", {}),
    ("mode is case-insensitive", {"REPRISE_MODE": "handover", "REPRISE_LIVE_GROUP": "orders"}),
    ("role in capitals", {"REPRISE_ROLE": "REPLAY"}),
    ("an empty value is unset", {"REPRISE_MODE": "", "REPRISE_BATCH_SIZE": "", "REPRISE_KAFKA_CONFIG_DIR": ""}),
    ("topics trimmed, blanks dropped", {"REPRISE_TOPICS": " orders , refunds ,"}),
    ("a DLQ topic makes dead-letter the default", {"REPRISE_DLQ_TOPIC": "orders-dlq"}),
    ("skip with a DLQ topic", {"REPRISE_DLQ_TOPIC": "orders-dlq", "REPRISE_POISON_POLICY": "Skip"}),
    (
        "numbers",
        {
            "REPRISE_BATCH_SIZE": "250",
            "REPRISE_HANDLER_RETRIES": "0",
            "REPRISE_MAX_RECORDS_PER_SECOND": "1500.5",
            "REPRISE_MAX_BYTES_PER_SECOND": " 1048576 ",
            "REPRISE_METRICS_PORT": "0",
            "REPRISE_CHECK_INTERVAL": "0.5",
        },
    ),
    ("boolean spellings true", {"REPRISE_ALLOW_CLAMP": "yes", "REPRISE_EXIT_WHEN_DONE": "1"}),
    ("boolean spellings false", {"REPRISE_ALLOW_CLAMP": "off", "REPRISE_EXIT_WHEN_DONE": "No"}),
    ("log level folded to capitals", {"REPRISE_LOG_LEVEL": "debug"}),
    (
        "topics and folders as given",
        {"REPRISE_HANDOVER_TOPIC": "team-a.handover", "REPRISE_KAFKA_CONFIG_DIR": "/etc/reprise/kafka"},
    ),
    (
        "start, end and filter parse",
        {
            "REPRISE_START": '{"duration":"2h"}',
            "REPRISE_END": '{"snapshot":true}',
            "REPRISE_FILTER": '{"json":[{"path":"kind","equals":"paid"}]}',
        },
    ),
    ("follow in Parallel", {**LIVE, "REPRISE_FOLLOW": "true"}),
    ("follow false asks nothing", {**LIVE, "REPRISE_FOLLOW": "false"}),
    ("forward instead of a handler", {"REPRISE_HANDLER": None, "REPRISE_FORWARD_TOPIC": "orders-copy"}),
    (
        "forward exactly-once",
        {"REPRISE_HANDLER": None, "REPRISE_FORWARD_TOPIC": "orders-copy", "REPRISE_FORWARD_TRANSACTIONAL": "true"},
    ),
    (
        "backfill",
        {
            "REPRISE_ROLE": "backfill",
            "REPRISE_HANDLER": None,
            "REPRISE_REPLAY_GROUP": None,
            "REPRISE_FORWARD_TOPIC": "orders-compacted",
            "REPRISE_FILTER": '{"keys":["a","b"]}',
            "REPRISE_RESULT_FILE": "/dev/termination-log",
        },
    ),
    # -- refusals: one rule each
    ("bootstrap servers missing", {"REPRISE_BOOTSTRAP_SERVERS": None}),
    ("replay id missing", {"REPRISE_REPLAY_ID": None}),
    ("topics missing", {"REPRISE_TOPICS": None}),
    ("topics only commas", {"REPRISE_TOPICS": " , "}),
    ("replay group missing", {"REPRISE_REPLAY_GROUP": None}),
    ("no handler and no forward topic", {"REPRISE_HANDLER": None}),
    ("handler and forward topic", {"REPRISE_FORWARD_TOPIC": "orders-copy"}),
    ("unknown mode", {"REPRISE_MODE": "Rewind"}),
    ("unknown role", {"REPRISE_ROLE": "shadow"}),
    ("unknown poison policy", {"REPRISE_POISON_POLICY": "crash"}),
    ("unknown log level", {"REPRISE_LOG_LEVEL": "TRACE"}),
    ("batch size not a number", {"REPRISE_BATCH_SIZE": "ten"}),
    ("batch size zero", {"REPRISE_BATCH_SIZE": "0"}),
    ("handler retries negative", {"REPRISE_HANDLER_RETRIES": "-1"}),
    ("metrics port too large", {"REPRISE_METRICS_PORT": "70000"}),
    ("check interval zero", {"REPRISE_CHECK_INTERVAL": "0"}),
    ("check interval negative", {"REPRISE_CHECK_INTERVAL": "-1"}),
    ("throttle negative", {"REPRISE_MAX_RECORDS_PER_SECOND": "-5"}),
    ("throttle not a number", {"REPRISE_MAX_BYTES_PER_SECOND": "fast"}),
    ("boolean neither true nor false", {"REPRISE_ALLOW_CLAMP": "maybe"}),
    ("Parallel without a live group", {"REPRISE_MODE": "Parallel"}),
    ("live group is the replay group", {"REPRISE_MODE": "Handover", "REPRISE_LIVE_GROUP": "orders-replay"}),
    (
        "Handover with an end",
        {"REPRISE_MODE": "Handover", "REPRISE_LIVE_GROUP": "orders", "REPRISE_END": '{"snapshot":true}'},
    ),
    ("dead-letter without a DLQ topic", {"REPRISE_POISON_POLICY": "dead-letter"}),
    ("follow outside Parallel", {"REPRISE_MODE": "Handover", "REPRISE_LIVE_GROUP": "orders", "REPRISE_FOLLOW": "on"}),
    ("start not JSON", {"REPRISE_START": "yesterday"}),
    ("end not JSON", {"REPRISE_END": "{snapshot}"}),
    ("filter not JSON", {"REPRISE_FILTER": "kind=paid"}),
)


def _normalised(settings: WorkerSettings) -> dict[str, Any]:
    field_of = {env: name for name, env in ENV_NAMES.items()}
    out: dict[str, Any] = {}
    for env in COMPARED:
        value = getattr(settings, field_of[env])
        out[env] = list(value) if isinstance(value, tuple) else value
    return out


def outcome(env: dict[str, str]) -> dict[str, Any]:
    """The reference's outcome for `env`."""
    try:
        return {"settings": _normalised(WorkerSettings.from_env(env))}
    except SettingsError as refused:
        return {"error": {"code": refused.code, "field": refused.field}}


def port_outcome(env: dict[str, str], port: str) -> dict[str, Any]:
    """A service port's outcome: an unsupported setting first; else the reference's with the service's own
    handler as the delivery."""
    asked = unsupported_asked(env, port)
    if asked is not None:
        return {"error": {"code": "unsupported", "field": asked}}
    return outcome({**env, "REPRISE_HANDLER": SERVICE_HANDLER})


def settings_cases() -> list[dict[str, Any]]:
    cases = []
    for name, changes in CASES:
        env = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
        case: dict[str, Any] = {"name": name, "env": env, "result": outcome(env)}
        differs = {
            port: port_outcome(env, port)
            for port in PORTS
            if port != "python" and port_outcome(env, port) != case["result"]
        }
        if differs:
            case["ports"] = differs
        cases.append(case)
    return cases


def document() -> dict[str, Any]:
    return {
        "format": 1,
        "area": "settings",
        "spec": "replay_worker/settings_table.py (docs/reference/settings.md)",
        "codes": REFUSAL_CODES,
        "unsupported": {port: list(UNSUPPORTED[port]) for port in PORTS},
        "compared": list(COMPARED),
        "settings": [
            {
                "env": s.env,
                "type": s.type,
                "default": s.default,
                "values": list(s.values),
                "modes": list(s.modes),
                "roles": list(s.roles),
                "required": s.required or None,
            }
            for s in SETTINGS
        ],
        "cases": settings_cases(),
    }
