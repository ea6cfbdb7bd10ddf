"""Which settings of a tenant's Kafka Secret the operator and `kubectl reprise` may hand to librdkafka in their
own process, and what they refuse before any client is built.

The replay pods, Backfill Jobs and the Spark job get the whole Secret: they are the tenant's own processes. The
operator is shared by every tenant and the plugin runs on a person's machine, so there a Secret's setting is
code the tenant runs with someone else's rights: `sasl.oauthbearer.assertion.file` reads the operator's
ServiceAccount token and POSTs it to a URL of the tenant's choosing, `plugin.library.paths` loads any file as a
library, `debug` floods the shared log (docs/installing.md, the security review's C1). So these clients take an
allow-list, not a deny-list: a property librdkafka adds later is refused until someone classifies it (a unit
test lists every property of the bundled librdkafka and fails on one that is in neither set).

Allowed (`ALLOWED`): the security protocol; SASL PLAIN and SCRAM with user and password; OAUTHBEARER only as
OIDC `client_credentials` against a token endpoint the platform lists (`REPRISE_OAUTH_TOKEN_ENDPOINTS`, chart
value `kafka.oauthTokenEndpoints`); inline PEM material; `client.id`; and tuning and client semantics that act
only on the tenant's own Kafka state with the tenant's own principal (timeouts, backoffs, sockets, fetch and
batch sizes, commits, compression).

Refused (`REFUSED`, each with why): whatever makes the process read or write a local file, contact anything but
the brokers (other than a listed token endpoint), load code or run a command, write to the log or to
telemetry, change process-wide state, or is a program-level setting (callbacks, internals). The families are
`FAMILIES`. A `ssl.*.location` that names a file of the mounted Secret folder (`/etc/reprise/kafka/<key>`, as
the pods see it) is read from that key of the same Secret and given inline (its `ssl.*.pem` twin), so a
certificate setup that works in the pods works here.

Values: a refusal names the key, never its value (the value may be a credential). librdkafka echoes some values
when it refuses them (`Invalid value "<value>" for configuration property ...`), so the enumerated values of the
allowed keys are checked here first, and `client_refusal` turns any refusal of the client into one that names
only the key.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Collection, Mapping

from .setting_scopes import PREFIXES, ClientType, settings_for

#: Where the pods mount the Secret (the operator's `workloads.KAFKA_CONFIG_DIR`; a unit test keeps them equal).
MOUNTED_FOLDER = "/etc/reprise/kafka"

#: Why a key is refused, by kind of harm.
READS_FILES = "reads or writes a file in the operator's (or the plugin's) process"
CONTACTS_OTHERS = "makes the client contact something other than the Kafka brokers"
RUNS_CODE = "loads code or runs a command in the operator's (or the plugin's) process"
LOGS = "writes to the shared log or telemetry of the operator's process"
PROGRAM_LEVEL = "is set by programs (a callback or an internal), not by a Secret"
PROCESS_WIDE = "changes process-wide state of the operator's process"
OAUTH_ONLY_CLIENT_CREDENTIALS = "is OAUTHBEARER material other than client_credentials (only that grant is allowed)"
UNSUPPORTED = "is not needed by Reprise's clients and is not allowed in the operator's process"

#: The refused families, as the security review names them; every librdkafka property matching one is refused
#: (a `ssl.*.location` only unless it names a file of the mounted folder, see the module docstring; the listed
#: token endpoint is the one allowed `*.url`).
FAMILIES: dict[str, str] = {
    "*.location": READS_FILES,
    "*.file": READS_FILES,
    "*.url": CONTACTS_OTHERS,
    "plugin.*": RUNS_CODE,
    "ssl.engine.*": RUNS_CODE,
    "ssl.providers": RUNS_CODE,
    "sasl.kerberos.*": RUNS_CODE,
    "sasl.oauthbearer.assertion.*": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.metadata.*": CONTACTS_OTHERS,
    "https.*": CONTACTS_OTHERS,
    "debug": LOGS,
    "log*": LOGS,
    "statistics.*": LOGS,
    "*_cb": PROGRAM_LEVEL,
}

ALLOWED = frozenset(
    {
        # -- who the client is and how it authenticates
        "client.id",
        "client.rack",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.grant.type",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.client.credentials.client.id",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.sub.claim.name",
        "ssl.ca.pem",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
        "ssl.cipher.suites",
        "ssl.curves.list",
        "ssl.sigalgs.list",
        # The spec's `bootstrapServers` always replaces it (dropped here); allowed so existing Secrets keep working.
        "bootstrap.servers",
        # -- connections, retries and metadata
        "api.version.request",
        "api.version.request.timeout.ms",
        "api.version.fallback.ms",
        "broker.version.fallback",
        "broker.address.family",
        "broker.address.ttl",
        "client.dns.lookup",
        "connections.max.idle.ms",
        "socket.timeout.ms",
        "socket.connection.setup.timeout.ms",
        "socket.blocking.max.ms",
        "socket.keepalive.enable",
        "socket.nagle.disable",
        "socket.max.fails",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.jitter.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "max.in.flight",
        "max.in.flight.requests.per.connection",
        "message.max.bytes",
        "message.copy.max.bytes",
        "receive.message.max.bytes",
        "metadata.max.age.ms",
        "metadata.recovery.strategy",
        "metadata.recovery.rebootstrap.trigger.ms",
        "topic.metadata.refresh.interval.ms",
        "topic.metadata.refresh.fast.cnt",
        "topic.metadata.refresh.fast.interval.ms",
        "topic.metadata.refresh.sparse",
        "topic.metadata.propagation.max.ms",
        "enable.metrics.push",
        # -- consumers: the tenant's own groups and fetches. These and the producers' below repeat setting_scopes'
        # lists on purpose: a property that a librdkafka upgrade adds to those lists must be classified here by
        # someone, not allowed in the operator's process by a set union.
        "auto.commit.enable",
        "auto.commit.interval.ms",
        "auto.offset.reset",
        "check.crcs",
        "consume.callback.max.messages",
        "coordinator.query.interval.ms",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "fetch.error.backoff.ms",
        "fetch.max.bytes",
        "fetch.message.max.bytes",
        "fetch.min.bytes",
        "fetch.queue.backoff.ms",
        "fetch.wait.max.ms",
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "heartbeat.interval.ms",
        "isolation.level",
        "max.partition.fetch.bytes",
        "max.poll.interval.ms",
        "max.poll.records",
        "partition.assignment.strategy",
        "queued.max.messages.kbytes",
        "queued.min.messages",
        "session.timeout.ms",
        # -- producers: batching, acknowledgements, transactions of the tenant's own principal
        "acks",
        "batch.num.messages",
        "batch.size",
        "compression.codec",
        "compression.level",
        "compression.type",
        "delivery.report.only.error",
        "delivery.timeout.ms",
        "enable.gapless.guarantee",
        "enable.idempotence",
        "linger.ms",
        "message.send.max.retries",
        "message.timeout.ms",
        "partitioner",
        "produce.offset.report",
        "queue.buffering.backpressure.threshold",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.messages",
        "queue.buffering.max.ms",
        "queuing.strategy",
        "request.required.acks",
        "request.timeout.ms",
        "retries",
        "sticky.partitioning.linger.ms",
        "transaction.timeout.ms",
        "transactional.id",
    }
)

REFUSED: dict[str, str] = {
    # files
    "ssl.ca.location": READS_FILES,
    "ssl.certificate.location": READS_FILES,
    "ssl.key.location": READS_FILES,
    "ssl.crl.location": READS_FILES,
    "ssl.keystore.location": READS_FILES,
    "ssl.keystore.password": READS_FILES,
    "ssl.engine.location": RUNS_CODE,
    "ssl.engine.id": RUNS_CODE,
    "ssl.providers": RUNS_CODE,
    "ssl.ca.certificate.stores": READS_FILES,
    "offset.store.method": READS_FILES,
    "offset.store.path": READS_FILES,
    "offset.store.sync.interval.ms": READS_FILES,
    "https.ca.location": READS_FILES,
    "https.ca.pem": CONTACTS_OTHERS,
    # code and commands
    "plugin.library.paths": RUNS_CODE,
    "sasl.kerberos.kinit.cmd": RUNS_CODE,
    "sasl.kerberos.keytab": RUNS_CODE,
    "sasl.kerberos.min.time.before.relogin": RUNS_CODE,
    "sasl.kerberos.principal": RUNS_CODE,
    "sasl.kerberos.service.name": RUNS_CODE,
    # OAUTHBEARER other than client_credentials against a listed endpoint
    "sasl.oauthbearer.config": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "enable.sasl.oauthbearer.unsecure.jwt": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.algorithm": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.claim.aud": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.claim.exp.seconds": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.claim.iss": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.claim.jti.include": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.claim.nbf.seconds": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.claim.sub": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.file": READS_FILES,
    "sasl.oauthbearer.assertion.jwt.template.file": READS_FILES,
    "sasl.oauthbearer.assertion.private.key.file": READS_FILES,
    "sasl.oauthbearer.assertion.private.key.passphrase": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.assertion.private.key.pem": OAUTH_ONLY_CLIENT_CREDENTIALS,
    "sasl.oauthbearer.metadata.authentication.type": CONTACTS_OTHERS,
    # addresses other than the spec's
    "metadata.broker.list": "is an alias of bootstrap.servers; the brokers come from spec.kafka.bootstrapServers",
    # logs and telemetry
    "debug": LOGS,
    "log.connection.close": LOGS,
    "log.queue": LOGS,
    "log.thread.name": LOGS,
    "log_level": LOGS,
    "statistics.interval.ms": LOGS,
    # process-wide state
    "enable.random.seed": PROCESS_WIDE,
    "internal.termination.signal": PROCESS_WIDE,
    # set by programs, not by a Secret
    "background_event_cb": PROGRAM_LEVEL,
    "builtin.features": PROGRAM_LEVEL,
    "closesocket_cb": PROGRAM_LEVEL,
    "connect_cb": PROGRAM_LEVEL,
    "consume_cb": PROGRAM_LEVEL,
    "default_topic_conf": PROGRAM_LEVEL,
    "dr_cb": PROGRAM_LEVEL,
    "dr_msg_cb": PROGRAM_LEVEL,
    "enabled_events": PROGRAM_LEVEL,
    "error_cb": PROGRAM_LEVEL,
    "interceptors": PROGRAM_LEVEL,
    "log_cb": PROGRAM_LEVEL,
    "msg_order_cmp": PROGRAM_LEVEL,
    "oauthbearer_token_refresh_cb": PROGRAM_LEVEL,
    "offset_commit_cb": PROGRAM_LEVEL,
    "opaque": PROGRAM_LEVEL,
    "open_cb": PROGRAM_LEVEL,
    "partitioner_cb": PROGRAM_LEVEL,
    "rebalance_cb": PROGRAM_LEVEL,
    "resolve_cb": PROGRAM_LEVEL,
    "socket_cb": PROGRAM_LEVEL,
    "ssl.certificate.verify_cb": PROGRAM_LEVEL,
    "ssl_ca": PROGRAM_LEVEL,
    "ssl_certificate": PROGRAM_LEVEL,
    "ssl_engine_callback_data": PROGRAM_LEVEL,
    "ssl_key": PROGRAM_LEVEL,
    "stats_cb": PROGRAM_LEVEL,
    "throttle_cb": PROGRAM_LEVEL,
    # not needed by Reprise's clients (a regular expression librdkafka echoes back; share groups; auto-creation)
    "topic.blacklist": UNSUPPORTED,
    "share.acknowledgement.mode": UNSUPPORTED,
    "allow.auto.create.topics": UNSUPPORTED,
}

#: The values librdkafka accepts for the allowed keys that take one of a list (its `enum value` properties,
#: lower case as it compares them): checked here so that librdkafka never gets to echo a wrong one.
ENUM_VALUES: dict[str, frozenset[str]] = {
    "security.protocol": frozenset({"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"}),
    "ssl.endpoint.identification.algorithm": frozenset({"none", "https"}),
    "sasl.oauthbearer.method": frozenset({"default", "oidc"}),
    "broker.address.family": frozenset({"any", "v4", "v6"}),
    "client.dns.lookup": frozenset({"use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"}),
    "metadata.recovery.strategy": frozenset({"none", "rebootstrap"}),
    "group.protocol": frozenset({"classic", "consumer"}),
    "isolation.level": frozenset({"read_uncommitted", "read_committed"}),
    "auto.offset.reset": frozenset({"smallest", "earliest", "beginning", "largest", "latest", "end", "error"}),
    "compression.codec": frozenset({"none", "gzip", "snappy", "lz4", "zstd", "inherit"}),
    "compression.type": frozenset({"none", "gzip", "snappy", "lz4", "zstd"}),
    "queuing.strategy": frozenset({"fifo", "lifo"}),
}

#: Allowed keys whose value librdkafka would echo in its refusal, or that pick a mechanism: checked here too.
#: OAUTHBEARER is further bound to OIDC client_credentials and a listed endpoint (`_oauth_refusal`).
SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"})
LISTED_VALUES: dict[str, frozenset[str]] = {
    "sasl.mechanism": SASL_MECHANISMS,
    "sasl.mechanisms": SASL_MECHANISMS,
    "sasl.oauthbearer.grant.type": frozenset({"client_credentials"}),
    "partitioner": frozenset(
        {"random", "consistent", "consistent_random", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"}
    ),
}
#: `partition.assignment.strategy` is a comma-separated list of these.
ASSIGNORS = frozenset({"range", "roundrobin", "cooperative-sticky"})

#: A `*.location` of the mounted folder is given as its inline twin.
LOCATION_TWINS = {
    "ssl.ca.location": "ssl.ca.pem",
    "ssl.certificate.location": "ssl.certificate.pem",
    "ssl.key.location": "ssl.key.pem",
}


TOKEN_ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
CLIENTS: tuple[ClientType, ...] = ("consumer", "producer", "admin")


class RefusedSetting(ValueError):
    """A key of the Secret the operator does not hand to a client: its name and why, never its value.

    `reason` is the status reason: `ForbiddenKafkaSetting` for a key (or an OAUTHBEARER or SASL setup) that is
    not allowed, `InvalidKafkaSetting` for an allowed key whose value librdkafka would refuse."""

    def __init__(self, key: str, why: str, reason: str = "ForbiddenKafkaSetting") -> None:
        super().__init__(f"key {key} {why}")
        self.key = key
        self.why = why
        self.reason = reason


def _split(key: str) -> tuple[str, str]:
    """(client prefix or "", the librdkafka property)."""
    prefix = next((p for p in PREFIXES if key.startswith(p)), "")
    return prefix, key[len(prefix) :]


def refusal_of(prop: str) -> str:
    """Why a property that is not allowed is refused (its own entry, else its family, else unknown)."""
    if prop in REFUSED:
        return REFUSED[prop]
    family = next((why for pattern, why in FAMILIES.items() if fnmatch.fnmatchcase(prop, pattern)), None)
    if family is not None:
        return family
    return "is not a Kafka client setting the operator may use (librdkafka has no such property, or it is not allowed)"


def _mounted_key(location: str, secret: Mapping[str, str]) -> str | None:
    """The key of `secret` that a path names as the pods see it (`/etc/reprise/kafka/<key>`), else None."""
    folder = MOUNTED_FOLDER + "/"
    if not location.startswith(folder):
        return None
    name = location[len(folder) :]
    if not name or "/" in name or name.startswith(".") or name not in secret:
        return None
    return name


def _value_refusal(prop: str, value: str, token_endpoints: Collection[str]) -> RefusedSetting | None:
    text = str(value).strip()
    if prop == TOKEN_ENDPOINT:
        if text not in token_endpoints:
            return RefusedSetting(
                prop,
                "names a token endpoint the platform does not list (the chart's kafka.oauthTokenEndpoints, "
                "REPRISE_OAUTH_TOKEN_ENDPOINTS)",
            )
        return None
    if prop in ENUM_VALUES and text.lower() not in ENUM_VALUES[prop]:
        return RefusedSetting(prop, f"must be one of {', '.join(sorted(ENUM_VALUES[prop]))}", "InvalidKafkaSetting")
    if prop in LISTED_VALUES and text not in LISTED_VALUES[prop]:
        return RefusedSetting(prop, f"must be one of {', '.join(sorted(LISTED_VALUES[prop]))}", "ForbiddenKafkaSetting")
    if prop == "partition.assignment.strategy":
        chosen = [s.strip() for s in text.split(",")]
        if not chosen or any(s not in ASSIGNORS for s in chosen):
            return RefusedSetting(
                prop, f"must be a comma-separated list of {', '.join(sorted(ASSIGNORS))}", "InvalidKafkaSetting"
            )
    return None


def _sasl_refusal(scoped: Mapping[str, str], prefix_of: Mapping[str, str]) -> RefusedSetting | None:
    """A SASL protocol names its mechanism (librdkafka's default, GSSAPI, runs `kinit`); OAUTHBEARER only as
    OIDC client_credentials with a token endpoint (that it is listed is checked per key)."""
    mechanism = str(scoped.get("sasl.mechanism", scoped.get("sasl.mechanisms", ""))).strip()
    protocol = str(scoped.get("security.protocol", "")).strip().lower()
    if protocol.startswith("sasl_") and not mechanism:
        return RefusedSetting(
            "sasl.mechanism",
            f"is required with a SASL security.protocol: one of {', '.join(sorted(SASL_MECHANISMS))} "
            "(librdkafka's default, GSSAPI, is not allowed)",
        )
    if mechanism != "OAUTHBEARER":
        return None
    method = str(scoped.get("sasl.oauthbearer.method", "default")).strip().lower()
    if method != "oidc":
        key = prefix_of.get("sasl.oauthbearer.method", "") + "sasl.oauthbearer.method"
        return RefusedSetting(key, "must be oidc with sasl.mechanism OAUTHBEARER (client_credentials only)")
    if TOKEN_ENDPOINT not in scoped:
        return RefusedSetting(
            TOKEN_ENDPOINT, "is required with OAUTHBEARER, and must be one the platform lists", "InvalidKafkaSetting"
        )
    return None


def operator_settings(secret: Mapping[str, str], token_endpoints: Collection[str] = ()) -> dict[str, str]:
    """The Secret's settings as the operator's and the plugin's clients may be given them (still with their
    `consumer.`/`producer.`/`admin.` prefixes; `settings_for` scopes them as for every client).

    Raises `RefusedSetting` for the first key (in the Secret's order) that is not allowed, or whose value
    is not. A `ssl.*.location` naming a file of the mounted folder becomes its `ssl.*.pem` twin with that
    file's content (the other key of the Secret, which is then no setting of its own). `bootstrap.servers` is
    dropped: the spec's always wins."""
    out: dict[str, str] = {}
    files: set[str] = set()
    for key, value in secret.items():
        prefix, prop = _split(key)
        if prop not in LOCATION_TWINS:
            continue
        name = _mounted_key(str(value).strip(), secret)
        if name is None:
            raise RefusedSetting(
                key,
                f"{READS_FILES}; give the PEM inline ({LOCATION_TWINS[prop]}), or as another key of this Secret "
                f"that the value names as the pods see it: {MOUNTED_FOLDER}/<key>",
            )
        twin = prefix + LOCATION_TWINS[prop]
        if twin in secret:
            raise RefusedSetting(key, f"and {twin} are both given: give one", "InvalidKafkaSetting")
        out[twin] = secret[name]
        files.add(name)
    prefix_of: dict[str, dict[str, str]] = {}
    for key, value in secret.items():
        prefix, prop = _split(key)
        if prop in LOCATION_TWINS or (key in files and key not in ALLOWED):
            continue
        if prop not in ALLOWED:
            raise RefusedSetting(key, refusal_of(prop))
        refused = _value_refusal(prop, value, token_endpoints)
        if refused is not None:
            raise RefusedSetting(key, refused.why, refused.reason)
        if prop == "bootstrap.servers":
            continue
        out[key] = value
        prefix_of.setdefault(prefix, {})[prop] = prefix
    for client in CLIENTS:
        scoped = settings_for(client, out)
        prefixes = {**prefix_of.get("", {}), **prefix_of.get(f"{client}.", {})}
        refused = _sasl_refusal(scoped, prefixes)
        if refused is not None:
            raise refused
    return out


#: Messages of librdkafka (and confluent-kafka) that refuse a client's settings when it is built.
_REFUSAL_MARKERS = ("configuration property", "Failed to create", "Unsupported", "Expected bool value", "Invalid value")
_KEY_IN_TEXT = re.compile(r"[A-Za-z0-9_.\-]+")


def client_refusal(text: str) -> str | None:
    """None unless `text` is a Kafka client's refusal of its settings; then that refusal without any value:
    only the first allowed key it names ("the Kafka client refused the value of security.protocol"), since
    librdkafka's own message may quote the value (`Invalid value "<value>" for configuration property ...`)."""
    if not any(marker in text for marker in _REFUSAL_MARKERS):
        return None
    named = next((w.strip(".") for w in _KEY_IN_TEXT.findall(text) if w.strip(".") in ALLOWED), None)
    if named is None:
        return "the Kafka client refused the Secret's settings (the message is not shown: it may quote a value)"
    return f"the Kafka client refused the value of {named} (not shown)"
