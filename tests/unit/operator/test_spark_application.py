"""The SparkApplication of a LakeReplay as data: the manifest against the real CRD's shape and the job's own
command line, and what each `applicationState.state` means for the LakeReplay."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from reprise_operator.api import LakeReplaySpec
from reprise_operator.kinds.lakereplay.spark_application import (
    FORBIDDEN_SPARK_SETTING,
    KAFKA_SETTINGS_DIR,
    MAIN_APPLICATION_FILE,
    SCHEMA_DIR,
    SPARK_IMAGE_PINNED,
    SPARK_SERVICE_ACCOUNT_PINNED,
    DRIVER_FAILED_STATES,
    SPARK_UID,
    SparkDefaults,
    SparkSpecRefused,
    application_name,
    backfill_topic_name,
    connector_jars,
    driver_report,
    driver_selector,
    error_summary,
    job_arguments,
    progress_uri,
    rfc3339_exact,
    seam_ms,
    spark_application_manifest,
    spark_outcome,
    spark_state,
    state_reason,
)
from reprise_operator.rules.workloads import Owner
from spark_app.settings import parse_settings

REPO = Path(__file__).resolve().parents[3]
OWNER = Owner("reprise.io/v1alpha1", "LakeReplay", "accounts-2025h1", "3f2a9c1e-0000-4000-8000-000000000000")
LABELS = {"reprise.io/replay": "accounts-2025h1"}


def example_spec(name: str = "lakereplay.yaml") -> LakeReplaySpec:
    return LakeReplaySpec.model_validate(yaml.safe_load((REPO / "examples" / name).read_text())["spec"])


def manifest(spec: LakeReplaySpec | None = None, **kwargs) -> dict:
    spec = spec or example_spec()
    return spark_application_manifest(
        owner=OWNER,
        name=application_name(OWNER.name),
        namespace="accounts",
        spec=spec,
        topic="users.backfill.2025h1",
        progress="s3a://lake/events/_reprise/progress/accounts/x",
        labels=LABELS,
        **kwargs,
    )


def test_manifest_is_a_python_cluster_application_of_the_image_owned_by_the_lakereplay():
    app = manifest()
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    assert app["metadata"]["name"] == "accounts-2025h1-spark"
    assert app["metadata"]["ownerReferences"] == [OWNER.reference()]
    assert app["metadata"]["labels"] == LABELS
    spec = app["spec"]
    assert (spec["type"], spec["mode"], spec["pythonVersion"]) == ("Python", "cluster", "3")
    assert (spec["image"], spec["sparkVersion"]) == ("registry.example.com/reprise-spark:4.1.1", "4.1.1")
    assert spec["mainApplicationFile"] == MAIN_APPLICATION_FILE == "local:///opt/reprise/spark_app/main.py"
    assert spec["suspend"] is False


def test_manifest_fits_the_real_crds_required_fields_and_enums():
    # The CRD's required fields and enums (kubeflow/spark-operator v2 api/v1beta2), checked as data here;
    # the integration tests create the manifest on an API server that has the real CRD.
    spec = manifest()["spec"]
    for required in ("driver", "executor", "mainApplicationFile", "sparkVersion", "type"):
        assert required in spec
    assert spec["restartPolicy"]["type"] in ("Never", "Always", "OnFailure")
    assert spec["deps"]["jars"] and all(isinstance(j, str) for j in spec["deps"]["jars"])
    for side in ("driver", "executor"):
        assert isinstance(spec[side]["cores"], int) and isinstance(spec[side]["memory"], str)


def test_the_jars_are_the_kafka_connector_the_image_bakes_in_at_the_spark_version():
    assert (
        manifest()["spec"]["deps"]["jars"]
        == connector_jars("4.1.1")
        == [
            "local:///opt/spark/jars/spark-sql-kafka-0-10_2.13-4.1.1.jar",
            "local:///opt/spark/jars/spark-token-provider-kafka-0-10_2.13-4.1.1.jar",
        ]
    )
    assert manifest(defaults=SparkDefaults(jars=("local:///opt/extra/a.jar",)))["spec"]["deps"]["jars"] == [
        "local:///opt/extra/a.jar"
    ]


def test_the_dockerfile_puts_the_job_and_the_jars_where_the_manifest_looks():
    dockerfile = (REPO / "spark_app" / "Dockerfile").read_text()
    assert "COPY spark_app/ /opt/reprise/spark_app/" in dockerfile
    assert (
        "/opt/spark/jars/" in dockerfile and "spark-token-provider-kafka-0-10_2.13-${SPARK_VERSION}.jar" in dockerfile
    )
    assert "local:///opt/reprise/spark_app/main.py" in dockerfile


def test_operator_defaults_fill_what_the_spec_leaves_out():
    spec = example_spec()
    bare = spec.model_copy(update={"spark": spec.spark.model_copy(update={"image": None, "spark_version": None})})
    bare.spark.driver.service_account = None
    app = manifest(
        bare, defaults=SparkDefaults(image="reprise-spark:dev", spark_version="4.1.4", service_account="spark-sa")
    )
    assert (app["spec"]["image"], app["spec"]["sparkVersion"]) == ("reprise-spark:dev", "4.1.4")
    assert app["spec"]["driver"]["serviceAccount"] == "spark-sa"
    assert app["spec"]["deps"]["jars"] == connector_jars("4.1.4")
    assert "serviceAccount" not in manifest(bare)["spec"]["driver"]


def test_driver_and_executor_resources_come_from_the_spec():
    spec = manifest()["spec"]
    assert (spec["driver"]["cores"], spec["driver"]["memory"], spec["driver"]["serviceAccount"]) == (1, "2g", "spark")
    assert (spec["executor"]["instances"], spec["executor"]["cores"], spec["executor"]["memory"]) == (4, 2, "4g")


def test_pods_run_restricted_as_the_images_numeric_non_root_user():
    spec = manifest()["spec"]
    for side in ("driver", "executor"):
        pod, container = spec[side]["podSecurityContext"], spec[side]["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == SPARK_UID == 185
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["allowPrivilegeEscalation"] is False
        assert container["capabilities"] == {"drop": ["ALL"]}
        assert container["runAsNonRoot"] is True and container["runAsUser"] == SPARK_UID
        assert spec[side]["labels"] == LABELS


def test_retries_on_failure_with_intervals_the_controller_needs():
    policy = manifest()["spec"]["restartPolicy"]
    assert policy["type"] == "OnFailure"
    # The controller never retries without an interval (util.TimeUntilNextRetryDue).
    assert (policy["onFailureRetries"], policy["onFailureRetryInterval"]) == (3, 10)
    assert policy["onSubmissionFailureRetries"] >= 1 and policy["onSubmissionFailureRetryInterval"] >= 1


def test_spec_retries_set_the_drivers_restart_policy():
    raw = yaml.safe_load((REPO / "examples" / "lakereplay.yaml").read_text())["spec"]
    raw["spark"]["retries"] = {"onFailure": 0, "intervalSeconds": 2}
    policy = manifest(LakeReplaySpec.model_validate(raw))["spec"]["restartPolicy"]
    assert (policy["type"], policy["onFailureRetries"], policy["onFailureRetryInterval"]) == ("OnFailure", 0, 2)


def test_credentials_reach_the_pods_only_as_mounted_secrets_and_env_from():
    spec = manifest()["spec"]
    driver, executor = spec["driver"], spec["executor"]
    assert driver["secrets"] == [{"name": "accounts-kafka-client", "path": KAFKA_SETTINGS_DIR, "secretType": "Generic"}]
    assert driver["configMaps"] == [{"name": "users-schema", "path": SCHEMA_DIR}]
    for side in (driver, executor):
        assert side["envFrom"] == [{"secretRef": {"name": "lake-readonly-credentials"}}]
    assert "secrets" not in executor  # the driver reads the Kafka settings and hands Spark the options
    assert spec["hadoopConf"] == {"fs.s3a.endpoint": "https://s3.eu-central-1.amazonaws.com"}


def test_arguments_are_exactly_what_the_jobs_command_line_reads():
    app = manifest()
    settings = parse_settings(app["spec"]["arguments"])
    spec = example_spec()
    assert settings.source == "s3a://lake/events/users"
    assert (settings.format, settings.partition_column) == ("parquet", "day")
    assert (settings.timestamp_column, settings.key_column) == ("event_time", "user_id")
    assert settings.start == datetime(2025, 1, 1, tzinfo=timezone.utc) == spec.source.from_
    assert settings.end == datetime(2025, 7, 1, tzinfo=timezone.utc) == spec.source.to
    assert settings.filter == "event_type IN ('UserCreated', 'UserUpdated')"
    assert settings.latest_schema == f"{SCHEMA_DIR}/schema.json"
    assert settings.renames == (("userName", "username"),)
    assert settings.defaults == (("locale", '"en"'),)
    assert (settings.bootstrap_servers, settings.topic) == ("kafka-bootstrap.kafka:9092", "users.backfill.2025h1")
    assert settings.kafka_settings == KAFKA_SETTINGS_DIR
    assert settings.max_records_per_second == 50000
    assert settings.progress == "s3a://lake/events/_reprise/progress/accounts/x"
    assert settings.validate is True


def test_arguments_leave_out_what_the_spec_does_not_say():
    raw = yaml.safe_load((REPO / "examples" / "lakereplay-then-reconsume.yaml").read_text())["spec"]
    del raw["kafka"]["configFrom"]
    raw["spark"].pop("maxRecordsPerSecond")
    raw["source"].pop("schema")
    spec = LakeReplaySpec.model_validate(raw)
    args = job_arguments(spec, topic="t", progress="file:///p")
    for flag in (
        "--from",
        "--filter",
        "--latest-schema",
        "--rename",
        "--default",
        "--kafka-settings",
        "--max-records-per-second",
    ):
        assert flag not in args
    settings = parse_settings(args)
    assert (settings.start, settings.filter, settings.kafka_settings, settings.max_records_per_second) == (
        None,
        None,
        None,
        0,
    )


def test_the_time_range_keeps_its_full_precision():
    assert rfc3339_exact(datetime(2024, 1, 5, tzinfo=timezone.utc)) == "2024-01-05T00:00:00Z"
    assert rfc3339_exact(datetime(2024, 1, 5, 0, 0, 0, 500, tzinfo=timezone.utc)) == "2024-01-05T00:00:00.000500Z"
    spec = example_spec().model_copy(deep=True)
    spec.source.to = datetime(2025, 7, 1, 0, 0, 0, 1, tzinfo=timezone.utc)
    assert parse_settings(job_arguments(spec, topic="t", progress="file:///p")).end == spec.source.to


def test_the_seam_in_kafka_milliseconds_rounds_up():
    assert seam_ms(datetime(2024, 1, 5, tzinfo=timezone.utc)) == 1_704_412_800_000
    # 0.5 ms past: a record at .000 is before `to` (the lake's), the first at/after `to` is at .001.
    assert seam_ms(datetime(2024, 1, 5, 0, 0, 0, 500, tzinfo=timezone.utc)) == 1_704_412_800_001
    assert seam_ms(datetime(2024, 1, 5, 0, 0, 0, 1000, tzinfo=timezone.utc)) == 1_704_412_800_001


def test_names_fit_kubernetes_and_kafka():
    assert application_name("a" * 63).__len__() <= 63 - len("-driver")
    spec = example_spec()
    assert backfill_topic_name("accounts", "accounts-2025h1", spec) == "users.backfill.2025h1"
    unnamed = spec.model_copy(update={"backfill_topic": spec.backfill_topic.model_copy(update={"name": None})})
    assert backfill_topic_name("accounts", "lr", unnamed) == "accounts.lr.reprise-backfill"


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("s3a://lake/events/users/", "s3a://lake/events/_reprise/progress/ns/lr-3f2a9c1e"),
        ("s3a://lake/users", "s3a://lake/_reprise/progress/ns/lr-3f2a9c1e"),
        ("file:///tmp/x/events", "file:///tmp/x/_reprise/progress/ns/lr-3f2a9c1e"),
    ],
)
def test_progress_is_beside_the_table_and_unique_per_resource(uri, expected):
    assert progress_uri(uri, "ns", "lr", OWNER.uid) == expected
    assert progress_uri(uri, "ns", "lr", OWNER.uid, base="s3a://state/lake/") == "s3a://state/lake/ns/lr-3f2a9c1e"


def test_manifest_does_not_change_the_spec_it_reads():
    spec = example_spec()
    before = copy.deepcopy(spec.model_dump())
    manifest(spec)
    assert spec.model_dump() == before


# ------------------------------------------------------------------------------------------ states


def app(state: str | None, error: str = "", attempts: int | None = None) -> dict:
    status: dict = {}
    if state is not None:
        status["applicationState"] = {"state": state, **({"errorMessage": error} if error else {})}
    if attempts is not None:
        status["submissionAttempts"] = attempts
    return {"metadata": {"name": "lr-spark"}, "status": status}


@pytest.mark.parametrize(
    "state",
    [
        "SUBMITTED",
        "RUNNING",
        "PENDING_RERUN",
        "SUCCEEDING",
        "FAILING",
        "INVALIDATING",
        "SUSPENDING",
        "SUSPENDED",
        "RESUMING",
        "UNKNOWN",
    ],
)
def test_states_on_the_way_keep_running_and_are_not_produced(state):
    outcome = spark_outcome(app(state))
    assert (outcome.state, outcome.produced, outcome.failed) == (state, False, False)
    assert outcome.reason == state_reason(state) and outcome.reason.isalnum() and outcome.reason[0].isupper()
    assert state in outcome.message and "lr-spark" in outcome.message


def test_completed_is_produced():
    outcome = spark_outcome(app("COMPLETED", attempts=2))
    assert (outcome.produced, outcome.failed, outcome.reason, outcome.attempts) == (True, False, "SparkCompleted", 2)


@pytest.mark.parametrize("state, reason", [("FAILED", "SparkFailed"), ("SUBMISSION_FAILED", "SparkSubmissionFailed")])
def test_failed_states_fail_with_the_drivers_message(state, reason):
    outcome = spark_outcome(app(state, "driver container failed with ExitCode: 3, Reason: Error", attempts=4))
    assert (outcome.produced, outcome.failed, outcome.reason) == (False, True, reason)
    assert outcome.message == (
        f"SparkApplication lr-spark is {state} after 4 submission attempt(s): "
        "driver container failed with ExitCode: 3, Reason: Error"
    )


def test_a_failed_submission_keeps_the_exception_and_its_cause_of_spark_submits_stderr():
    # What the real controller writes when spark-submit fails: its whole stderr, stack trace included.
    stderr = (
        "failed to submit spark application: failed to run spark-submit: WARNING: Using incubator modules\n"
        "26/11/23 22:35:56 INFO SparkKubernetesClientFactory: Auto-configuring K8S client\n"
        'Exception in thread "main" io.fabric8.kubernetes.client.KubernetesClientException: An error has occurred.\n'
        + "\tat io.fabric8.Foo.bar(Foo.java:1)\n" * 200
        + "Caused by: java.io.IOException: Invalid DER: object is not integer\n\t... 17 more\n"
    )
    summary = error_summary(stderr)
    assert summary == (
        "failed to submit spark application: failed to run spark-submit: WARNING: Using incubator modules"
        ' ... Exception in thread "main" io.fabric8.kubernetes.client.KubernetesClientException: An error'
        " has occurred. ... Caused by: java.io.IOException: Invalid DER: object is not integer"
    )
    assert spark_outcome(app("SUBMISSION_FAILED", stderr, attempts=4)).message.endswith(summary)
    assert error_summary("driver container failed with ExitCode: 3, Reason: Error") == (
        "driver container failed with ExitCode: 3, Reason: Error"
    )


def test_a_new_application_waits_for_the_controller():
    for status in (None, ""):
        outcome = spark_outcome(app(status))
        assert (outcome.state, outcome.reason, outcome.produced, outcome.failed) == ("", "SparkNew", False, False)
    assert spark_outcome(None).reason == "SparkApplicationMissing"


def test_state_reasons_are_one_camel_case_word():
    assert state_reason("PENDING_RERUN") == "SparkPendingRerun"
    assert state_reason("SUBMISSION_FAILED") == "SparkSubmissionFailed"
    assert state_reason("") == "SparkNew"


def test_a_failed_task_fails_the_application_so_the_retry_resumes_exactly():
    # A task retried inside one run could write its records twice; the job's resume path is exact.
    assert manifest()["spec"]["sparkConf"]["spark.task.maxFailures"] == "1"


# ------------------------------------------------------------------------------------------ what may be asked


def with_spark(spec: LakeReplaySpec, **changes) -> LakeReplaySpec:
    """spec with spec.spark changed past the model's validation, as a resource admitted under an older CRD is."""
    return spec.model_copy(update={"spark": spec.spark.model_copy(update=changes)})


@pytest.mark.parametrize(
    "key",
    [
        "spark.kubernetes.namespace",
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "spark.kubernetes.driver.podTemplateFile",
        "spark.driver.extraJavaOptions",
    ],
)
def test_the_builder_refuses_a_sparkconf_key_off_the_allow_list_that_got_past_the_model(key):
    spec = with_spark(example_spec(), spark_conf={"spark.sql.shuffle.partitions": "8", key: "kube-system"})
    with pytest.raises(SparkSpecRefused) as refused:
        manifest(spec)
    assert refused.value.reason == FORBIDDEN_SPARK_SETTING
    assert refused.value.message.startswith(f'spec.spark.sparkConf["{key}"]: not allowed: ')
    assert "kube-system" not in refused.value.message, "never the value"


def test_reprises_own_spark_setting_wins_over_the_spec():
    spec = with_spark(example_spec(), spark_conf={"spark.sql.shuffle.partitions": "8"})
    conf = manifest(spec)["spec"]["sparkConf"]
    assert conf == {"spark.sql.shuffle.partitions": "8", "spark.task.maxFailures": "1"}


def test_a_pinned_image_refuses_another_image_and_takes_its_own_or_none():
    pinned = SparkDefaults(image="registry.local/reprise-spark:1", allow_image_override=False)
    with pytest.raises(SparkSpecRefused) as refused:
        manifest(with_spark(example_spec(), image="attacker/spark:latest"), defaults=pinned)
    assert refused.value.reason == SPARK_IMAGE_PINNED
    assert refused.value.message.startswith("spec.spark.image: this platform pins the Spark image")
    assert "operator.spark.allowImageOverride: false" in refused.value.message
    for image in (None, "registry.local/reprise-spark:1"):
        app = manifest(with_spark(example_spec(), image=image), defaults=pinned)
        assert app["spec"]["image"] == "registry.local/reprise-spark:1"
    free = manifest(with_spark(example_spec(), image="attacker/spark:latest"))
    assert free["spec"]["image"] == "attacker/spark:latest", "unpinned (the default), the spec's image is used"


def test_a_pinned_service_account_refuses_another_account_and_takes_its_own_or_none():
    spec = example_spec()
    assert spec.spark.driver.service_account == "spark"
    pinned = SparkDefaults(service_account="reprise-spark", allow_service_account_override=False)
    with pytest.raises(SparkSpecRefused) as refused:
        manifest(spec, defaults=pinned)
    assert refused.value.reason == SPARK_SERVICE_ACCOUNT_PINNED
    assert refused.value.message.startswith("spec.spark.driver.serviceAccount: this platform pins")
    assert "operator.spark.allowServiceAccountOverride: false" in refused.value.message
    own = spec.model_copy(deep=True)
    own.spark.driver.service_account = None
    assert manifest(own, defaults=pinned)["spec"]["driver"]["serviceAccount"] == "reprise-spark"
    own.spark.driver.service_account = "reprise-spark"
    assert manifest(own, defaults=pinned)["spec"]["driver"]["serviceAccount"] == "reprise-spark"
    namespace_default = SparkDefaults(allow_service_account_override=False)
    with pytest.raises(SparkSpecRefused, match="the namespace's default ServiceAccount"):
        manifest(spec, defaults=namespace_default)
    own.spark.driver.service_account = None
    assert "serviceAccount" not in manifest(own, defaults=namespace_default)["spec"]["driver"]


def test_a_failed_driver_adds_its_root_cause_and_where_its_log_is():
    """The controller says only "driver container failed with ExitCode: 1"; the driver pod says why (issue 32)."""
    cause = "java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found"
    driver_pod = {
        "metadata": {"name": "lr-spark-driver"},
        "status": {
            "containerStatuses": [
                {
                    "name": "spark-kubernetes-driver",
                    "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": cause}},
                }
            ]
        },
    }
    report = driver_report("shop", [driver_pod])
    outcome = spark_outcome(app("FAILED", "driver container failed with ExitCode: 1, Reason: Error", 4), report)
    assert outcome.message == (
        "SparkApplication lr-spark is FAILED after 4 submission attempt(s): driver container failed with "
        f"ExitCode: 1, Reason: Error; pod lr-spark-driver container spark-kubernetes-driver is Error: {cause}; "
        "its log: kubectl logs -n shop lr-spark-driver -c spark-kubernetes-driver"
    )
    assert driver_report("shop", []) == ""
    assert (
        spark_state(app("FAILING")) in DRIVER_FAILED_STATES and spark_state(app("RUNNING")) not in DRIVER_FAILED_STATES
    )
    assert driver_selector("lr-spark") == "sparkoperator.k8s.io/app-name=lr-spark,spark-role=driver"


def spec_with_source(**source) -> LakeReplaySpec:
    raw = yaml.safe_load((REPO / "examples" / "lakereplay.yaml").read_text())["spec"]
    raw["source"].update(source)
    return LakeReplaySpec.model_validate(raw)


def test_s3_settings_become_hadoop_conf_and_its_credentials_secret_key_references():
    spec = spec_with_source(
        s3={
            "endpoint": "http://s3proxy.storage:9400",
            "region": "us-east-1",
            "pathStyleAccess": True,
            "credentialsSecretRef": {"name": "lake-s3", "secretAccessKeyKey": "secret"},
        }
    )
    app = manifest(spec)["spec"]
    assert app["hadoopConf"] == {
        "fs.s3a.endpoint": "http://s3proxy.storage:9400",  # the typed field wins over spark.hadoopConf's
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
    }
    for side in (app["driver"], app["executor"]):
        assert side["env"] == [
            {
                "name": "AWS_ACCESS_KEY_ID",
                "valueFrom": {"secretKeyRef": {"name": "lake-s3", "key": "AWS_ACCESS_KEY_ID"}},
            },
            {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "lake-s3", "key": "secret"}}},
        ]


def test_without_a_credentials_secret_the_pods_keep_their_own_aws_identity():
    app = manifest(spec_with_source(s3={"endpoint": "https://s3.example.com"}))["spec"]
    assert "env" not in app["driver"]
    assert app["hadoopConf"]["fs.s3a.connection.ssl.enabled"] == "true"
    assert "fs.s3a.aws.credentials.provider" not in app["hadoopConf"]


def test_as_of_reaches_the_job_as_a_version_or_a_time():
    by_version = parse_settings(manifest(spec_with_source(format="delta", asOf={"version": 3}))["spec"]["arguments"])
    assert (by_version.format, by_version.as_of_version, by_version.as_of_timestamp) == ("delta", 3, None)
    at = parse_settings(
        manifest(spec_with_source(format="iceberg", asOf={"timestamp": "2025-03-01T12:00:00.5Z"}))["spec"]["arguments"]
    )
    assert (at.as_of_version, at.as_of_timestamp) == (None, datetime(2025, 3, 1, 12, 0, 0, 500000, tzinfo=timezone.utc))


def test_an_avro_source_reaches_the_job_with_its_reader_schema():
    settings = parse_settings(manifest(spec_with_source(format="avro"))["spec"]["arguments"])
    assert (settings.format, settings.latest_schema) == ("avro", f"{SCHEMA_DIR}/schema.json")
