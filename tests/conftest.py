"""Session fixtures for the whole suite.

The real parts are started once per session by the plugin modules below and stopped by their PIDs at the
end, also when tests fail:
- `tests.fixtures.kafka`: `kafka`, a real Kafka broker (KRaft, one node, loopback) from Maven Central jars.
- `tests.fixtures.kube`: `kube`, a real etcd + kube-apiserver + kube-controller-manager + kube-scheduler,
  and a node agent that stands in for a container runtime (these machines have none); `namespace`, a fresh
  namespace per test.
"""

pytest_plugins = ["tests.fixtures.kafka", "tests.fixtures.kube", "tests.fixtures.operator", "tests.fixtures.spark"]
