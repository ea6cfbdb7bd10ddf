"""A STAND-IN for the Kubeflow Spark operator's controller, for tests on machines without a Spark operator.

This is not the Spark operator. There is no Spark operator controller (and no container runtime) on these
machines, so tests of LakeReplay need something that acts on SparkApplications the way the real controller
(github.com/kubeflow/spark-operator/v2, internal/controller/sparkapplication) does:

- it watches `sparkoperator.k8s.io/v1beta2` SparkApplications on the local API server (the real CRD,
  installed with `local_platform.spark_operator.install_sparkapplication_crd`);
- it runs each application with the local `spark-submit` of the installed pyspark, master `local[2]`, from
  the same `mainApplicationFile`, `arguments`, `sparkConf`, `hadoopConf` and `deps` (`local://` paths and
  the image's paths mapped to this checkout, mounted Secrets and ConfigMaps written to a folder of its own);
- it writes `status` as the real controller does, step by step: `applicationState.state` goes
  SUBMITTED -> RUNNING -> SUCCEEDING -> COMPLETED, or FAILING -> (PENDING_RERUN -> SUBMITTED ... when
  `restartPolicy` allows, with the real retry counting and linear back-off) -> FAILED with the real
  `errorMessage` ("driver container failed with ExitCode: N, Reason: Error"); plus `submissionID`,
  `driverInfo.podName`, `submissionAttempts`, `executionAttempts`, `lastSubmissionAttemptTime` and
  `terminationTime`; `spec.suspend` suspends and resumes; `timeToLiveSeconds` deletes finished ones;
- deleting a SparkApplication stops its spark-submit by PID (process group), as the real controller's
  owner references delete the driver pod.

What it does not do: executors (local mode runs them as threads of the driver JVM), pods, Services,
the web UI, batch schedulers, monitoring. `decide()` is the state machine, pure and unit-tested;
`SparkOperatorStandIn` is the I/O around it.
"""

from __future__ import annotations

import base64
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from .spark_operator import GROUP, PLURAL, VERSION

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where the Spark image of spark_app/Dockerfile puts things, mapped to this checkout.
DEFAULT_PATH_MAP = {"/opt/reprise": str(REPO_ROOT)}
LOCAL_MASTER = "local[2]"

NEW, SUBMITTED, RUNNING, COMPLETED, FAILED = "", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED"
SUBMISSION_FAILED, PENDING_RERUN, SUCCEEDING, FAILING = "SUBMISSION_FAILED", "PENDING_RERUN", "SUCCEEDING", "FAILING"
SUSPENDING, SUSPENDED, RESUMING, UNKNOWN = "SUSPENDING", "SUSPENDED", "RESUMING", "UNKNOWN"
TERMINATED = (COMPLETED, FAILED)

log = logging.getLogger("local_platform.spark_standin")


class SubmissionError(RuntimeError):
    """The application cannot be run here (unsupported type, a file that does not exist, ...)."""


# ------------------------------------------------------------------------------------------- state machine


@dataclass(frozen=True)
class Observed:
    """What the stand-in knows of the application's driver: its spark-submit process."""

    process: Literal["none", "running", "exited"]
    exit_code: int | None = None


@dataclass(frozen=True)
class Decision:
    status: dict[str, Any]
    action: Literal["none", "submit", "kill", "delete"] = "none"
    requeue_after: float | None = None


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def state_of(status: Mapping[str, Any] | None) -> str:
    return ((status or {}).get("applicationState") or {}).get("state", "") or ""


def _with_state(status: Mapping[str, Any], state: str, error: str = "") -> dict[str, Any]:
    new = dict(status)
    new["applicationState"] = {"state": state, **({"errorMessage": error} if error else {})}
    return new


def should_retry(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """The real controller's `util.ShouldRetry`."""
    policy = spec.get("restartPolicy") or {}
    kind = policy.get("type", "Never")
    state = state_of(status)
    if state == SUCCEEDING:
        return kind == "Always"
    if state == FAILING:
        if kind == "Always":
            return True
        retries = policy.get("onFailureRetries")
        return kind == "OnFailure" and retries is not None and status.get("executionAttempts", 0) <= retries
    if state == SUBMISSION_FAILED:
        if kind == "Always":
            return True
        retries = policy.get("onSubmissionFailureRetries")
        return kind == "OnFailure" and retries is not None and status.get("submissionAttempts", 0) <= retries
    return False


def seconds_until_retry(spec: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> float | None:
    """The real controller's `util.TimeUntilNextRetryDue`: interval x attempts after the last attempt (linear
    back-off); None when the interval or the last attempt is missing (the real controller then never retries)."""
    policy = spec.get("restartPolicy") or {}
    key = "onSubmissionFailureRetryInterval" if state_of(status) == SUBMISSION_FAILED else "onFailureRetryInterval"
    interval = policy.get(key)
    attempts = status.get("submissionAttempts", 0)
    last = _parse_time(status.get("lastSubmissionAttemptTime"))
    if interval is None or last is None or attempts <= 0:
        return None
    return interval * attempts - (now - last).total_seconds()


def _reset_for_rerun(status: Mapping[str, Any]) -> dict[str, Any]:
    """The real `resetSparkApplicationStatus` for SUCCEEDING/FAILING: forget the last run's driver."""
    new = {k: v for k, v in status.items() if k not in ("sparkApplicationId", "terminationTime", "executorState")}
    new["driverInfo"] = {}
    return new


def submitted(status: Mapping[str, Any], app_name: str, spec: Mapping[str, Any], now: datetime,
              submission_id: str, error: str | None = None) -> dict[str, Any]:
    """The status after a submission attempt, as the real `submitSparkApplication` writes it."""
    new = dict(status)
    new["submissionID"] = submission_id
    new["driverInfo"] = {"podName": driver_pod_name(app_name, spec)}
    new["lastSubmissionAttemptTime"] = rfc3339(now)
    new["submissionAttempts"] = int(status.get("submissionAttempts", 0)) + 1
    if error is None:
        new["executionAttempts"] = int(status.get("executionAttempts", 0)) + 1
        return _with_state(new, SUBMITTED)
    return _with_state(new, SUBMISSION_FAILED, error)


def driver_pod_name(app_name: str, spec: Mapping[str, Any]) -> str:
    """The real `util.GetDriverPodName`: spec.driver.podName, the sparkConf setting, or <name>-driver."""
    named = (spec.get("driver") or {}).get("podName")
    if named:
        return str(named)
    return (spec.get("sparkConf") or {}).get("spark.kubernetes.driver.pod.name") or f"{app_name}-driver"


def decide(spec: Mapping[str, Any], status: Mapping[str, Any] | None, observed: Observed, now: datetime) -> Decision:
    """The next step for one application: the status to write and what to do with its process."""
    current = dict(status or {})
    state = state_of(current)
    suspend = bool(spec.get("suspend"))
    if suspend and state not in TERMINATED and state not in (SUSPENDED, SUSPENDING):
        return Decision(_with_state(current, SUSPENDING), "kill" if observed.process == "running" else "none")
    if state == SUSPENDING:
        reset = _reset_for_rerun(current)
        return Decision(_with_state(reset, SUSPENDED), "kill" if observed.process == "running" else "none")
    if state == SUSPENDED:
        if observed.process == "running":
            return Decision(current, "kill")
        return Decision(current if suspend else _with_state(current, RESUMING))
    if state in (NEW, PENDING_RERUN, RESUMING):
        return Decision(current, "submit")
    if state in (SUBMITTED, RUNNING, UNKNOWN):
        if observed.process == "running":
            return Decision(_with_state(current, RUNNING))
        if observed.process == "none":
            new = _with_state(current, FAILING, "driver pod not found")
            new["terminationTime"] = rfc3339(now)
            return Decision(new)
        new = dict(current)
        new["terminationTime"] = rfc3339(now)
        if observed.exit_code == 0:
            return Decision(_with_state(new, SUCCEEDING))
        return Decision(_with_state(new, FAILING,
                                    f"driver container failed with ExitCode: {observed.exit_code}, Reason: Error"))
    if state == SUCCEEDING:
        if should_retry(spec, current):
            return Decision(_with_state(_reset_for_rerun(current), PENDING_RERUN))
        return Decision(_with_state(current, COMPLETED, current.get("applicationState", {}).get("errorMessage", "")))
    if state in (FAILING, SUBMISSION_FAILED):
        if not should_retry(spec, current):
            new = _with_state(current, FAILED, current.get("applicationState", {}).get("errorMessage", ""))
            if state == SUBMISSION_FAILED:
                new["terminationTime"] = rfc3339(now)
            return Decision(new)
        wait = seconds_until_retry(spec, current, now)
        if wait is None:
            log.warning("restartPolicy has no retry interval for %s retries: the Spark operator does not retry "
                        "such an application either", state)
            return Decision(current)
        if wait > 0:
            return Decision(current, requeue_after=wait)
        if state == SUBMISSION_FAILED:
            return Decision(current, "submit")
        return Decision(_with_state(_reset_for_rerun(current), PENDING_RERUN))
    if state in TERMINATED:
        ttl = spec.get("timeToLiveSeconds")
        ended = _parse_time(current.get("terminationTime"))
        if ttl is not None and ttl > 0 and ended is not None:
            left = ttl - (now - ended).total_seconds()
            if left <= 0:
                return Decision(current, "delete")
            return Decision(current, requeue_after=left)
    return Decision(current)


# ------------------------------------------------------------------------------------------- spark-submit


@dataclass(frozen=True)
class Submission:
    argv: list[str]
    env: dict[str, str]


def spark_submit_executable() -> str:
    """The `spark-submit` script of the pyspark in this Python environment."""
    import pyspark

    script = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    if not script.is_file():
        raise SubmissionError(f"pyspark has no bin/spark-submit at {script}: reinstall pyspark (make venv)")
    return str(script)


def map_path(value: str, path_map: Mapping[str, str]) -> str:
    """`local:///opt/reprise/spark_app/main.py` -> `<repo>/spark_app/main.py`; other values unchanged.

    Longest prefix first, so a mount at /opt/reprise/conf wins over the image root /opt/reprise.
    """
    text = value[len("local://"):] if value.startswith("local://") else value
    for prefix in sorted(path_map, key=len, reverse=True):
        if text == prefix or text.startswith(prefix.rstrip("/") + "/"):
            return path_map[prefix] + text[len(prefix.rstrip("/")):]
    return text if value.startswith("local://") else value


def _mapped_list(values: Any, path_map: Mapping[str, str]) -> str:
    return ",".join(map_path(str(v), path_map) for v in values or [])


def submission(app: Mapping[str, Any], *, spark_submit: str, path_map: Mapping[str, str],
               extra_conf: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
               python: str = sys.executable, master: str = LOCAL_MASTER) -> Submission:
    """The local spark-submit command line (and environment) for a SparkApplication."""
    spec = app.get("spec") or {}
    name = (app.get("metadata") or {}).get("name", "app")
    kind = spec.get("type")
    if kind != "Python":
        raise SubmissionError(f"the stand-in runs Python applications only, not type {kind!r}")
    main = spec.get("mainApplicationFile")
    if not main:
        raise SubmissionError("spec.mainApplicationFile is empty")
    main_file = map_path(str(main), path_map)
    if "://" not in main_file and not Path(main_file).is_file():
        raise SubmissionError(f"mainApplicationFile {main} is {main_file} here, which does not exist")
    conf: dict[str, str] = {}
    for key, value in (spec.get("sparkConf") or {}).items():
        conf[key] = map_path(str(value), path_map) if "local://" in str(value) or str(value).startswith("/") else str(value)
    for key, value in (spec.get("hadoopConf") or {}).items():
        conf[f"spark.hadoop.{key}"] = str(value)
    for key, value in (extra_conf or {}).items():
        if key == "spark.jars" and conf.get(key):
            conf[key] = conf[key] + "," + value
        else:
            conf.setdefault(key, value)
    conf.pop("spark.master", None)
    deps = spec.get("deps") or {}
    jars = ",".join(filter(None, [conf.pop("spark.jars", ""), _mapped_list(deps.get("jars"), path_map)]))
    argv = [spark_submit, "--master", master, "--deploy-mode", "client", "--name", name]
    driver = spec.get("driver") or {}
    if driver.get("memory"):
        argv += ["--driver-memory", str(driver["memory"])]
    if jars:
        argv += ["--jars", jars]
    for flag, key in (("--py-files", "pyFiles"), ("--files", "files"), ("--archives", "archives")):
        if deps.get(key):
            argv += [flag, _mapped_list(deps[key], path_map)]
    for key in sorted(conf):
        argv += ["--conf", f"{key}={conf[key]}"]
    argv.append(main_file)
    argv += [map_path(str(a), path_map) for a in spec.get("arguments") or []]
    process_env = {
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": "127.0.0.1",
        **dict(env or {}),
    }
    return Submission(argv, process_env)


# ------------------------------------------------------------------------------------------- the controller


@dataclass
class _Run:
    uid: str
    namespace: str
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: Any = field(repr=False, default=None)

    def poll(self) -> Observed:
        code = self.popen.poll()
        return Observed("running") if code is None else Observed("exited", code)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the process group (spark-submit, its JVM and the Python driver), SIGKILL if it stays."""
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        else:
            _signal_group(self.popen.pid, signal.SIGKILL)  # children of its session may outlive the leader
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class SparkOperatorStandIn:
    """Runs SparkApplications of a local API server with local spark-submit (see the module docstring).

    `start()` begins watching (all namespaces, or `namespace`); `stop()` stops watching and every
    spark-submit it started, by PID. Logs of each attempt: `log_path(namespace, name)`.
    """

    def __init__(self, kubeconfig: str | Path, workdir: str | Path, *, namespace: str | None = None,
                 spark_conf: Mapping[str, str] | None = None, path_map: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, resync_seconds: float = 1.0,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.kubeconfig = str(kubeconfig)
        self.workdir = Path(workdir).resolve()
        self.namespace = namespace
        self.spark_conf = dict(spark_conf or {})
        self.path_map = {**DEFAULT_PATH_MAP, **dict(path_map or {})}
        self.env = dict(env or {})
        self.resync_seconds = resync_seconds
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._due: dict[str, float] = {}
        self._keys: "queue.Queue[tuple[str, str] | None]" = queue.Queue()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._api: Any = None
        self._client: Any = None
        self._lock = threading.Lock()

    # -- lifecycle

    def start(self) -> "SparkOperatorStandIn":
        from kubernetes import client, config

        if self._threads:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._client = config.new_client_from_config(config_file=self.kubeconfig)
        self._api = client.CustomObjectsApi(self._client)
        self._core = client.CoreV1Api(self._client)
        self._stopping.clear()
        for target, name in ((self._watch, "spark-standin-watch"), (self._work, "spark-standin-work")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop watching and stop every spark-submit this stand-in started (by PID). Idempotent."""
        self._stopping.set()
        self._keys.put(None)
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            run.stop()
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> "SparkOperatorStandIn":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests look at

    def pid(self, namespace: str, name: str) -> int | None:
        """The PID of the application's running spark-submit, if any."""
        with self._lock:
            for run in self._runs.values():
                if (run.namespace, run.name) == (namespace, name) and run.popen.poll() is None:
                    return run.popen.pid
        return None

    def log_path(self, namespace: str, name: str) -> Path | None:
        """The log of the application's latest attempt."""
        folder = self.workdir / namespace / name
        logs = sorted(folder.glob("attempt-*.log"), key=lambda p: int(p.stem.split("-")[1])) if folder.is_dir() else []
        return logs[-1] if logs else None

    # -- the loops

    def _watch(self) -> None:
        from kubernetes import watch

        while not self._stopping.is_set():
            watcher = watch.Watch()
            try:
                if self.namespace:
                    stream = watcher.stream(self._api.list_namespaced_custom_object, GROUP, VERSION,
                                            self.namespace, PLURAL, timeout_seconds=5)
                else:
                    stream = watcher.stream(self._api.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                                            timeout_seconds=5)
                for event in stream:
                    meta = event["object"].get("metadata", {})
                    if event["type"] == "DELETED":
                        self._forget(meta.get("uid", ""))
                    else:
                        self._keys.put((meta.get("namespace", ""), meta.get("name", "")))
                    if self._stopping.is_set():
                        break
            except Exception as exc:  # the API server restarting, a dropped connection: watch again
                if not self._stopping.is_set():
                    log.debug("watch ended (%s); watching again", exc)
                    time.sleep(0.5)
            finally:
                watcher.stop()

    def _work(self) -> None:
        next_resync = 0.0
        while not self._stopping.is_set():
            try:
                key = self._keys.get(timeout=0.2)
            except queue.Empty:
                key = None
            if self._stopping.is_set():
                return
            try:
                if key is not None:
                    self._reconcile(*key)
                if time.monotonic() >= next_resync:
                    next_resync = time.monotonic() + self.resync_seconds
                    self._resync()
            except Exception:  # one bad object must not stop the controller
                log.exception("stand-in reconcile failed; retrying at the next resync")

    def _resync(self) -> None:
        """Every application again (process exits, retry intervals, TTLs); runs of deleted ones are stopped."""
        if self.namespace:
            items = self._api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)["items"]
        else:
            items = self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        present = {i["metadata"]["uid"] for i in items}
        with self._lock:
            gone = [uid for uid in self._runs if uid not in present]
        for uid in gone:
            self._forget(uid)
        for item in items:
            self._reconcile_object(item)

    def _reconcile(self, namespace: str, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            app = self._api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        self._reconcile_object(app)

    def _reconcile_object(self, app: dict[str, Any]) -> None:
        meta = app["metadata"]
        uid, namespace, name = meta["uid"], meta["namespace"], meta["name"]
        if meta.get("deletionTimestamp"):
            self._forget(uid)
            return
        if self._due.get(uid, 0.0) > time.monotonic():
            return
        with self._lock:
            run = self._runs.get(uid)
        observed = run.poll() if run is not None else Observed("none")
        status = app.get("status") or {}
        decision = decide(app.get("spec") or {}, status, observed, self._clock())
        new_status = decision.status
        if decision.action == "kill" and run is not None:
            run.stop()
            with self._lock:
                self._runs.pop(uid, None)
        elif decision.action == "delete":
            self._api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            self._forget(uid)
            return
        elif decision.action == "submit":
            new_status = self._submit(app, new_status)
        if observed.process == "exited" and decision.action != "submit" and state_of(new_status) not in (SUBMITTED, RUNNING):
            with self._lock:
                finished = self._runs.pop(uid, None)
            if finished is not None:
                finished.stop()
        self._due.pop(uid, None)
        if decision.requeue_after:
            self._due[uid] = time.monotonic() + decision.requeue_after
        if new_status != status:
            self._write_status(namespace, name, status, new_status)

    def _submit(self, app: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        meta = app["metadata"]
        uid, namespace, name = meta["uid"], meta["namespace"], meta["name"]
        spec = app.get("spec") or {}
        submission_id = str(uuid.uuid4())
        attempt = int(status.get("submissionAttempts", 0)) + 1
        folder = self.workdir / namespace / name
        folder.mkdir(parents=True, exist_ok=True)
        log_path = folder / f"attempt-{attempt}.log"
        with self._lock:
            previous = self._runs.pop(uid, None)
        if previous is not None:
            previous.stop()
        try:
            path_map = {**self.path_map, **self._mounts(namespace, spec, folder / "mounts")}
            env = {**self.env, **self._driver_env(namespace, spec)}
            plan = submission(app, spark_submit=spark_submit_executable(), path_map=path_map,
                              extra_conf=self.spark_conf, env=env)
            log_file = open(log_path, "ab")
            log_file.write(("$ " + " ".join(plan.argv) + "\n").encode())
            log_file.flush()
            popen = subprocess.Popen(plan.argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **plan.env}, cwd=str(folder), start_new_session=True)
        except (SubmissionError, OSError, ValueError) as exc:
            log.warning("cannot submit %s/%s: %s", namespace, name, exc)
            return submitted(status, name, spec, self._clock(), submission_id, error=f"failed to submit spark application: {exc}")
        with self._lock:
            self._runs[uid] = _Run(uid, namespace, name, popen, log_path, log_file)
        log.info("submitted %s/%s (attempt %d, pid %d, log %s)", namespace, name, attempt, popen.pid, log_path)
        return submitted(status, name, spec, self._clock(), submission_id)

    def _forget(self, uid: str) -> None:
        with self._lock:
            run = self._runs.pop(uid, None)
        self._due.pop(uid, None)
        if run is not None:
            log.info("stopping %s/%s (pid %d): its SparkApplication is gone", run.namespace, run.name, run.popen.pid)
            run.stop()

    def _write_status(self, namespace: str, name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        patch = dict(new)
        for key in old:
            if key not in new:
                patch[key] = None  # a merge patch removes a field set to null
        try:
            self._api.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, {"status": patch})
        except ApiException as exc:
            if exc.status != 404:
                raise

    # -- what a kubelet would do for the driver pod

    def _mounts(self, namespace: str, spec: Mapping[str, Any], root: Path) -> dict[str, str]:
        """Secrets and ConfigMaps the driver mounts, written as files; returns mount path -> local folder."""
        driver = spec.get("driver") or {}
        mounts: dict[str, str] = {}
        sources: list[tuple[str, str, str]] = []  # (kind, object name, mount path)
        for secret in driver.get("secrets") or []:
            sources.append(("secret", secret["name"], secret["path"]))
        for config_map in driver.get("configMaps") or []:
            sources.append(("configMap", config_map["name"], config_map["path"]))
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for mount in driver.get("volumeMounts") or []:
            volume = volumes.get(mount["name"]) or {}
            if "secret" in volume:
                sources.append(("secret", volume["secret"]["secretName"], mount["mountPath"]))
            elif "configMap" in volume:
                sources.append(("configMap", volume["configMap"]["name"], mount["mountPath"]))
            elif "emptyDir" in volume:
                local = root / mount["name"]
                local.mkdir(parents=True, exist_ok=True)
                mounts[mount["mountPath"]] = str(local)
        for kind, object_name, mount_path in sources:
            local = root / f"{kind}-{object_name}"
            shutil.rmtree(local, ignore_errors=True)
            local.mkdir(parents=True)
            for key, value in self._object_data(namespace, kind, object_name).items():
                (local / key).write_bytes(value)
                os.chmod(local / key, 0o600)
            mounts[mount_path] = str(local)
        return mounts

    def _object_data(self, namespace: str, kind: str, name: str) -> dict[str, bytes]:
        if kind == "secret":
            data = self._core.read_namespaced_secret(name, namespace).data or {}
            return {k: base64.b64decode(v) for k, v in data.items()}
        data = self._core.read_namespaced_config_map(name, namespace).data or {}
        return {k: v.encode() for k, v in data.items()}

    def _driver_env(self, namespace: str, spec: Mapping[str, Any]) -> dict[str, str]:
        """The driver's environment from env, envVars, envSecretKeyRefs and envFrom."""
        driver = spec.get("driver") or {}
        env: dict[str, str] = {}
        for source in driver.get("envFrom") or []:
            if "secretRef" in source:
                data = self._object_data(namespace, "secret", source["secretRef"]["name"])
            elif "configMapRef" in source:
                data = self._object_data(namespace, "configMap", source["configMapRef"]["name"])
            else:
                continue
            env.update({k: v.decode() for k, v in data.items()})
        env.update({k: str(v) for k, v in (driver.get("envVars") or {}).items()})
        for name, ref in (driver.get("envSecretKeyRefs") or {}).items():
            env[name] = self._object_data(namespace, "secret", ref["name"])[ref["key"]].decode()
        for item in driver.get("env") or []:
            if "value" in item:
                env[item["name"]] = str(item["value"])
            elif "secretKeyRef" in (item.get("valueFrom") or {}):
                ref = item["valueFrom"]["secretKeyRef"]
                env[item["name"]] = self._object_data(namespace, "secret", ref["name"])[ref["key"]].decode()
            elif "configMapKeyRef" in (item.get("valueFrom") or {}):
                ref = item["valueFrom"]["configMapKeyRef"]
                env[item["name"]] = self._object_data(namespace, "configMap", ref["name"])[ref["key"]].decode()
        return env
