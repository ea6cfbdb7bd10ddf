"""Finding H1 of the security review, with the real Spark operator: a LakeReplay's `spec.spark.sparkConf` cannot
move the Spark driver into another namespace or give it another ServiceAccount.

The local platform runs kubeflow spark-operator v2.5.0 (tests/fixtures/spark.py), whose webhook does not check
sparkConf, and whose controller passes it to spark-submit after its own `--conf spark.kubernetes.namespace`:
spark-submit keeps the last value. So the only guard is Reprise's: the CRD's allow-list refuses the keys at
admission, and the operator refuses them again for a LakeReplay admitted under an older CRD.

Each test fails, against a CRD and an operator without the allow-list, with what the attack did there: the
SparkApplication Reprise made carries the key, and the controller's spark-submit created (or tried to create)
the driver pod where the key said, or ran it as the ServiceAccount the key named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from local_platform.admission_webhook import CONFIGURATION as WEBHOOK_CONFIGURATION
from tests.fixtures.kube import wait_for

from .lake_scenario import LAKE, Lake, drain_consumer, get, watch
from .lake_scenario import lake_replay as scenario_lake_replay

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
LAKEREPLAY_CRD = REPO / "crds" / "reprise.io_lakereplays.yaml"
#: A ServiceAccount the platform did not give to Spark (in a real cluster: one with wide rights).
POWERFUL = "powerful"
NAMESPACE_KEY = "spark.kubernetes.namespace"
ACCOUNT_KEY = "spark.kubernetes.authenticate.driver.serviceAccountName"


def service_account(kube, namespace: str, name: str) -> None:
    kube.kubectl("create", "serviceaccount", name, "-n", namespace)


@pytest.fixture
def other_namespace(kube, namespace) -> Iterator[str]:
    """Another team's namespace, with a ServiceAccount the attack names."""
    other = f"{namespace}-victim"
    kube.kubectl("create", "namespace", other)
    try:
        service_account(kube, other, POWERFUL)
        yield other
    finally:
        kube.kubectl("delete", "namespace", other, "--wait=false", "--ignore-not-found", check=False)


def lake_replay(name: str, bootstrap: str, spark_version: str, spark_conf: dict[str, str], sink: Path) -> dict:
    """A LakeReplay that reaches spark-submit (lake_scenario's, so it follows the kind's changes): no lake
    needs to exist for the driver pod to be created, so there is no schema to wait for; no driver
    ServiceAccount is named (the operator has no default), so nothing in the SparkApplication's own fields
    overrides the keys; no retries."""
    lake = Lake(f"file://{sink}/no-lake", LAKE)
    body = scenario_lake_replay(
        name, bootstrap, lake, spark_version, to="2024-01-02T00:00:00Z", consumer=drain_consumer(sink), partitions=1
    )
    body["spec"]["source"].pop("schema")
    body["spec"]["source"].pop("partitionColumn")
    spark = body["spec"]["spark"]
    spark.pop("driver")
    spark["retries"] = {"onFailure": 0}
    spark["sparkConf"] = {"spark.sql.shuffle.partitions": "2", **spark_conf}
    return body


def apply(kube, namespace: str, body: dict, *extra: str):
    return kube.kubectl("apply", "-n", namespace, *extra, "-f", "-", input=yaml.safe_dump(body), check=False)


def pods(kube, namespace: str) -> list[dict]:
    return json.loads(kube.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]


def spark_applications(kube, namespace: str) -> list[dict]:
    return json.loads(kube.kubectl("get", "sparkapplications", "-n", namespace, "-o", "json").stdout)["items"]


def what_the_attack_did(kube, namespace: str, other: str | None, name: str) -> str:
    """The attack was admitted: wait until the Spark operator acted on it, and say what it did (for the
    failure message of a run without the fix)."""
    app_name = f"{name}-spark"

    def acted() -> dict[str, Any] | None:
        app = get(kube, namespace, "sparkapplication", app_name)
        if app is None:
            lr = (get(kube, namespace, "lakereplay", name) or {}).get("status") or {}
            return {"failed": lr["conditions"]} if lr.get("phase") == "Failed" else None
        state = (app.get("status") or {}).get("applicationState") or {}
        moved = pods(kube, other) if other else []
        driver = get(kube, namespace, "pod", f"{app_name}-driver")
        if moved or driver or state.get("errorMessage"):
            return {"app": app, "state": state, "moved": moved, "driver": driver}
        return None

    seen = wait_for(acted, 300, "the Spark operator to act on the admitted LakeReplay")
    assert "failed" not in seen, f"the LakeReplay failed before it reached Spark: {json.dumps(seen['failed'])}"

    facts = [f"SparkApplication {namespace}/{app_name} carries sparkConf {seen['app']['spec'].get('sparkConf')}"]
    for pod in seen["moved"]:
        facts.append(
            f"driver pod {pod['metadata']['namespace']}/{pod['metadata']['name']} created in the OTHER namespace, "
            f"serviceAccountName {pod['spec'].get('serviceAccountName')}"
        )
    if seen["driver"]:
        facts.append(
            f"driver pod {namespace}/{app_name}-driver runs as serviceAccountName "
            f"{seen['driver']['spec'].get('serviceAccountName')}"
        )
    error = seen["state"].get("errorMessage") or ""
    if error:
        # spark-submit's own request names the namespace it created the driver pod in.
        request = next((line for line in error.splitlines() if "Failure executing" in line), error[:600])
        facts.append(f"the controller's spark-submit ({seen['state'].get('state')}): {request.strip()[:700]}")
    return "; ".join(facts)


def assert_refused_at_admission(kube, namespace: str, other: str | None, body: dict, *keys: str) -> None:
    """kubectl apply is refused, naming one of `keys` (the API server names the first refused key it meets)."""
    name = body["metadata"]["name"]
    applied = apply(kube, namespace, body)
    if applied.returncode == 0:
        pytest.fail("the API server admitted the attack: " + what_the_attack_did(kube, namespace, other, name))
    named = [k for k in keys if f'spec.spark.sparkConf["{k}"]: not allowed' in applied.stderr]
    assert named, applied.stderr
    for key in keys:
        assert body["spec"]["spark"]["sparkConf"][key] not in applied.stderr, "never a value"
    assert "docs/lakereplay.md" in applied.stderr, "the message says where the allowed keys are"
    # Refused at admission: nothing exists that any controller could act on.
    assert get(kube, namespace, "lakereplay", name) is None
    assert spark_applications(kube, namespace) == []
    if other is not None:
        assert pods(kube, other) == [], "no pod outside the LakeReplay's namespace"


def test_a_sparkconf_naming_another_namespace_is_refused_and_no_driver_runs_there(
    kube, kafka, operator, spark_operator, spark_version, namespace, other_namespace, tmp_path
):
    """The review's attack: the driver into another team's namespace, as a ServiceAccount of that namespace."""
    conf = {NAMESPACE_KEY: other_namespace, ACCOUNT_KEY: POWERFUL}
    body = lake_replay("moved", kafka.bootstrap, spark_version, conf, tmp_path)
    assert_refused_at_admission(kube, namespace, other_namespace, body, NAMESPACE_KEY, ACCOUNT_KEY)
    # Each key on its own is refused too, naming it.
    for key, value in conf.items():
        alone = lake_replay("moved", kafka.bootstrap, spark_version, {key: value}, tmp_path)
        assert_refused_at_admission(kube, namespace, other_namespace, alone, key)


def test_a_sparkconf_naming_a_service_account_is_refused_and_no_driver_runs_as_it(
    kube, kafka, operator, spark_operator, spark_version, namespace, tmp_path
):
    """In its own namespace: a ServiceAccount the platform did not give to Spark (it may pin the driver's with
    operator.spark.allowServiceAccountOverride: false, which this key would go around)."""
    service_account(kube, namespace, POWERFUL)
    body = lake_replay("renamed", kafka.bootstrap, spark_version, {ACCOUNT_KEY: POWERFUL}, tmp_path)
    assert_refused_at_admission(kube, namespace, None, body, ACCOUNT_KEY)
    assert get(kube, namespace, "pod", "renamed-spark-driver") is None


@pytest.fixture
def crd_without_the_allow_list(kube, reprise_crds, namespace, tmp_path) -> Iterator[None]:
    """The LakeReplay CRD as it was before the allow-list (its sparkConf rule left out), restored afterwards
    (and in force again before the next test runs). The operator's admission webhook also parses the spec with
    the model (and refuses the keys again), so it is set aside meanwhile: as on a cluster whose resource was
    admitted before either existed."""
    webhook = json.loads(
        kube.kubectl("get", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "-o", "json").stdout
    )
    for field in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        webhook["metadata"].pop(field, None)
    kube.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    crd = yaml.safe_load(LAKEREPLAY_CRD.read_text())
    spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["spark"]
    conf = spark["properties"]["sparkConf"]
    conf["x-kubernetes-validations"] = [r for r in conf["x-kubernetes-validations"] if "allow-list" not in r["message"]]
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(crd))
    try:
        yield
    finally:
        kube.kubectl("create", "-f", "-", input=json.dumps(webhook))
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(LAKEREPLAY_CRD))
        probe = lake_replay("probe", "kafka:9092", "4.1.4", {NAMESPACE_KEY: "elsewhere"}, tmp_path)
        wait_for(
            lambda: "not allowed" in apply(kube, namespace, probe, "--dry-run=server").stderr,
            60,
            "the committed CRD to refuse sparkConf keys again",
        )


def test_a_lakereplay_admitted_under_an_older_crd_is_refused_by_the_operator_before_spark_runs(
    kube,
    kafka,
    operator,
    spark_operator,
    spark_version,
    namespace,
    other_namespace,
    tmp_path,
    crd_without_the_allow_list,
):
    conf = {NAMESPACE_KEY: other_namespace, ACCOUNT_KEY: POWERFUL}
    body = lake_replay("older", kafka.bootstrap, spark_version, conf, tmp_path)

    # The API server takes the new schema up shortly after the CRD changed; a dry run says when.
    def admitted() -> bool:
        proc = apply(kube, namespace, body, "--dry-run=server")
        if proc.returncode != 0:  # shown if it never is: the older CRD's refusal, or another one
            raise AssertionError(proc.stderr.strip())
        return True

    wait_for(admitted, 60, "the older CRD")
    assert apply(kube, namespace, body).returncode == 0

    def settled() -> str | None:
        lr = get(kube, namespace, "lakereplay", "older") or {}
        if (lr.get("status") or {}).get("phase") == "Failed":
            return "Failed"
        return "SparkApplication" if spark_applications(kube, namespace) else None

    if wait_for(settled, 120, "the operator to refuse the LakeReplay or run it") != "Failed":
        pytest.fail("the operator ran the attack: " + what_the_attack_did(kube, namespace, other_namespace, "older"))
    status = watch(kube, namespace, "older", "Failed", 10, operator).body["status"]
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["reason"] == "InvalidSpec"
    assert f'spec.spark.sparkConf["{ACCOUNT_KEY}"]: not allowed' in failed["message"]
    assert other_namespace not in failed["message"] and POWERFUL not in failed["message"], "never a value"
    assert spark_applications(kube, namespace) == [], "no SparkApplication was made"
    assert pods(kube, other_namespace) == [], "no pod outside the LakeReplay's namespace"
