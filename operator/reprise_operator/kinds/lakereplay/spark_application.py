"""The SparkApplication of a LakeReplay, as data: the manifest Reprise creates and what its state means.

Pure, like `workloads.py`: `spark_application_manifest` builds the Kubeflow Spark Operator v1beta2
SparkApplication (a plain dict for `kube.Kube.create_owned`) and `spark_outcome` reads one back into what
the LakeReplay's conditions say. Nothing here talks to the API.

What a LakeReplay may ask of the SparkApplication is decided here too (`refuse_overrides`), and the builder
applies it itself, so no manifest with a refused setting can be built: `spec.spark.sparkConf` keys off the
allow-list (`api.spark_conf`; the CRD and the model refuse them already, this catches a resource admitted
under an older CRD), and, where the platform pins them (chart values `operator.spark.allowImageOverride` and
`allowServiceAccountOverride`), another image or driver ServiceAccount than the operator's.

The manifest runs `spark_app` (spark_app/Dockerfile: Spark with the Kafka connector in /opt/spark/jars and
the job at /opt/reprise) in cluster mode with the job's own command line (`python -m spark_app --help`,
`spark_app.settings`): every argument below is one of its flags, and a unit test parses them with the job's
parser. The latest schema and the Kafka client settings reach the driver as a mounted ConfigMap and a
mounted Secret (`driver.configMaps` / `driver.secrets`, which the Spark operator's webhook mounts), the
lake credentials as `envFrom` on driver and executors, so no credential is ever in the manifest.

Retries: `restartPolicy` OnFailure. The job records the days it wrote under `--progress` and skips them on
a retry, and leaves out records of a half-written day that are already in the topic, so a retried driver
writes no record twice (tests/integration/spark_app/test_resume.py).

States (REFERENCE.md section 3): `status.applicationState.state` has no conditions and no
observedGeneration, so Reprise translates it: SUBMITTED and RUNNING (and the controller's passing states)
keep the LakeReplay Running; COMPLETED means every record is in the backfill topic (Produced); FAILED and
SUBMISSION_FAILED, which the controller only reaches once its retries are spent, fail the LakeReplay with
the controller's error message and the driver's own account (`driver_report`): the controller only says
"driver container failed with ExitCode: 1"; the root cause (a ClassNotFoundException, a refused
credential) is in the driver pod's termination message, which the job writes (`spark_app.main`), and the
report says where to read the driver's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from replay_worker.contract import rfc3339_exact

from ...api import LakeReplaySpec
from ...api import spark_conf
from ...shared.constants import bounded_name
from ...rules.pod_failures import failing_containers, pod_failure_message
from ...rules.workloads import KAFKA_CONFIG_DIR, Owner, restricted_security

GROUP = "sparkoperator.k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "SparkApplication"
PLURAL = "sparkapplications"

#: Where spark_app/Dockerfile puts the job and Spark's jars.
MAIN_APPLICATION_FILE = "local:///opt/reprise/spark_app/main.py"
IMAGE_JARS_DIR = "/opt/spark/jars"
#: The Kafka connector artifacts the image bakes in at exactly its Spark version (its build checks both).
CONNECTOR_ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13")
#: The unprivileged user of the apache/spark images. Given as a number because the image names it `spark`,
#: and the kubelet can only verify `runAsNonRoot` against a numeric user.
SPARK_UID = 185
#: Where the driver finds the latest schema (the ConfigMap of spec.source.schema) and the Kafka settings.
SCHEMA_DIR = "/etc/reprise/schema"
KAFKA_SETTINGS_DIR = KAFKA_CONFIG_DIR
#: The real controller's retry policy for failed submissions (spec.spark.retries sets the driver's). The job is
#: resumable, so a retry only costs time.
SUBMISSION_RETRIES = {"onSubmissionFailureRetries": 3, "onSubmissionFailureRetryInterval": 20}
#: The driver pod is `<name>-driver`; keep that a DNS label.
NAME_LIMIT = 63 - len("-driver")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# status.applicationState.state values (kubeflow/spark-operator api/v1beta2 ApplicationStateType).
NEW, SUBMITTED, RUNNING, COMPLETED, FAILED = "", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED"
SUBMISSION_FAILED, PENDING_RERUN, INVALIDATING = "SUBMISSION_FAILED", "PENDING_RERUN", "INVALIDATING"
SUCCEEDING, FAILING, UNKNOWN = "SUCCEEDING", "FAILING", "UNKNOWN"
SUSPENDING, SUSPENDED, RESUMING = "SUSPENDING", "SUSPENDED", "RESUMING"
FAILED_STATES = (FAILED, SUBMISSION_FAILED)
#: States in which a driver has failed (the controller retries or gave up): its pod says why.
DRIVER_FAILED_STATES = (FAILED, SUBMISSION_FAILED, FAILING, PENDING_RERUN, UNKNOWN)
#: The driver pod of an application (the labels spark-submit and the Spark operator put on it).
DRIVER_SELECTOR = "sparkoperator.k8s.io/app-name={app},spark-role=driver"


@dataclass(frozen=True)
class SparkDefaults:
    """What a LakeReplay may leave out of `spec.spark`, from the operator's settings."""

    image: str = "ghcr.io/reprise-io/reprise-spark:0.1.0"
    spark_version: str = "4.1.4"
    service_account: str | None = None
    #: Jar URIs for `deps.jars`; None: the Kafka connector jars the image bakes in (`connector_jars`).
    jars: tuple[str, ...] | None = None
    #: Base Hadoop URI of the job's progress markers; None: next to the lake table (`progress_uri`).
    progress_base: str | None = None
    #: False: `spec.spark.image` may only name `image` (the platform pins it).
    allow_image_override: bool = True
    #: False: `spec.spark.driver.serviceAccount` may only name `service_account` (the platform pins it).
    allow_service_account_override: bool = True


#: Condition reasons of a refused spec.spark.
FORBIDDEN_SPARK_SETTING = "ForbiddenSparkSetting"
SPARK_IMAGE_PINNED = "SparkImagePinned"
SPARK_SERVICE_ACCOUNT_PINNED = "SparkServiceAccountPinned"


class SparkSpecRefused(ValueError):
    """spec.spark asks for something the platform does not allow; `reason` and `message` are its condition's,
    and the message names the field (and the chart value that decides it), never a value of sparkConf."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def refuse_overrides(spec: LakeReplaySpec, defaults: SparkDefaults) -> None:
    """SparkSpecRefused when the LakeReplay's spec.spark may not be run as it is (see the module's docstring)."""
    spark = spec.spark
    refused = spark_conf.refusal(spark.spark_conf)
    if refused is not None:
        raise SparkSpecRefused(FORBIDDEN_SPARK_SETTING, refused)
    if not defaults.allow_image_override and spark.image not in (None, defaults.image):
        raise SparkSpecRefused(
            SPARK_IMAGE_PINNED,
            f"spec.spark.image: this platform pins the Spark image to {defaults.image} (chart value "
            "operator.spark.allowImageOverride: false); leave spec.spark.image out or set it to that image",
        )
    account = spark.driver.service_account
    if not defaults.allow_service_account_override and account not in (None, defaults.service_account):
        pinned = defaults.service_account or "the namespace's default ServiceAccount"
        raise SparkSpecRefused(
            SPARK_SERVICE_ACCOUNT_PINNED,
            f"spec.spark.driver.serviceAccount: this platform pins the driver's ServiceAccount to {pinned} (chart "
            "value operator.spark.allowServiceAccountOverride: false); leave spec.spark.driver.serviceAccount out"
            + (" or set it to that account" if defaults.service_account else ""),
        )


def application_name(cr_name: str) -> str:
    return bounded_name(cr_name, "spark", limit=NAME_LIMIT)


def connector_jars(spark_version: str) -> list[str]:
    """The Kafka connector jars inside the image, as `local://` URIs (files already in the container)."""
    return [f"local://{IMAGE_JARS_DIR}/{artifact}-{spark_version}.jar" for artifact in CONNECTOR_ARTIFACTS]


def backfill_topic_name(namespace: str, cr_name: str, spec: LakeReplaySpec) -> str:
    """spec.backfillTopic.name, else `<namespace>.<name>.reprise-backfill` (Kafka allows 249 characters)."""
    return spec.backfill_topic.name or bounded_name(f"{namespace}.{cr_name}.reprise-backfill", limit=249)


def progress_uri(source_uri: str, namespace: str, cr_name: str, uid: str, base: str | None = None) -> str:
    """Where the job records the days it wrote (its retries read it back).

    Default: `_reprise/progress` beside the lake table (`s3a://lake/events/users` ->
    `s3a://lake/events/_reprise/progress/...`): storage the job can already reach, outside the table (and
    `_`-prefixed, which Spark's file index skips anyway). The uid keeps a re-created LakeReplay of the same
    name from finding an older run's markers.
    """
    leaf = f"{namespace}/{cr_name}-{uid[:8]}"
    if base:
        return f"{base.rstrip('/')}/{leaf}"
    parts = urlsplit(source_uri.rstrip("/"))
    parent = parts.path.rsplit("/", 1)[0]
    return f"{parts.scheme}://{parts.netloc}{parent}/_reprise/progress/{leaf}"


def seam_ms(to: datetime) -> int:
    """`to` in Kafka's milliseconds, rounded up: a record at or after the first millisecond >= `to` is
    exactly a record whose time is >= `to`, the ones the lake leaves out."""
    micros = (to - _EPOCH) // timedelta(microseconds=1)
    return -(-micros // 1000)


def job_arguments(spec: LakeReplaySpec, *, topic: str, progress: str) -> list[str]:
    """The job's command line (spark_app.settings) for this LakeReplay."""
    source = spec.source
    args = [
        "--source",
        source.uri,
        "--format",
        source.format.value,
        "--timestamp-column",
        source.timestamp_column,
        "--key-column",
        source.key_column,
    ]
    if source.partition_column:
        args += ["--partition-column", source.partition_column]
    if source.from_ is not None:
        args += ["--from", rfc3339_exact(source.from_)]
    args += ["--to", rfc3339_exact(source.to)]
    if source.filter:
        args += ["--filter", source.filter]
    if source.as_of is not None and source.as_of.version is not None:
        args += ["--as-of-version", str(source.as_of.version)]
    if source.as_of is not None and source.as_of.timestamp is not None:
        args += ["--as-of-timestamp", rfc3339_exact(source.as_of.timestamp)]
    if source.schema_ is not None:
        args += ["--latest-schema", f"{SCHEMA_DIR}/{source.schema_.config_map_ref.key}"]
        for old, new in sorted((source.schema_.renames or {}).items()):
            args += ["--rename", f"{old}={new}"]
        for field, value in sorted((source.schema_.defaults or {}).items()):
            args += ["--default", f"{field}={value}"]
    args += ["--bootstrap-servers", spec.kafka.bootstrap_servers, "--topic", topic]
    if spec.kafka.config_from is not None:
        args += ["--kafka-settings", KAFKA_SETTINGS_DIR]
    if spec.spark.max_records_per_second:
        args += ["--max-records-per-second", str(spec.spark.max_records_per_second)]
    args += ["--progress", progress]
    return args


def _pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": SPARK_UID,
        "runAsGroup": SPARK_UID,
        "fsGroup": SPARK_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container_security() -> dict[str, Any]:
    return restricted_security({"securityContext": {"runAsUser": SPARK_UID}})["securityContext"]


#: s3a reads credentials from these two variables only (no instance metadata lookups) when a Secret is named.
ENV_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"


def s3_hadoop_conf(spec: LakeReplaySpec) -> dict[str, str]:
    """The s3a settings of `spec.source.s3` (no credentials: those go by Secret reference, see s3_env)."""
    s3 = spec.source.s3
    if s3 is None:
        return {}
    conf = {"fs.s3a.path.style.access": "true" if s3.path_style_access else "false"}
    if s3.endpoint:
        conf["fs.s3a.endpoint"] = s3.endpoint
        conf["fs.s3a.connection.ssl.enabled"] = "true" if s3.endpoint.startswith("https://") else "false"
    if s3.region:
        conf["fs.s3a.endpoint.region"] = s3.region
    if s3.credentials_secret_ref is not None:
        conf["fs.s3a.aws.credentials.provider"] = ENV_CREDENTIALS_PROVIDER
    return conf


def s3_env(spec: LakeReplaySpec) -> list[dict[str, Any]]:
    """The driver's and executors' AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, by reference to the Secret:
    the values are never in the manifest."""
    s3 = spec.source.s3
    if s3 is None or s3.credentials_secret_ref is None:
        return []
    ref = s3.credentials_secret_ref
    return [
        {"name": variable, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": key}}}
        for variable, key in (
            ("AWS_ACCESS_KEY_ID", ref.access_key_id_key),
            ("AWS_SECRET_ACCESS_KEY", ref.secret_access_key_key),
        )
    ]


def spark_application_manifest(
    *,
    owner: Owner,
    name: str,
    namespace: str,
    spec: LakeReplaySpec,
    topic: str,
    progress: str,
    labels: Mapping[str, str],
    defaults: SparkDefaults = SparkDefaults(),
) -> dict:
    """The SparkApplication that replays the lake range of `spec` into `topic`; SparkSpecRefused when
    `refuse_overrides` refuses spec.spark."""
    refuse_overrides(spec, defaults)
    spark = spec.spark
    version = spark.spark_version or defaults.spark_version
    env_from = [{"secretRef": {"name": e.secret_ref.name}} for e in spark.env_from or []]
    common: dict[str, Any] = {
        "labels": dict(labels),
        "podSecurityContext": _pod_security(),
        "securityContext": _container_security(),
    }
    if env_from:
        common["envFrom"] = env_from
    env = s3_env(spec)
    if env:
        common["env"] = env
    driver: dict[str, Any] = {"cores": spark.driver.cores, "memory": spark.driver.memory, **common}
    service_account = spark.driver.service_account or defaults.service_account
    if service_account:
        driver["serviceAccount"] = service_account
    if spec.source.schema_ is not None:
        driver["configMaps"] = [{"name": spec.source.schema_.config_map_ref.name, "path": SCHEMA_DIR}]
    if spec.kafka.config_from is not None:
        driver["secrets"] = [
            {"name": spec.kafka.config_from.secret_ref.name, "path": KAFKA_SETTINGS_DIR, "secretType": "Generic"}
        ]
    executor = {
        "instances": spark.executor.instances,
        "cores": spark.executor.cores,
        "memory": spark.executor.memory,
        **common,
    }
    body: dict[str, Any] = {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": spark.image or defaults.image,
        "sparkVersion": version,
        "mainApplicationFile": MAIN_APPLICATION_FILE,
        "arguments": job_arguments(spec, topic=topic, progress=progress),
        # A retried task could write its records twice within one run, which the job's validation catches
        # but cannot repair; failing the task fails the application, and the retry resumes exactly.
        # Reprise's key last, so it wins even over a sparkConf the allow-list had let through.
        "sparkConf": {**(spark.spark_conf or {}), "spark.task.maxFailures": "1"},
        # deps.jars is what the controller hands spark-submit as --jars (spark.jars).
        "deps": {"jars": list(defaults.jars) if defaults.jars is not None else connector_jars(version)},
        "driver": driver,
        "executor": executor,
        "restartPolicy": {
            "type": "OnFailure",
            "onFailureRetries": spark.retries.on_failure,
            "onFailureRetryInterval": spark.retries.interval_seconds,
            **SUBMISSION_RETRIES,
        },
        "suspend": spec.suspend,
    }
    # spec.source.s3's typed settings over the free-form hadoopConf: they are what the resource says it reads.
    hadoop_conf = {**(spark.hadoop_conf or {}), **s3_hadoop_conf(spec)}
    if hadoop_conf:
        body["hadoopConf"] = hadoop_conf
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner.reference()],
        },
        "spec": body,
    }


# ------------------------------------------------------------------------------------------ its state


@dataclass(frozen=True)
class SparkOutcome:
    """What a SparkApplication's state means for the LakeReplay."""

    state: str
    #: COMPLETED: every record is in the backfill topic (the job validated it before exiting 0).
    produced: bool
    #: FAILED or SUBMISSION_FAILED: the controller gave up retrying.
    failed: bool
    #: One CamelCase word for the conditions.
    reason: str
    message: str
    attempts: int | None = None


#: The longest controller error a condition message carries.
ERROR_LIMIT = 1000


def error_summary(error: str) -> str:
    """The controller's errorMessage, bounded: for a failed submission it is spark-submit's whole stderr (a JVM
    stack trace of kilobytes), of which the first line, the exception and its root cause say what happened."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if len(lines) <= 1:
        return error.strip()[:ERROR_LIMIT]
    thrown = next(
        (line for line in lines[1:] if line.startswith("Exception in thread") or line.startswith("Error:")), None
    )
    cause = next((line for line in reversed(lines) if line.startswith("Caused by:")), None)
    return " ... ".join(line for line in (lines[0], thrown, cause) if line)[:ERROR_LIMIT]


def state_reason(state: str) -> str:
    """`PENDING_RERUN` -> `SparkPendingRerun`; the empty state (not yet seen by a controller) -> `SparkNew`."""
    words = [w.capitalize() for w in state.split("_") if w] or ["New"]
    return "Spark" + "".join(words)


def spark_state(app: Mapping[str, Any]) -> str:
    """status.applicationState.state ('' before a controller saw it)."""
    return ((app.get("status") or {}).get("applicationState") or {}).get("state") or NEW


def driver_selector(app_name: str) -> str:
    return DRIVER_SELECTOR.format(app=app_name)


def driver_report(namespace: str, driver_pods: Iterable[Mapping[str, Any]]) -> str:
    """What the driver pod says of its failure: its root cause and how to read its log ('' if it did not fail)."""
    return pod_failure_message(namespace, failing_containers(driver_pods))


def spark_outcome(app: Mapping[str, Any] | None, driver: str = "") -> SparkOutcome:
    """Read a SparkApplication (None: it does not exist) into what the LakeReplay reports; `driver` is the
    `driver_report` of its driver pod, added where the controller's message stops."""
    if app is None:
        return SparkOutcome("", False, False, "SparkApplicationMissing", "the SparkApplication does not exist")
    name = (app.get("metadata") or {}).get("name", "")
    status = app.get("status") or {}
    application = status.get("applicationState") or {}
    state = spark_state(app)
    error = error_summary(application.get("errorMessage") or "")
    attempts = status.get("submissionAttempts")
    if state == COMPLETED:
        return SparkOutcome(
            state,
            True,
            False,
            "SparkCompleted",
            f"SparkApplication {name} completed: every record of the range is in the backfill topic",
            attempts,
        )
    driver_said = f"; {driver}" if driver else ""
    if state in FAILED_STATES:
        detail = f": {error}" if error else ""
        tries = f" after {attempts} submission attempt(s)" if attempts else ""
        message = f"SparkApplication {name} is {state}{tries}{detail}{driver_said}"
        return SparkOutcome(state, False, True, state_reason(state), message, attempts)
    if state == NEW:
        return SparkOutcome(
            state,
            False,
            False,
            "SparkNew",
            f"SparkApplication {name} is created and waits for the Spark operator to submit it",
            attempts,
        )
    detail = f" ({error})" if error else ""
    message = f"SparkApplication {name} is {state}{detail}{driver_said}"
    return SparkOutcome(state, False, False, state_reason(state), message, attempts)
