"""The sparkConf allow-list (`reprise_operator.api.spark_conf`): every family a tenant could use to move the
Spark driver is refused with its reason, the tuning LakeReplay users need passes, the model refuses what the
rule refuses, and the CRD carries the same list as the Python copy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from reprise_operator.api import LakeReplaySpec
from reprise_operator.api.spark_conf import (
    ALLOWED_KEYS,
    ALLOWED_PREFIXES,
    GENERAL_REASON,
    allowed,
    refusal,
    refusal_reason,
    sparkconf_rule,
)

REPO = Path(__file__).resolve().parents[3]

#: Each refused family of the brief (and of upstream's sparkconf_validator.go), with a word of its reason.
REFUSED = [
    # The namespace: spark-submit keeps the last --conf, so this one would move the driver.
    ("spark.kubernetes.namespace", "namespace"),
    # Every authenticate key: service accounts, OAuth tokens and token files, CA and client certificates.
    ("spark.kubernetes.authenticate.driver.serviceAccountName", "serviceAccount"),
    ("spark.kubernetes.authenticate.executor.serviceAccountName", "serviceAccount"),
    ("spark.kubernetes.authenticate.serviceAccountName", "serviceAccount"),
    ("spark.kubernetes.authenticate.submission.oauthTokenFile", "serviceAccount"),
    ("spark.kubernetes.authenticate.driver.oauthToken", "serviceAccount"),
    ("spark.kubernetes.authenticate.oauthTokenFile", "serviceAccount"),
    ("spark.kubernetes.authenticate.driver.mounted.caCertFile", "serviceAccount"),
    ("spark.kubernetes.authenticate.submission.clientKeyFile", "serviceAccount"),
    # The master and the submission.
    ("spark.master", "submitted"),
    ("spark.kubernetes.driver.master", "submitted"),
    ("spark.submit.deployMode", "submitted"),
    ("spark.kubernetes.context", "submitted"),
    # Images.
    ("spark.kubernetes.container.image", "spec.spark.image"),
    ("spark.kubernetes.container.image.pullPolicy", "spec.spark.image"),
    ("spark.kubernetes.container.image.pullSecrets", "spec.spark.image"),
    ("spark.kubernetes.driver.container.image", "spec.spark.image"),
    ("spark.kubernetes.executor.container.image", "spec.spark.image"),
    ("spark.container.image", "spec.spark.image"),
    # Pod templates.
    ("spark.kubernetes.driver.podTemplateFile", "pod template"),
    ("spark.kubernetes.executor.podTemplateFile", "pod template"),
    ("spark.kubernetes.driver.podTemplateContainerName", "pod template"),
    ("spark.kubernetes.executor.podTemplateContainerName", "pod template"),
    # What spark-submit would fetch.
    ("spark.jars", "fetch"),
    ("spark.jars.packages", "fetch"),
    ("spark.jars.repositories", "fetch"),
    ("spark.jars.ivySettings", "fetch"),
    ("spark.jars.excludes", "fetch"),
    ("spark.files", "fetch"),
    ("spark.archives", "fetch"),
    ("spark.pyFiles", "fetch"),
    ("spark.submit.pyFiles", "submitted"),
    ("spark.kubernetes.file.upload.path", "fetch"),
    # Code execution and the JVM's environment, also on a pinned image.
    ("spark.driver.extraClassPath", "code"),
    ("spark.executor.extraClassPath", "code"),
    ("spark.driver.extraJavaOptions", "code"),
    ("spark.executor.extraJavaOptions", "code"),
    ("spark.driver.defaultJavaOptions", "code"),
    ("spark.driver.extraLibraryPath", "code"),
    ("spark.executor.extraLibraryPath", "code"),
    ("spark.executorEnv.LD_PRELOAD", "code"),
    ("spark.kubernetes.driverEnv.JAVA_TOOL_OPTIONS", "code"),
    ("spark.plugins", "code"),
    ("spark.extraListeners", "code"),
    ("spark.python.daemon.module", "code"),
    # Fields of the spec, and Reprise's own settings.
    ("spark.hadoop.fs.s3a.endpoint", "hadoopConf"),
    ("spark.driver.memory", "spec.spark.driver"),
    ("spark.executor.instances", "spec.spark.executor"),
    ("spark.task.maxFailures", "twice"),
    ("spark.speculation", "twice"),
    # Every other Kubernetes key of the submission.
    ("spark.kubernetes.driver.volumes.hostPath.root.mount.path", "Kubernetes settings"),
    ("spark.kubernetes.driver.secrets.other", "Kubernetes settings"),
    ("spark.kubernetes.driver.pod.name", "Kubernetes settings"),
    ("spark.kubernetes.driver.label.app", "Kubernetes settings"),
    ("spark.kubernetes.executor.annotation.x", "Kubernetes settings"),
    # Anything nobody listed.
    ("spark.redaction.regex", GENERAL_REASON),
    ("spark.authenticate", GENERAL_REASON),
    ("spark.app.name", GENERAL_REASON),
    ("fs.s3a.endpoint", GENERAL_REASON),
    # Not quite an allowed key: case, white space, `=` and bare prefixes do not pass.
    ("Spark.Kubernetes.Namespace", GENERAL_REASON),
    ("SPARK.SQL.SHUFFLE.PARTITIONS", GENERAL_REASON),
    (" spark.sql.shuffle.partitions", GENERAL_REASON),
    ("spark.sql.x=1 spark.kubernetes.namespace", GENERAL_REASON),
    ("spark.sql.x\nspark.kubernetes.namespace", GENERAL_REASON),
    ("spark.sql.", GENERAL_REASON),
    ("spark.default.parallelism.x", GENERAL_REASON),
]

#: What LakeReplay users legitimately set.
ALLOWED = [
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled",
    "spark.sql.adaptive.coalescePartitions.enabled",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.session.timeZone",
    "spark.sql.extensions",
    "spark.sql.catalog.spark_catalog",
    "spark.sql.catalog.lake.io-impl",
    "spark.sql.parquet.enableVectorizedReader",
    "spark.shuffle.compress",
    "spark.shuffle.file.buffer",
    "spark.reducer.maxSizeInFlight",
    "spark.io.compression.codec",
    "spark.memory.fraction",
    "spark.memory.offHeap.enabled",
    "spark.serializer",
    "spark.kryoserializer.buffer.max",
    "spark.kryo.registrationRequired",
    "spark.default.parallelism",
    "spark.network.timeout",
    "spark.executor.heartbeatInterval",
    "spark.rpc.askTimeout",
    "spark.driver.memoryOverhead",
    "spark.executor.memoryOverhead",
    "spark.executor.memoryOverheadFactor",
    "spark.driver.maxResultSize",
    "spark.dynamicAllocation.enabled",
    "spark.dynamicAllocation.maxExecutors",
    "spark.eventLog.enabled",
    "spark.eventLog.dir",
    "spark.kubernetes.executor.request.cores",
    "spark.kubernetes.driver.limit.cores",
]


@pytest.mark.parametrize("key,why", REFUSED, ids=[k for k, _ in REFUSED])
def test_each_refused_family_is_refused_with_its_reason(key: str, why: str) -> None:
    assert not allowed(key)
    reason = refusal_reason(key)
    assert reason is not None and why in reason, reason


@pytest.mark.parametrize("key", ALLOWED)
def test_the_tuning_lakereplay_users_need_passes(key: str) -> None:
    assert allowed(key) and refusal_reason(key) is None
    assert refusal({key: "1"}) is None


def test_the_message_names_the_key_and_the_field_and_never_the_value() -> None:
    message = refusal({"spark.sql.shuffle.partitions": "8", "spark.kubernetes.namespace": "kube-system"})
    assert message is not None
    assert message.startswith('spec.spark.sparkConf["spark.kubernetes.namespace"]: not allowed: ')
    assert "kube-system" not in message
    assert "docs/lakereplay.md" in message
    assert refusal(None) is None and refusal({}) is None


def test_every_kubernetes_key_but_the_cores_ones_is_refused() -> None:
    kubernetes = [k for k in ALLOWED_KEYS if k.startswith("spark.kubernetes.")]
    assert sorted(kubernetes) == sorted(
        f"spark.kubernetes.{role}.{kind}.cores" for role in ("driver", "executor") for kind in ("request", "limit")
    )
    assert not any(p.startswith("spark.kubernetes") for p in ALLOWED_PREFIXES)


@pytest.mark.parametrize(
    "key", ["spark.kubernetes.namespace", "spark.kubernetes.authenticate.driver.serviceAccountName", "spark.jars"]
)
def test_the_model_refuses_what_the_rule_refuses_naming_the_key(key: str) -> None:
    body = yaml.safe_load((REPO / "examples" / "lakereplay.yaml").read_text())["spec"]
    body["spark"]["sparkConf"] = {"spark.sql.shuffle.partitions": "8", key: "x"}
    with pytest.raises(ValidationError) as error:
        LakeReplaySpec.model_validate(body)
    assert f'spec.spark.sparkConf["{key}"]: not allowed' in str(error.value)


def test_the_crd_carries_the_same_list_in_its_rule_and_message() -> None:
    crd = yaml.safe_load((REPO / "crds" / "reprise.io_lakereplays.yaml").read_text())
    spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["spark"]
    rules = spark["properties"]["sparkConf"]["x-kubernetes-validations"]
    assert sparkconf_rule() in rules
    rule = sparkconf_rule()
    for key in ALLOWED_KEYS:
        assert f"'{key}'" in rule["rule"] and f"'{key}'" in rule["messageExpression"]
    assert rule["messageExpression"].startswith("'spec.spark.sparkConf[\"' + self.filter(k, !")


def test_the_walkthrough_lists_every_allowed_key_and_prefix() -> None:
    text = (REPO / "docs" / "lakereplay.md").read_text()
    assert "## sparkConf: the keys a LakeReplay may set" in text
    assert "v2.5.2" in text and "sparkconf_validator.go" in text
    for key in ALLOWED_KEYS:
        assert f"`{key}`" in text, key
    for prefix in ALLOWED_PREFIXES:
        assert f"`{prefix}*`" in text, prefix
