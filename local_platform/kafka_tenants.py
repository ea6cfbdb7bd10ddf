"""The multi-tenant form of the local Kafka broker: a SASL/PLAIN listener, `StandardAuthorizer`, one principal per
team and the prefixed ACLs that docs/security.md (section 8) prescribes for it.

The platform's own PLAINTEXT and controller listeners stay as they are: clients there are `User:ANONYMOUS`, a
super user, so the operator of `make run`, the test suite and the platform's setup keep working unchanged. Teams
connect to the SASL listener with their own principal, which is refused everything no ACL grants
(`allow.everyone.if.no.acl.found=false`). A team is named like its namespace, and so is its principal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The platform's SASL principal (a super user, like ANONYMOUS on the PLAINTEXT listener).
ADMIN = "admin"
#: The topic every team may read (the review's "shared topic": an event stream of the whole company).
SHARED_TOPIC = "shared.orders"
#: The chart's default `handoverTopic`: one topic per namespace, which only that namespace's principal may use.
HANDOVER_TOPIC = "reprise.handover.{namespace}"


@dataclass(frozen=True)
class Tenant:
    """One team: its namespace, its Kafka principal (the same name) and that principal's password."""

    name: str
    password: str

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    @property
    def topic_prefix(self) -> str:
        return f"{self.name}."

    @property
    def group_prefixes(self) -> tuple[str, ...]:
        """The team's live groups, and the replay and drain groups Reprise names by default (reprise.<ns>.<name>)."""
        return (f"{self.name}.", f"reprise.{self.name}.")

    def handover_topic(self, template: str = HANDOVER_TOPIC) -> str:
        """The team's own handover topic (its namespace in the chart's `handoverTopic`)."""
        return template.replace("{namespace}", self.name)

    @property
    def transactional_id_prefixes(self) -> tuple[str, ...]:
        return (f"reprise-bootstrap-{self.name}/", f"reprise-forward-{self.name}/")

    def client_settings(self) -> dict[str, str]:
        """librdkafka settings of this principal on the SASL listener (the keys of a `configFrom` Secret)."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": self.name,
            "sasl.password": self.password,
        }


def _default_tenants() -> tuple[Tenant, ...]:
    return (Tenant("team-a", "team-a-password"), Tenant("team-b", "team-b-password"))


@dataclass(frozen=True)
class MultiTenant:
    """The SASL listener's principals and what each may do; `KafkaBroker(multi_tenant=...)` serves it."""

    tenants: tuple[Tenant, ...] = field(default_factory=_default_tenants)
    admin_password: str = "admin-password"
    shared_topics: tuple[str, ...] = (SHARED_TOPIC,)
    handover_topic: str = HANDOVER_TOPIC

    def tenant(self, name: str) -> Tenant:
        return next(t for t in self.tenants if t.name == name)

    def server_properties(self, sasl_port: int) -> dict[str, str]:
        """The substitutions of `kafka/server.properties` for this form (empty strings in the default form)."""
        users = " ".join(f'user_{t.name}="{t.password}"' for t in self.tenants)
        lines = [
            "# The multi-tenant form (local_platform/kafka_tenants.py).",
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ADMIN}" password="{self.admin_password}" user_{ADMIN}="{self.admin_password}" {users};',
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # ANONYMOUS is whoever uses the PLAINTEXT and controller listeners: the platform itself.
            f"super.users=User:ANONYMOUS;User:{ADMIN}",
            "allow.everyone.if.no.acl.found=false",
        ]
        return {
            "sasl_listener": f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl_protocol": ",SASL_PLAINTEXT:SASL_PLAINTEXT",
            "multi_tenant": "\n".join(lines),
        }

    def acl_bindings(self) -> list[Any]:
        """docs/security.md section 8, per team, plus Read on the shared topics for every team."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        op = AclOperation
        bindings: list[Any] = []

        def allow(kind: Any, name: str, pattern: Any, principal: str, *operations: Any) -> None:
            for operation in operations:
                bindings.append(AclBinding(kind, name, pattern, principal, "*", operation, AclPermissionType.ALLOW))

        prefixed, literal = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL
        for t in self.tenants:
            allow(
                ResourceType.TOPIC, t.topic_prefix, prefixed, t.principal,
                op.DESCRIBE, op.READ, op.WRITE, op.CREATE, op.DELETE,
            )  # fmt: skip
            for group in t.group_prefixes:
                allow(ResourceType.GROUP, group, prefixed, t.principal, op.DESCRIBE, op.READ, op.DELETE)
            for transactional_id in t.transactional_id_prefixes:
                allow(ResourceType.TRANSACTIONAL_ID, transactional_id, prefixed, t.principal, op.DESCRIBE, op.WRITE)
            # Its own handover topic only, created by the platform: no Create, Alter or Delete (review C2.1, M3).
            # DescribeConfigs: a reader checks the topic's settings before it trusts it (handover_topic_settings).
            allow(
                ResourceType.TOPIC, t.handover_topic(self.handover_topic), literal, t.principal,
                op.DESCRIBE, op.READ, op.WRITE, op.DESCRIBE_CONFIGS,
            )  # fmt: skip
            for shared in self.shared_topics:
                allow(ResourceType.TOPIC, shared, literal, t.principal, op.DESCRIBE, op.READ)
        return bindings

    def grant(self, broker: Any, timeout: float = 60.0) -> None:
        """Create the ACLs on a running broker (through its PLAINTEXT listener, as the platform)."""
        admin = broker.admin()
        for future in admin.create_acls(self.acl_bindings(), request_timeout=timeout).values():
            future.result(timeout=timeout)

    def create_topics(self, broker: Any) -> None:
        """The topics the platform owns: the shared ones (3 partitions) and each team's handover topic (one
        partition, the settings of `handover_topic_settings.REQUIRED`), so no team needs Create on them. Existing
        ones are kept."""
        from confluent_kafka import KafkaError, KafkaException

        from replay_worker.protocol.handover_topic_settings import REQUIRED

        wanted: list[tuple[str, int, dict[str, str]]] = [(name, 3, {}) for name in self.shared_topics]
        wanted += [(t.handover_topic(self.handover_topic), 1, dict(REQUIRED)) for t in self.tenants]
        for name, partitions, config in wanted:
            try:
                broker.create_topic(name, partitions, config)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise


#: Where a team's Kafka client settings live in its namespace (what `spec.kafka.configFrom` names).
CLIENT_SECRET = "kafka"
GROUP_PREFIXES = "reprise.io/kafka-group-prefixes"
TOPIC_PREFIXES = "reprise.io/kafka-topic-prefixes"


def namespace_manifests(tenant: Tenant) -> list[dict[str, Any]]:
    """A team's namespace, annotated with its Kafka prefixes (read by the chart's admission policy), and the
    Secret of its principal, labelled so that the operator may read it."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": tenant.name,
                "annotations": {
                    GROUP_PREFIXES: ",".join(tenant.group_prefixes),
                    TOPIC_PREFIXES: tenant.topic_prefix,
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": CLIENT_SECRET,
                "namespace": tenant.name,
                "labels": {"reprise.io/kafka-client": "true"},
            },
            "stringData": tenant.client_settings(),
        },
    ]
