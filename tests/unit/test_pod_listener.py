"""The broker's listener for the real node's pods (local_platform.kafka_broker, `pod_host`): pods on the node's
bridge cannot reach loopback, so they get a PLAINTEXT listener on the bridge's address of the host, and the
operator's Kafka aliases name it; the node agent's platform has neither."""

from __future__ import annotations

from pathlib import Path

from local_platform.kafka_broker import KafkaBroker
from local_platform.kafka_tenants import MultiTenant
from local_platform.platform import LocalPlatform


def settings(broker: KafkaBroker) -> dict[str, str]:
    broker._write_config()
    lines = broker.config_path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_pods_get_a_listener_on_the_bridge_address_advertised_as_such(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path, pod_host="10.244.7.1")
    found = settings(broker)
    pods = f"PODS://10.244.7.1:{broker.pod_port}"
    assert pods in found["listeners"].split(",") and pods in found["advertised.listeners"].split(",")
    assert "PODS:PLAINTEXT" in found["listener.security.protocol.map"].split(",")
    assert f"PLAINTEXT://127.0.0.1:{broker.port}" in found["advertised.listeners"].split(",")
    assert broker.pod_bootstrap == f"10.244.7.1:{broker.pod_port}"


def test_the_pod_listener_sits_beside_the_multi_tenant_sasl_listener(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path, multi_tenant=MultiTenant(), pod_host="10.244.7.1")
    listeners = settings(broker)["listeners"].split(",")
    assert f"SASL_PLAINTEXT://127.0.0.1:{broker.sasl_port}" in listeners
    assert f"PODS://10.244.7.1:{broker.pod_port}" in listeners


def test_without_a_real_node_there_is_no_pod_listener(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path)
    assert "PODS" not in settings(broker)["listeners"] and broker.pod_bootstrap is None


def test_the_operators_aliases_name_the_pods_address_on_the_real_node(tmp_path: Path) -> None:
    platform = LocalPlatform(tmp_path, state_file=None, node="real")
    platform.kafka = KafkaBroker(tmp_path / "kafka", pod_host=platform.real_node.node_ip)
    assert platform.kafka_bootstrap_aliases == f"*.kafka:*={platform.real_node.node_ip}:{platform.kafka.pod_port}"
    agent = LocalPlatform(tmp_path, state_file=None)
    agent.kafka = KafkaBroker(tmp_path / "kafka-agent")
    assert agent.kafka_bootstrap_aliases == f"*.kafka:*=127.0.0.1:{agent.kafka.port}"
