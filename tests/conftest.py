"""Session fixtures for the whole suite.

The real parts are started once per session by the plugin modules below and stopped by their PIDs at the
end, also when tests fail:
- `tests.fixtures.kafka`: `kafka`, a real Kafka broker (KRaft, one node, loopback) from Maven Central jars.
- `tests.fixtures.tenants`: `tenants`, two teams (namespaces, SASL principals with prefixed ACLs, Secrets).
- `tests.fixtures.kube`: `kube`, a real etcd + kube-apiserver + kube-controller-manager + kube-scheduler,
  and a node agent that stands in for a container runtime (these machines have none); `namespace`, a fresh
  namespace per test.
- `tests.fixtures.schema_registry`: `schema_registry`, a real Apicurio Registry, started only by the tests
  that use it.
"""

pytest_plugins = [
    "tests.fixtures.termination",
    "tests.fixtures.kafka",
    "tests.fixtures.tenants",
    "tests.fixtures.kube",
    "tests.fixtures.operator",
    "tests.fixtures.spark",
    "tests.fixtures.object_store",
    "tests.fixtures.schema_registry",
]

#: The order in which `make test` hands test files to its workers: the longest first, so that the many short
#: files fill in around them at the end (longest-processing-time first; the Makefile passes
#: `--no-loadscope-reorder`, which keeps this order instead of xdist's most-tests-first). Paths not listed
#: come last, in collection order.
LONGEST_FIRST = (
    "tests/integration/operator/test_lakereplay_faults.py",
    "tests/integration/operator/test_lakereplay_e2e.py",
    "tests/integration/operator/test_jvm_handover_e2e.py",
    "tests/integration/operator/",
    "tests/integration/java/",
    "tests/integration/replay_worker/",
    # Its worker starts the schema registry first (30-60 s under load).
    "tests/integration/schema_registry/",
    "tests/integration/spark_app/",
    "tests/integration/chart/",
    "tests/unit/spark_app/",
    "tests/integration/",
)


def _rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if nodeid.startswith(prefix)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(items: list) -> None:
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: a file's tests keep their order
