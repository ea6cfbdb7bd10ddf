"""`WorkerSettings`: the one typed settings object of the worker, from environment variables and CLI flags.

It is also the contract with the operator: the operator builds a `WorkerSettings` and puts `to_env()` into
the replay Deployment's (or Backfill Job's) environment, and the worker reads it back with `from_env()`.
Every field has one environment variable `REPRISE_*` and one flag `--*`; a flag wins over the variable.
Errors name both, and say what is accepted; their `code` and `field` are what every port gives. The published
table of the variables (type, default, values, modes, docs, what each port does not support) is
`settings_table`; `conformance/vectors/settings.json` holds the Java and Go parsers to this one.

Kafka credentials are never settings: they are files in `REPRISE_KAFKA_CONFIG_DIR` (see `kafka_clients`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Callable, Literal, Mapping, Sequence

from .protocol.filters import FilterSpec, FilterSpecError
from .protocol.start_position import EndSpec, SpecError, StartSpec
from .protocol.wire import MODES
from .settings_table import BY_ENV, LOG_LEVELS, POISON_POLICIES, ROLES

Role = Literal["replay", "backfill"]
PoisonPolicy = Literal["skip", "dead-letter"]


class SettingsError(ValueError):
    """A setting is missing or wrong; the message names the variable and the flag. `code` and `field` are the
    stable refusal (`settings_table.REFUSAL_CODES`, the variable) that every port gives for the same input."""

    def __init__(self, message: str, code: str = "invalid", field: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.field = field


def _default_member() -> str:
    # In Kubernetes the pod name; it names the replica in logs, in the handover topic and in the
    # transactional id of an exactly-once forward, so a restarted container fences its predecessor.
    return os.environ.get("HOSTNAME") or socket.gethostname()


@dataclass(frozen=True)
class WorkerSettings:
    """Everything one worker process needs. Each field is one `REPRISE_*` variable (`ENV_NAMES`); its type,
    default, allowed values and documentation are in `settings_table.SETTINGS` (the published table)."""

    bootstrap_servers: str
    replay_id: str
    topics: tuple[str, ...]
    role: str = "replay"
    mode: str = "Drain"
    replay_group: str | None = None
    live_group: str | None = None
    start: StartSpec = field(default_factory=lambda: StartSpec("earliest"))
    allow_clamp: bool = False
    end: EndSpec | None = None
    filter: FilterSpec = field(default_factory=FilterSpec)
    handler: str | None = None
    forward_topic: str | None = None
    forward_transactional: bool = False
    handover_topic: str = "reprise.handover"
    dlq_topic: str | None = None
    poison_policy: str = "skip"
    handler_retries: int = 2
    batch_size: int = 1000
    max_records_per_second: float = 0.0
    max_bytes_per_second: float = 0.0
    metrics_port: int = 9400
    kafka_config_dir: str | None = None
    member_name: str = field(default_factory=_default_member)
    follow: bool = False
    exit_when_done: bool = False
    check_interval: float = 1.0
    result_file: str | None = None
    log_level: str = "INFO"

    # -- validation of combinations (single values are checked while parsing)

    def __post_init__(self) -> None:
        def need(condition: bool, code: str, field: str, message: str) -> None:
            if not condition:
                raise SettingsError(message, code, field)

        need(
            bool(self.bootstrap_servers),
            "required",
            "REPRISE_BOOTSTRAP_SERVERS",
            "REPRISE_BOOTSTRAP_SERVERS (--bootstrap-servers) is required",
        )
        need(bool(self.replay_id), "required", "REPRISE_REPLAY_ID", "REPRISE_REPLAY_ID (--replay-id) is required")
        need(
            bool(self.topics),
            "required",
            "REPRISE_TOPICS",
            "REPRISE_TOPICS (--topics) is required: the source topics, comma-separated",
        )
        need(
            self.role in ROLES,
            "invalid",
            "REPRISE_ROLE",
            f"REPRISE_ROLE (--role) {self.role!r} is not one of {', '.join(ROLES)}",
        )
        need(
            self.mode in MODES,
            "invalid",
            "REPRISE_MODE",
            f"REPRISE_MODE (--mode) {self.mode!r} is not one of {', '.join(MODES)}",
        )
        need(
            self.poison_policy in POISON_POLICIES,
            "invalid",
            "REPRISE_POISON_POLICY",
            f"REPRISE_POISON_POLICY (--poison-policy) {self.poison_policy!r} is not one of {', '.join(POISON_POLICIES)}",
        )
        need(
            self.batch_size >= 1,
            "out-of-range",
            "REPRISE_BATCH_SIZE",
            "REPRISE_BATCH_SIZE (--batch-size) must be at least 1",
        )
        need(
            self.handler_retries >= 0,
            "out-of-range",
            "REPRISE_HANDLER_RETRIES",
            "REPRISE_HANDLER_RETRIES (--handler-retries) must be >= 0",
        )
        need(
            0 <= self.metrics_port <= 65535,
            "out-of-range",
            "REPRISE_METRICS_PORT",
            "REPRISE_METRICS_PORT (--metrics-port) must be 0..65535",
        )
        need(
            self.check_interval > 0,
            "out-of-range",
            "REPRISE_CHECK_INTERVAL",
            "REPRISE_CHECK_INTERVAL (--check-interval) must be > 0",
        )
        need(
            self.log_level.upper() in LOG_LEVELS,
            "invalid",
            "REPRISE_LOG_LEVEL",
            "REPRISE_LOG_LEVEL (--log-level) must be DEBUG, INFO, WARNING or ERROR",
        )
        need(
            not (self.poison_policy == "dead-letter" and not self.dlq_topic),
            "conflict",
            "REPRISE_POISON_POLICY",
            "REPRISE_POISON_POLICY=dead-letter needs REPRISE_DLQ_TOPIC (--dlq-topic)",
        )
        need(
            not (self.forward_transactional and not self.forward_topic),
            "conflict",
            "REPRISE_FORWARD_TRANSACTIONAL",
            "REPRISE_FORWARD_TRANSACTIONAL needs REPRISE_FORWARD_TOPIC (--forward-topic)",
        )
        if self.role == "replay":
            need(
                bool(self.replay_group),
                "required",
                "REPRISE_REPLAY_GROUP",
                "REPRISE_REPLAY_GROUP (--replay-group) is required for role replay",
            )
            need(
                bool(self.handler) != bool(self.forward_topic),
                "conflict" if self.handler else "required",
                "REPRISE_FORWARD_TOPIC" if self.handler else "REPRISE_HANDLER",
                "give exactly one of REPRISE_HANDLER (--handler) and REPRISE_FORWARD_TOPIC (--forward-topic)",
            )
            if self.mode in ("Parallel", "Handover"):
                need(
                    bool(self.live_group),
                    "required",
                    "REPRISE_LIVE_GROUP",
                    f"REPRISE_LIVE_GROUP (--live-group) is required in mode {self.mode}",
                )
                need(
                    self.live_group != self.replay_group,
                    "conflict",
                    "REPRISE_LIVE_GROUP",
                    "REPRISE_LIVE_GROUP and REPRISE_REPLAY_GROUP must differ: the replay runs in a group of its own",
                )
            need(
                not self.follow or self.mode == "Parallel",
                "conflict",
                "REPRISE_FOLLOW",
                "REPRISE_FOLLOW (--follow) is for mode Parallel only: a Handover's guard skips the replayed records "
                "until the handover, so it cannot be held open",
            )
            if self.mode == "Handover":
                need(
                    self.end is None,
                    "conflict",
                    "REPRISE_END",
                    "REPRISE_END (--end) cannot be used with mode Handover: the live group takes "
                    "over at the handover offset, so the replay has no end of its own",
                )
            if self.handler:
                module, _, function = self.handler.partition(":")
                need(
                    bool(module) and bool(function),
                    "invalid",
                    "REPRISE_HANDLER",
                    f"REPRISE_HANDLER (--handler) {self.handler!r} must look like package.module:function",
                )
            if self.forward_topic:
                need(
                    self.forward_topic not in self.topics,
                    "conflict",
                    "REPRISE_FORWARD_TOPIC",
                    "REPRISE_FORWARD_TOPIC must not be one of REPRISE_TOPICS: the replay would read its own output",
                )
        else:
            need(
                bool(self.forward_topic),
                "required",
                "REPRISE_FORWARD_TOPIC",
                "role backfill needs REPRISE_FORWARD_TOPIC (--forward-topic): the target topic",
            )
            need(
                self.filter.keys is not None or self.filter.keys_file is not None,
                "required",
                "REPRISE_FILTER",
                "role backfill needs the keys to re-emit: REPRISE_FILTER with keys or keysFile",
            )

    # -- the contract with the operator

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "WorkerSettings":
        """Settings from `REPRISE_*` variables (the process environment by default)."""
        return cls.from_sources(env if env is not None else os.environ, {})

    def to_env(self) -> dict[str, str]:
        """The `REPRISE_*` variables that reproduce these settings with `from_env` (defaults left out)."""
        result: dict[str, str] = {}
        defaults = _defaults()
        for f in fields(self):
            spec = _FIELDS[f.name]
            value = getattr(self, f.name)
            if f.name != "member_name" and f.name in defaults and value == defaults[f.name]:
                continue
            if value is None or f.name == "member_name":
                continue
            result[spec.env] = spec.render(value)
        return result

    @classmethod
    def from_args(cls, argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> "WorkerSettings":
        """Settings from flags over variables (the CLI)."""
        args = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(described=any(a in ("-h", "--help") for a in args))
        namespace = parser.parse_args(args)
        flags = {name: value for name, value in vars(namespace).items() if value is not None}
        return cls.from_sources(env if env is not None else os.environ, flags)

    @classmethod
    def from_sources(cls, env: Mapping[str, str], flags: Mapping[str, Any]) -> "WorkerSettings":
        values: dict[str, Any] = {}
        for name, spec in _FIELDS.items():
            if name in flags:
                raw = flags[name]
            elif spec.env in env and env[spec.env] != "":
                raw = env[spec.env]
            else:
                continue
            try:
                values[name] = spec.parse(raw)
            except (ValueError, SpecError, FilterSpecError) as exc:
                raise SettingsError(f"{spec.env} (--{spec.flag}): {exc}", "invalid", spec.env) from None
        if "poison_policy" not in values and values.get("dlq_topic"):
            values["poison_policy"] = "dead-letter"
        for required in ("bootstrap_servers", "replay_id", "topics"):
            if required not in values:
                spec = _FIELDS[required]
                raise SettingsError(f"{spec.env} (--{spec.flag}) is required", "required", spec.env)
        return cls(**values)

    def with_changes(self, **changes: Any) -> "WorkerSettings":
        return replace(self, **changes)

    def described(self) -> dict[str, Any]:
        """The settings for a log line: no credentials live here, but the key set may be long, so it is counted."""
        body = {
            f.name: _FIELDS[f.name].render(getattr(self, f.name)) if getattr(self, f.name) is not None else None
            for f in fields(self)
        }
        if self.filter.keys is not None:
            body["filter"] = json.dumps({**self.filter.to_obj(), "keys": f"<{len(self.filter.keys)} keys>"})
        return body


# -- parsing of single values


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not a boolean (true or false)")


def _int(raw: Any) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


def _float(raw: Any) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if value < 0:
        raise ValueError(f"{raw!r} must not be negative")
    return value


def _topics(raw: Any) -> tuple[str, ...]:
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    topics = tuple(t.strip() for t in items if t.strip())
    if not topics:
        raise ValueError("no topic given")
    return topics


def _text(raw: Any) -> str:
    return str(raw).strip()


def _choice(options: tuple[str, ...], fold: Callable[[str], str] = lambda s: s) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = str(raw).strip()
        for option in options:
            if fold(option) == fold(text):
                return option
        raise ValueError(f"{text!r} is not one of {', '.join(options)}")

    return parse


@dataclass(frozen=True)
class _Field:
    env: str
    flag: str
    parse: Callable[[Any], Any]
    render: Callable[[Any], str] = str
    metavar: str | None = None
    is_flag: bool = False


def _render_bool(value: bool) -> str:
    return "true" if value else "false"


def _render_float(value: float) -> str:
    return repr(float(value)).rstrip("0").rstrip(".") if value != int(value) else str(int(value))


_FIELDS: dict[str, _Field] = {
    "bootstrap_servers": _Field("REPRISE_BOOTSTRAP_SERVERS", "bootstrap-servers", _text, metavar="HOST:PORT,..."),
    "replay_id": _Field("REPRISE_REPLAY_ID", "replay-id", _text, metavar="ID"),
    "topics": _Field("REPRISE_TOPICS", "topics", _topics, lambda v: ",".join(v), metavar="TOPIC,..."),
    "role": _Field("REPRISE_ROLE", "role", _choice(ROLES, str.lower)),
    "mode": _Field("REPRISE_MODE", "mode", _choice(MODES, str.lower)),
    "replay_group": _Field("REPRISE_REPLAY_GROUP", "replay-group", _text, metavar="GROUP"),
    "live_group": _Field("REPRISE_LIVE_GROUP", "live-group", _text, metavar="GROUP"),
    "start": _Field("REPRISE_START", "start", StartSpec.parse, lambda v: v.to_json(), metavar="JSON"),
    "allow_clamp": _Field("REPRISE_ALLOW_CLAMP", "allow-clamp", _bool, _render_bool, is_flag=True),
    "end": _Field("REPRISE_END", "end", EndSpec.parse, lambda v: v.to_json(), metavar="JSON"),
    "filter": _Field("REPRISE_FILTER", "filter", FilterSpec.parse, lambda v: v.to_json(), metavar="JSON"),
    "handler": _Field("REPRISE_HANDLER", "handler", _text, metavar="PKG.MOD:FUNC"),
    "forward_topic": _Field("REPRISE_FORWARD_TOPIC", "forward-topic", _text, metavar="TOPIC"),
    "forward_transactional": _Field(
        "REPRISE_FORWARD_TRANSACTIONAL", "forward-transactional", _bool, _render_bool, is_flag=True
    ),
    "handover_topic": _Field("REPRISE_HANDOVER_TOPIC", "handover-topic", _text, metavar="TOPIC"),
    "dlq_topic": _Field("REPRISE_DLQ_TOPIC", "dlq-topic", _text, metavar="TOPIC"),
    "poison_policy": _Field("REPRISE_POISON_POLICY", "poison-policy", _choice(POISON_POLICIES, str.lower)),
    "handler_retries": _Field("REPRISE_HANDLER_RETRIES", "handler-retries", _int, metavar="N"),
    "batch_size": _Field("REPRISE_BATCH_SIZE", "batch-size", _int, metavar="N"),
    "max_records_per_second": _Field(
        "REPRISE_MAX_RECORDS_PER_SECOND", "max-records-per-second", _float, _render_float, metavar="N"
    ),
    "max_bytes_per_second": _Field(
        "REPRISE_MAX_BYTES_PER_SECOND", "max-bytes-per-second", _float, _render_float, metavar="N"
    ),
    "metrics_port": _Field("REPRISE_METRICS_PORT", "metrics-port", _int, metavar="PORT"),
    "kafka_config_dir": _Field("REPRISE_KAFKA_CONFIG_DIR", "kafka-config-dir", _text, metavar="DIR"),
    "member_name": _Field("REPRISE_MEMBER_NAME", "member-name", _text, metavar="NAME"),
    "follow": _Field("REPRISE_FOLLOW", "follow", _bool, _render_bool, is_flag=True),
    "exit_when_done": _Field("REPRISE_EXIT_WHEN_DONE", "exit-when-done", _bool, _render_bool, is_flag=True),
    "check_interval": _Field("REPRISE_CHECK_INTERVAL", "check-interval", _float, _render_float, metavar="SECONDS"),
    "result_file": _Field("REPRISE_RESULT_FILE", "result-file", _text, metavar="PATH"),
    "log_level": _Field("REPRISE_LOG_LEVEL", "log-level", lambda raw: _choice(LOG_LEVELS, str.upper)(raw)),
}

#: Environment variable of every field, for the operator and the docs.
ENV_NAMES: dict[str, str] = {name: spec.env for name, spec in _FIELDS.items()}


def _defaults() -> dict[str, Any]:
    result: dict[str, Any] = {}
    for f in fields(WorkerSettings):
        if f.default is not MISSING:
            result[f.name] = f.default
        elif f.default_factory is not MISSING:
            result[f.name] = f.default_factory()
    return result


def _help_of(name: str) -> str:
    env = _FIELDS[name].env
    return BY_ENV[env].doc + f" [env {env}]"


_GROUPS = {
    "Kafka": ("bootstrap_servers", "kafka_config_dir"),
    "What to replay": (
        "role",
        "replay_id",
        "topics",
        "mode",
        "replay_group",
        "live_group",
        "start",
        "allow_clamp",
        "end",
        "follow",
        "filter",
    ),
    "Delivery": (
        "handler",
        "forward_topic",
        "forward_transactional",
        "dlq_topic",
        "poison_policy",
        "handler_retries",
        "batch_size",
    ),
    "Handover and operations": (
        "handover_topic",
        "max_records_per_second",
        "max_bytes_per_second",
        "metrics_port",
        "member_name",
        "exit_when_done",
        "check_interval",
        "result_file",
        "log_level",
    ),
}


def build_parser(described: bool = True) -> argparse.ArgumentParser:
    """The CLI; without `described`, flags carry no help text (what parsing needs, without reading the source)."""
    parser = argparse.ArgumentParser(
        prog="python -m replay_worker",
        description=(
            "Reprise's replay worker. Role `replay` consumes the source topics in a temporary replay group from a "
            "start resolved once, and hands each matching record to a handler or forwards it to a topic, until the "
            "mode says the partition is finished (Drain: its end; Parallel: the live group's offset; Handover: the "
            "handover offset, see replay_worker/HANDOVER.md). Role `backfill` re-produces the latest record of each "
            "named key and exits. Every flag has a REPRISE_* environment variable; flags win."
        ),
        epilog=(
            "examples:\n"
            "  python -m replay_worker --bootstrap-servers kafka:9092 --replay-id demo --topics orders \\\n"
            '      --replay-group demo-replay --start \'{"duration":"2h"}\' --forward-topic orders-copy\n'
            "  python -m replay_worker --mode Handover --live-group accounts --replay-group accounts-replay \\\n"
            "      --replay-id accounts-1 --topics transactions --bootstrap-servers kafka:9092 \\\n"
            "      --handler examples.accounts_service.handlers:apply_batch\n\n"
            "Kafka credentials: put librdkafka settings as files in a folder (file name = setting) and pass it with\n"
            "--kafka-config-dir; their values are never logged."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for title, names in _GROUPS.items():
        group = parser.add_argument_group(title)
        for name in names:
            spec = _FIELDS[name]
            if spec.is_flag:
                group.add_argument(
                    f"--{spec.flag}",
                    dest=name,
                    nargs="?",
                    const="true",
                    metavar="BOOL",
                    help=_help_of(name) if described else None,
                )
            else:
                group.add_argument(
                    f"--{spec.flag}", dest=name, metavar=spec.metavar, help=_help_of(name) if described else None
                )
    return parser
