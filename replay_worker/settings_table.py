"""The `REPRISE_*` environment as one table: per setting its type, default, allowed values, the modes and roles
it applies to, its documentation, and which ports do not support it. Pure data and two pure rules.

Every port of the replay role is started by the operator through these variables: the Python worker
(`settings.WorkerSettings`), the Java role (`ReplaySettings`) and the Go role (`replay.Settings`). This table is
what they agree on. From it come `conformance/vectors/settings.json` (run by all three ports), the rendered
page `docs/reference/settings.md`, the flags' help of `python -m replay_worker`, and the CRD rule that refuses,
with `consumer.entrypoint: Service`, a variable the service's replay role does not support. The operator asks
`unsupported_asked` before it starts a port, so a resource never asks a port for something it would ignore.

Refusals are `{code, field}`: `field` is the variable, `code` one of `REFUSAL_CODES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .protocol.wire import MODES

ROLES: tuple[str, ...] = ("replay", "backfill")
POISON_POLICIES: tuple[str, ...] = ("skip", "dead-letter")
LOG_LEVELS: tuple[str, ...] = ("DEBUG", "INFO", "WARNING", "ERROR")

#: The stable refusal codes (a port maps its own exceptions to them; vectors compare codes, never text).
REFUSAL_CODES: dict[str, str] = {
    "required": "the variable is missing (or empty) and the role or mode needs it",
    "invalid": "the value does not parse: not a number, not a boolean, not one of the allowed values, bad JSON",
    "out-of-range": "the value parses but is outside its range (a batch size of 0, a port above 65535)",
    "conflict": "the value does not go with another setting (the variable named is the one to change)",
    "unsupported": "this port does not support the setting (or this value of it): see its declared list",
}

#: The ports that run the replay role. `python` is the reference; it supports every setting.
PORTS: tuple[str, ...] = ("python", "java", "go")


@dataclass(frozen=True)
class Setting:
    """One `REPRISE_*` variable. `default` is its normal form as text (`None`: no default, unset); `values`
    the allowed values when they are a closed list; `modes` and `roles` where it means something."""

    env: str
    type: str
    default: str | None
    doc: str
    values: tuple[str, ...] = ()
    modes: tuple[str, ...] = MODES
    roles: tuple[str, ...] = ROLES
    required: str = ""


_REPLAY = ("replay",)
_LIVE_MODES = ("Parallel", "Handover")

#: The table, in the order the docs show it. Types: text, topics (comma-separated list), choice, boolean,
#: integer, number (non-negative), json.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "REPRISE_BOOTSTRAP_SERVERS",
        "text",
        None,
        "Kafka's bootstrap servers, `host:port[,host:port]`.",
        required="always",
    ),
    Setting(
        "REPRISE_KAFKA_CONFIG_DIR",
        "text",
        None,
        "Folder of Kafka client settings, one per file (file name = key), mounted from the user's Secret. "
        "Values are never logged.",
    ),
    Setting(
        "REPRISE_ROLE",
        "choice",
        "replay",
        "`replay` (standby replay consumer in a group) or `backfill` (a Job that re-produces the latest record "
        "of each key in `filter.keys` to the forward topic, then exits).",
        values=ROLES,
    ),
    Setting(
        "REPRISE_REPLAY_ID",
        "text",
        None,
        "Names this replay in the handover topic (the operator's is namespace/name/uid).",
        required="always",
    ),
    Setting("REPRISE_TOPICS", "topics", None, "The source topics, comma-separated.", required="always"),
    Setting(
        "REPRISE_MODE",
        "choice",
        "Drain",
        "`Parallel`, `Handover` or `Drain` (no live group: replay until the end bound or the partition's end). "
        "See HANDOVER.md.",
        values=MODES,
    ),
    Setting(
        "REPRISE_REPLAY_GROUP",
        "text",
        None,
        "The temporary consumer group of the replay.",
        roles=_REPLAY,
        required="role replay",
    ),
    Setting(
        "REPRISE_LIVE_GROUP",
        "text",
        None,
        "The live service's consumer group; must differ from the replay group.",
        modes=_LIVE_MODES,
        roles=_REPLAY,
        required="modes Parallel and Handover",
    ),
    Setting(
        "REPRISE_START",
        "json",
        '{"earliest":true}',
        'JSON, one of `{"earliest":true}`, `{"timestamp":"2024-05-01T00:00:00Z"}` (or epoch ms), '
        '`{"duration":"2h"}` (back from the moment the replay starts), `{"offsets":{"topic":{"0":123}}}`. '
        "Resolved once, recorded as the replay group's committed offsets.",
    ),
    Setting(
        "REPRISE_ALLOW_CLAMP",
        "boolean",
        "false",
        "Start at the log-start offset when the asked-for start was deleted by retention, instead of failing. "
        "Default: missing history is an error.",
    ),
    Setting(
        "REPRISE_END",
        "json",
        None,
        'Optional JSON bound, `{"snapshot":true}` (end offsets at the start), `{"timestamp":...}` or '
        '`{"offsets":{...}}`. Not with Handover (the live side takes over, so there is no end).',
        modes=("Parallel", "Drain"),
    ),
    Setting(
        "REPRISE_FOLLOW",
        "boolean",
        "false",
        "Never finish a partition at the live group's offset; keep following the live topic until the operator "
        "stops the workers (a Reconsume's shadow hold, `completion.hold`).",
        modes=("Parallel",),
        roles=_REPLAY,
    ),
    Setting(
        "REPRISE_FILTER",
        "json",
        "{}",
        'JSON `{"headers":{"name":["v"]},"keys":["k"],"keysFile":"/path","json":[{"path":"a.b","equals":"x"}]}`; '
        "all conditions must hold. Default: every record. With `valueFormat` (`avro`, `protobuf`, `raw`; default "
        "`json`) and `registry` (the schema registry's Confluent-compatible URL), `json` conditions read the "
        "decoded value (docs/schemas.md); the Java and Go roles refuse these fields (not supported yet).",
    ),
    Setting(
        "REPRISE_HANDLER",
        "text",
        None,
        "`package.module:function`, called with a list of records per batch. Exactly one of handler and forward "
        "topic. The Java and Go roles call the service's own handler and ignore it.",
        roles=_REPLAY,
    ),
    Setting(
        "REPRISE_FORWARD_TOPIC",
        "text",
        None,
        "Produce each matching record to this topic instead (key, headers, timestamp and partition kept); not "
        "one of the source topics. Required for role backfill: its target.",
    ),
    Setting(
        "REPRISE_FORWARD_TRANSACTIONAL",
        "boolean",
        "false",
        "Forward exactly-once (records and offsets in one transaction per batch). Needs the forward topic.",
    ),
    Setting(
        "REPRISE_DLQ_TOPIC",
        "text",
        None,
        "Dead-letter topic for poison records (undecodable, or the handler raises).",
        roles=_REPLAY,
    ),
    Setting(
        "REPRISE_POISON_POLICY",
        "choice",
        "skip",
        "`dead-letter` (needs the DLQ topic; the default when one is set) or `skip` (count and go on). Never a "
        "crash loop.",
        values=POISON_POLICIES,
        roles=_REPLAY,
    ),
    Setting(
        "REPRISE_HANDLER_RETRIES",
        "integer",
        "2",
        "Retries (>= 0) of a record whose handler raised before it counts as poison.",
        roles=_REPLAY,
    ),
    Setting(
        "REPRISE_BATCH_SIZE",
        "integer",
        "1000",
        "Records per batch (>= 1): the unit of handler calls, commits and the duplicate window after a crash.",
        roles=_REPLAY,
    ),
    Setting("REPRISE_HANDOVER_TOPIC", "text", "reprise.handover", "The compacted handover topic (one partition)."),
    Setting("REPRISE_MAX_RECORDS_PER_SECOND", "number", "0", "Throttle on records; 0 = unlimited.", roles=_REPLAY),
    Setting(
        "REPRISE_MAX_BYTES_PER_SECOND", "number", "0", "Throttle on key+value bytes; 0 = unlimited.", roles=_REPLAY
    ),
    Setting(
        "REPRISE_METRICS_PORT",
        "integer",
        "9400",
        "Prometheus `/metrics` and liveness `/healthz` (0..65535); 0 turns the endpoint off.",
    ),
    Setting(
        "REPRISE_MEMBER_NAME",
        "text",
        "$HOSTNAME",
        "This replica's name (default: `$HOSTNAME`, the pod name): in logs, the handover topic and the "
        "transactional id of an exactly-once forward.",
    ),
    Setting(
        "REPRISE_EXIT_WHEN_DONE",
        "boolean",
        "false",
        "Exit 0 once every partition of the replay is finished. Default: a Deployment's worker idles until the "
        "operator tears it down (an exit would only be restarted).",
        roles=_REPLAY,
    ),
    Setting(
        "REPRISE_CHECK_INTERVAL",
        "number",
        "1",
        "Seconds (> 0) between reads of the live group's offsets and other slow checks.",
    ),
    Setting(
        "REPRISE_RESULT_FILE",
        "text",
        None,
        "Role backfill writes its JSON result here too (e.g. /dev/termination-log).",
        roles=("backfill",),
    ),
    Setting("REPRISE_LOG_LEVEL", "choice", "INFO", "Log level.", values=LOG_LEVELS),
)

BY_ENV: dict[str, Setting] = {s.env: s for s in SETTINGS}

#: What each port does not support, in the style of protobuf's conformance failure lists: `VARIABLE` (any value
#: other than its default) or `VARIABLE=value` (that value). Each port declares the same list in its own code
#: and its vector runner checks the two are equal; the port refuses these with code `unsupported`.
#: The Java and Go roles run inside the service (entrypoint Service): they hand records to the service's own
#: handler, so they neither forward nor backfill, and they stop at the live group's offsets (no follow).
UNSUPPORTED: dict[str, tuple[str, ...]] = {
    "python": (),
    "java": ("REPRISE_ROLE=backfill", "REPRISE_FOLLOW", "REPRISE_FORWARD_TOPIC", "REPRISE_FORWARD_TRANSACTIONAL"),
    "go": ("REPRISE_ROLE=backfill", "REPRISE_FOLLOW", "REPRISE_FORWARD_TOPIC", "REPRISE_FORWARD_TRANSACTIONAL"),
}

#: The ports a service's own image may run (`consumer.entrypoint: Service`). The operator cannot tell which
#: language the image is, so it refuses what any of them does not support.
SERVICE_PORTS: tuple[str, ...] = ("java", "go")

_FALSE = ("0", "false", "no", "off")


def _asks(entry: str, raw: str) -> bool:
    """Whether a variable's raw value asks for what `entry` names (see `UNSUPPORTED`)."""
    name, _, value = entry.partition("=")
    text = raw.strip()
    if not text:
        return False  # empty is unset in every port
    if value:
        return text.lower() == value.lower()
    setting = BY_ENV[name]
    if setting.type == "boolean":
        return text.lower() not in _FALSE
    return setting.default is None or text != setting.default


def _first_asked(env: Mapping[str, str], entries: tuple[str, ...]) -> str | None:
    for setting in SETTINGS:
        for entry in entries:
            if entry.partition("=")[0] == setting.env and setting.env in env and _asks(entry, env[setting.env]):
                return entry
    return None


def unsupported_asked(env: Mapping[str, str], port: str) -> str | None:
    """The first variable (in table order) with which `env` asks `port` for something it does not support."""
    entry = _first_asked(env, UNSUPPORTED[port])
    return None if entry is None else entry.partition("=")[0]


def service_unsupported() -> tuple[str, ...]:
    """The entries any service port does not support, in table order, without repeats."""
    found: list[str] = []
    for port in SERVICE_PORTS:
        for entry in UNSUPPORTED[port]:
            if entry not in found:
                found.append(entry)
    order = {s.env: i for i, s in enumerate(SETTINGS)}
    return tuple(sorted(found, key=lambda e: order[e.partition("=")[0]]))


def service_unsupported_asked(env: Mapping[str, str]) -> str | None:
    """The first entry of `service_unsupported` that `env` asks for (`VARIABLE` or `VARIABLE=value`), or None:
    what the operator refuses to give a service's own image."""
    return _first_asked(env, service_unsupported())
