"""The multi-tenant form of the local broker (local_platform.kafka_tenants): what each team's principal is granted."""

from __future__ import annotations

from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from local_platform.kafka_tenants import HANDOVER_TOPIC, SHARED_TOPIC, MultiTenant


def grants(principal: str) -> set[tuple[str, str, str, str]]:
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)
        for b in MultiTenant().acl_bindings()
        if b.principal == principal
    }


def test_a_team_is_granted_its_own_prefixes_the_handover_topic_and_read_on_the_shared_topic_only() -> None:
    a = grants("User:team-a")
    names = {name for _, name, _, _ in a}
    assert names == {
        "team-a.",
        "reprise.team-a.",
        "reprise-bootstrap-team-a/",
        "reprise-forward-team-a/",
        "reprise.handover.team-a",
        SHARED_TOPIC,
    }
    assert not any("team-b" in name for name in names)
    assert {op for kind, name, _, op in a if name == SHARED_TOPIC} == {"DESCRIBE", "READ"}
    # Its own handover topic, made by the platform: used, never created, altered or deleted (review C2.1, M3).
    own = {op for kind, name, _, op in a if name == HANDOVER_TOPIC.replace("{namespace}", "team-a")}
    assert own == {"DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS"}
    assert ("GROUP", "reprise.team-a.", "PREFIXED", "DELETE") in a
    # Every team name is a prefix with a dot after it: team-a's grants never reach a namespace team-a-prod.
    assert all(pattern == ResourcePatternType.LITERAL.name or name.endswith((".", "/")) for _, name, pattern, _ in a)
    assert ResourceType.BROKER.name not in {kind for kind, _, _, _ in a}  # the cluster resource
    assert AclOperation.ALTER.name not in {op for _, _, _, op in a}


def test_the_broker_settings_add_a_sasl_listener_and_deny_what_no_acl_allows() -> None:
    settings = MultiTenant().server_properties(29092)
    assert settings["sasl_listener"] == ",SASL_PLAINTEXT://127.0.0.1:29092"
    text = settings["multi_tenant"]
    assert "allow.everyone.if.no.acl.found=false" in text
    assert "super.users=User:ANONYMOUS;User:admin" in text
    assert 'user_team-a="team-a-password"' in text and 'user_team-b="team-b-password"' in text
