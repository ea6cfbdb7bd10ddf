"""Which `spec.spark.sparkConf` keys a LakeReplay may set: an allow-list, and why each refused family is refused.

The SparkApplication's `sparkConf` reaches spark-submit, which the Spark operator's controller runs with its
own rights, after the controller's own `--conf` settings; spark-submit keeps the last value of a key. So a key
such as `spark.kubernetes.namespace` or `spark.kubernetes.authenticate.driver.serviceAccountName` would make
the controller create the driver pod in another namespace, or with another account, than the LakeReplay's
(finding H1 of the security review). Refusing a list of known-bad keys leaves every key nobody thought of, so
only the keys below pass: tuning of the job's own SQL, shuffle, memory, serialisation and network, which
changes what the driver and executors do in their own namespace and never where or as whom they run.

The same rule is enforced twice from this one table: by the CRD (`sparkconf_rule`, a CEL rule the API server
runs at admission) and by the model's validator, which the operator runs on every spec it reads, so a
LakeReplay admitted under an older CRD is refused before its SparkApplication is built. docs/lakereplay.md
lists the keys for users.
"""

from __future__ import annotations

import re
from typing import Mapping

#: Families of keys a LakeReplay may set, by prefix (each ends with a dot). Why these:
#: - `spark.sql.`: the job is Spark SQL: shuffle partitions, adaptive execution, Parquet reading, time zone,
#:   and the extensions and catalogs Delta and Iceberg need (their classes must already be in the image).
#: - `spark.shuffle.`, `spark.reducer.`, `spark.io.compression.`: shuffle buffers and compression of the
#:   per-key sort.
#: - `spark.memory.`: the driver's and executors' memory split (fraction, off-heap).
#: - `spark.kryo.`, `spark.kryoserializer.`: Kryo buffers and registration.
#: - `spark.dynamicAllocation.`: executors come and go as pods of the LakeReplay's own namespace, under its quota.
#: - `spark.rpc.`: RPC timeouts and retries between the driver and its executors.
#: - `spark.eventLog.`: the event log for a history server, written with the job's own credentials.
ALLOWED_PREFIXES: tuple[str, ...] = (
    "spark.sql.",
    "spark.shuffle.",
    "spark.reducer.",
    "spark.io.compression.",
    "spark.memory.",
    "spark.kryo.",
    "spark.kryoserializer.",
    "spark.dynamicAllocation.",
    "spark.rpc.",
    "spark.eventLog.",
)

#: Single keys a LakeReplay may set. The four `spark.kubernetes.*` ones only set the CPU request and limit of
#: the LakeReplay's own driver and executor pods (spec.spark's cores are whole numbers), which the namespace's
#: quota bounds; every other `spark.kubernetes.*` key shapes the submission itself and stays refused.
ALLOWED_KEYS: tuple[str, ...] = (
    "spark.default.parallelism",
    "spark.serializer",
    "spark.network.timeout",
    "spark.network.timeoutInterval",
    "spark.executor.heartbeatInterval",
    "spark.locality.wait",
    "spark.task.cpus",
    "spark.driver.maxResultSize",
    "spark.driver.memoryOverhead",
    "spark.driver.memoryOverheadFactor",
    "spark.driver.minMemoryOverhead",
    "spark.executor.memoryOverhead",
    "spark.executor.memoryOverheadFactor",
    "spark.executor.minMemoryOverhead",
    "spark.executor.pyspark.memory",
    "spark.python.worker.memory",
    "spark.python.worker.reuse",
    "spark.files.maxPartitionBytes",
    "spark.files.openCostInBytes",
    "spark.files.ignoreCorruptFiles",
    "spark.files.ignoreMissingFiles",
    "spark.broadcast.compress",
    "spark.broadcast.blockSize",
    "spark.rdd.compress",
    "spark.checkpoint.compress",
    "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.driver.limit.cores",
    "spark.kubernetes.executor.request.cores",
    "spark.kubernetes.executor.limit.cores",
)

#: What may follow an allowed prefix: Spark's key characters only, so no `=` or white space can make
#: spark-submit's `--conf key=value` read another key than the one admitted.
_KEY_TAIL = "[A-Za-z0-9_.-]+"

#: The prefixes as one regular expression, the same in RE2 (CEL's `matches`) and in Python.
PREFIX_PATTERN = "^(" + "|".join(re.escape(p) for p in ALLOWED_PREFIXES) + ")" + _KEY_TAIL + "$"
_PREFIXED = re.compile(PREFIX_PATTERN)

FIELD = "spec.spark.sparkConf"
DOCS = "docs/lakereplay.md, section sparkConf"

_AUTHENTICATE = "the driver's account and the API credentials are the platform's: use spec.spark.driver.serviceAccount"
_OPERATOR_OWNS = "where and how the application is submitted is the Spark operator's"
_IMAGE = "use spec.spark.image"
_TEMPLATE = "a pod template is read from the Spark operator's file system and shapes the driver and executor pods"
_FETCHED = "spark-submit would fetch it in the Spark operator's process; the image carries the job's code"
_JVM = "it runs code or changes the environment of the driver or executors (code execution on a pinned image)"
_REPRISE = "Reprise sets it: a retried or speculative task would write its records to the backfill topic twice"

#: Refused families with their own reason, first match wins (regular expressions on the whole key). A key on
#: neither list gets the general reason.
_REFUSED: tuple[tuple[str, str], ...] = (
    (
        r"spark\.kubernetes\.namespace",
        "the driver runs in the LakeReplay's own namespace; spark-submit would create it in the namespace named "
        "here, with the Spark operator's rights",
    ),
    (r"spark\.kubernetes\.authenticate\..*", _AUTHENTICATE),
    (r"spark\.master|spark\.kubernetes\.driver\.master|spark\.submit\..*|spark\.kubernetes\.context", _OPERATOR_OWNS),
    (r"spark\.(kubernetes\.)?(driver\.|executor\.)?container\.image(\..*)?", _IMAGE),
    (r"spark\.kubernetes\.(driver\.|executor\.)?podTemplate(File|ContainerName)", _TEMPLATE),
    (r"spark\.(jars|files|archives|pyFiles)(\..*)?|spark\.kubernetes\.file\.upload\.path", _FETCHED),
    (
        r"spark\.(driver|executor)\.(extraClassPath|extraJavaOptions|extraLibraryPath|defaultJavaOptions)"
        r"|spark\.executorEnv\..*|spark\.kubernetes\.driverEnv\..*|spark\.(driver|executor)\.userClassPathFirst"
        r"|spark\.plugins(\..*)?|spark\.(driver|executor)\.plugins|spark\.extraListeners|spark\.python\..*",
        _JVM,
    ),
    (r"spark\.hadoop\..*", "use spec.spark.hadoopConf"),
    (r"spark\.driver\.(cores|memory)", "use spec.spark.driver"),
    (r"spark\.executor\.(cores|memory|instances)", "use spec.spark.executor"),
    (r"spark\.task\.maxFailures|spark\.speculation(\..*)?", _REPRISE),
    (
        r"spark\.kubernetes\..*",
        "Kubernetes settings of the submission (pods, volumes, secrets, labels, accounts) are the Spark "
        "operator's and Reprise's; only the request and limit cores keys are allowed",
    ),
)
_REFUSED_COMPILED = tuple((re.compile(pattern), reason) for pattern, reason in _REFUSED)

GENERAL_REASON = "it is not on the allow-list of sparkConf keys"


def allowed(key: str) -> bool:
    return key in ALLOWED_KEYS or _PREFIXED.fullmatch(key) is not None


def refusal_reason(key: str) -> str | None:
    """Why `key` may not be set (None: it may)."""
    if allowed(key):
        return None
    return next((reason for pattern, reason in _REFUSED_COMPILED if pattern.fullmatch(key)), GENERAL_REASON)


def refusal(conf: Mapping[str, str] | None) -> str | None:
    """The message for the first refused key of `conf` in sorted order (None: every key is allowed). It names
    the key and the field, never the value."""
    for key in sorted(conf or {}):
        reason = refusal_reason(key)
        if reason is not None:
            return f'{FIELD}["{key}"]: not allowed: {reason} (allowed keys: {DOCS})'
    return None


def _cel_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cel_allowed(key: str) -> str:
    """`allowed` in CEL, for the map key variable `key`."""
    keys = ", ".join(_cel_string(k) for k in ALLOWED_KEYS)
    return f"({key} in [{keys}] || {key}.matches({_cel_string(PREFIX_PATTERN)}))"


def sparkconf_rule() -> dict[str, str]:
    """The allow-list as an `x-kubernetes-validations` entry of the sparkConf map. Its messageExpression names
    the first refused key, as `refusal` does (without the family's reason, which only the operator's copy
    can afford); the plain message stands in where the API server cannot evaluate it."""
    return {
        "rule": f"self.all(k, {_cel_allowed('k')})",
        "message": f"{FIELD}: a key is not on the allow-list of sparkConf keys ({DOCS})",
        "messageExpression": (
            f"'{FIELD}[\"' + self.filter(k, !{_cel_allowed('k')})[0] + '\"]: not allowed: {GENERAL_REASON} ({DOCS})'"
        ),
        "reason": "FieldValueForbidden",
    }


__all__ = [
    "ALLOWED_KEYS",
    "ALLOWED_PREFIXES",
    "PREFIX_PATTERN",
    "FIELD",
    "GENERAL_REASON",
    "allowed",
    "refusal",
    "refusal_reason",
    "sparkconf_rule",
]
