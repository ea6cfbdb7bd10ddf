"""What runs SparkApplications on the local platform: the real Kubeflow Spark operator, controller and webhook.

The one place that wires a Spark operator into the local platform, for `make run` (`start_spark_controller`)
and for the test fixtures (tests/fixtures/spark.py). `SparkOperator.start()`:

- installs the operator's own CRDs (SparkApplication, ScheduledSparkApplication, SparkConnect: its controller
  watches all three) from its Go module (`spark_operator`);
- starts `spark-operator webhook start` (the binary `make platform` builds, `toolchain.SPARK_OPERATOR`) and
  registers it as the helm chart does, but by URL (`https://localhost:<port>`: there is no Service network
  here): its MutatingWebhookConfiguration mutates the driver pods spark-submit creates (the `driver.configMaps`,
  `envFrom`, security contexts and the owner reference to the SparkApplication that Reprise relies on), and
  validates and defaults SparkApplications. The webhook makes its own certificate (it names `localhost`) and
  writes its CA into both configurations; `start()` waits for that;
- starts `spark-operator controller start` with `SPARK_HOME` = the installed pyspark (its spark-submit and
  Spark's Kubernetes jars), `KUBERNETES_SERVICE_HOST/PORT` = the local API server (the controller builds the
  `k8s://` master URL from them) and a kubeconfig of its own ServiceAccount (`spark-operator`, bound to
  cluster-admin; the chart's narrower RBAC is not applied), used by the controller and its spark-submits.

The controller then does what it does on any cluster: spark-submit in cluster mode creates the driver pod and
its ConfigMap; the node agent runs that pod (`spark_image`: a local-mode driver) and reports its phase and
exit code as a kubelet would; the controller derives SUBMITTED/RUNNING/COMPLETED/FAILED, retries under
`restartPolicy`, suspends and resumes, and deletes finished applications after `timeToLiveSeconds` itself.

Logs: `<workdir>/controller.log` (every spark-submit the controller ran, and its state changes) and
`<workdir>/webhook.log`; a driver's output is its pod's container log in the node agent
(`driver_log(agent, namespace, app)`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from . import processes
from .spark_image import LOCAL_MASTER, spark_home
from .spark_jvm import short_job_options
from .spark_operator import SPARK_OPERATOR_VERSION, ensure_sparkapplication_crd, install_sparkapplication_crd
from .toolchain import ensure_spark_operator

#: What `make run` prints about the Spark operator.
NOTICE = (
    f"Spark operator: the Kubeflow Spark operator {SPARK_OPERATOR_VERSION} (controller and webhook, built "
    f"from its Go module); driver pods run through the node agent as local spark-submits in {LOCAL_MASTER} "
    "(no executor pods, no web UI; docs/local-platform.md)"
)

#: Where the webhook keeps its certificate Secret (the helm chart's release namespace).
OPERATOR_NAMESPACE = "spark-operator"
SERVICE_ACCOUNT = "spark-operator"
WEBHOOK_NAME = "spark-operator-webhook"
#: The container spark-submit names in every driver pod.
DRIVER_CONTAINER = "spark-kubernetes-driver"
CRD_FILES = (
    "sparkoperator.k8s.io_sparkapplications.yaml",
    "sparkoperator.k8s.io_scheduledsparkapplications.yaml",
    "sparkoperator.k8s.io_sparkconnects.yaml",
)


def install_crd(kubeconfig: str | Path) -> None:
    """The Spark operator's own CRDs on the API server of `kubeconfig`, Established."""
    from kubernetes import config

    bases = ensure_sparkapplication_crd().parent
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        for name in CRD_FILES:
            install_sparkapplication_crd(api_client, bases / name)
    finally:
        api_client.close()


def driver_pod_name(app_name: str) -> str:
    """The controller's `util.GetDriverPodName` for applications that name no pod (Reprise's)."""
    return f"{app_name}-driver"


def driver_pid(agent: Any, namespace: str, app_name: str) -> int | None:
    """The PID of an application's running driver (its spark-submit), None when none runs."""
    return agent.container_pid(namespace, driver_pod_name(app_name), DRIVER_CONTAINER)


def driver_log(agent: Any, namespace: str, app_name: str) -> Path | None:
    """The log of an application's latest driver pod."""
    return agent.container_log(namespace, driver_pod_name(app_name), DRIVER_CONTAINER)


def webhook_configurations(port: int, namespaces: Sequence[str] = ()) -> list[dict]:
    """The helm chart's webhook configurations (pods, SparkApplications), reaching the webhook by URL."""
    selector: dict[str, Any] = {}
    if namespaces:
        selector = {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
                ]
            }
        }

    def hook(name: str, path: str, rules: dict, **extra: Any) -> dict:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {"url": f"https://localhost:{port}{path}"},
            "rules": [rules],
            **selector,
            **extra,
        }

    apps = {
        "apiGroups": ["sparkoperator.k8s.io"],
        "apiVersions": ["v1beta2"],
        "resources": ["sparkapplications"],
        "operations": ["CREATE", "UPDATE"],
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_NAME},
        "webhooks": [
            hook(
                "mutate--v1-pod.sparkoperator.k8s.io",
                "/mutate--v1-pod",
                {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]},
                objectSelector={"matchLabels": {"sparkoperator.k8s.io/launched-by-spark-operator": "true"}},
            ),
            hook(
                "mutate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io",
                "/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication",
                apps,
            ),
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_NAME},
        "webhooks": [
            hook(
                "validate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io",
                "/validate-sparkoperator-k8s-io-v1beta2-sparkapplication",
                apps,
            )
        ],
    }
    return [mutating, validating]


class SparkOperator:
    """The Spark operator's webhook and controller as processes of this machine, acting on the local API
    server of `kubeconfig` (all namespaces, or `namespaces`); `stop()` stops both by PID."""

    def __init__(self, kubeconfig: str | Path, workdir: str | Path, *, namespaces: Sequence[str] = ()) -> None:
        self.kubeconfig = Path(kubeconfig).resolve()
        self.workdir = Path(workdir).resolve()
        self.namespaces = tuple(namespaces)
        self.controller: processes.ManagedProcess | None = None
        self.webhook: processes.ManagedProcess | None = None
        self._ports = processes.PortClaims()
        self._api: Any = None
        self._identity = self.kubeconfig

    @property
    def controller_log(self) -> Path:
        return self.workdir / "controller.log"

    def start(self, timeout: float = 120.0) -> "SparkOperator":
        from kubernetes import client, config

        binary = ensure_spark_operator()
        self.workdir.mkdir(parents=True, exist_ok=True)
        install_crd(self.kubeconfig)
        self._api = config.new_client_from_config(config_file=str(self.kubeconfig))
        try:
            self._start(binary, client, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, binary: Path, client: Any, timeout: float) -> None:
        from kubernetes.client.exceptions import ApiException

        core = client.CoreV1Api(self._api)
        try:
            core.create_namespace({"metadata": {"name": OPERATOR_NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        self._identity = self._service_account_kubeconfig(client)
        port = self._ports.claim_port()
        self._apply_webhook_configurations(client, port)
        env = self._environment()
        common = [
            f"--namespaces={','.join(self.namespaces)}",
            "--health-probe-bind-address=0",
            "--metrics-bind-address=0",
            "--zap-log-level=info",
        ]
        certs = self.workdir / "webhook-certs"
        shutil.rmtree(certs, ignore_errors=True)
        self._ports.release(port)  # the webhook binds it now
        self.webhook = processes.start(
            "spark-operator webhook",
            [
                str(binary),
                "webhook",
                "start",
                *common,
                f"--webhook-port={port}",
                f"--webhook-cert-dir={certs}",
                f"--mutating-webhook-name={WEBHOOK_NAME}",
                f"--validating-webhook-name={WEBHOOK_NAME}",
                "--webhook-svc-name=spark-operator-webhook-svc",
                f"--webhook-svc-namespace={OPERATOR_NAMESPACE}",
                f"--webhook-secret-namespace={OPERATOR_NAMESPACE}",
            ],
            self.workdir / "webhook.log",
            env=env,
            cwd=self.workdir,
        )
        processes.wait_until(
            self.webhook,
            lambda: processes.port_is_open(port) and self._ca_bundles_set(client),
            timeout,
            "serving admission requests (its CA in the webhook configurations)",
        )
        self.controller = processes.start(
            "spark-operator controller",
            [str(binary), "controller", "start", *common, "--enable-ui-service=false", "--controller-threads=4"],
            self.controller_log,
            env=env,
            cwd=self.workdir,
        )
        processes.wait_until(
            self.controller,
            lambda: (
                "Starting workers" in self.controller.log_tail(400)
                or "Starting Controller" in self.controller.log_tail(400)
            ),
            timeout,
            "started",
        )

    def _service_account_kubeconfig(self, client: Any) -> Path:
        """A kubeconfig acting as the operator's ServiceAccount (cluster-admin), with a bearer token.

        As in a cluster, where the operator's pod has a ServiceAccount token; and spark-submit's Kubernetes
        client (fabric8) cannot read the admin kubeconfig's EC client key (PKCS#8 read as RSA: "Invalid DER")."""
        import yaml
        from kubernetes.client.exceptions import ApiException

        core, rbac = client.CoreV1Api(self._api), client.RbacAuthorizationV1Api(self._api)
        for create, body in (
            (
                lambda b: core.create_namespaced_service_account(OPERATOR_NAMESPACE, b),
                {"metadata": {"name": SERVICE_ACCOUNT}},
            ),
            (
                rbac.create_cluster_role_binding,
                {
                    "metadata": {"name": SERVICE_ACCOUNT},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE}],
                },
            ),
        ):
            try:
                create(body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
        token = core.create_namespaced_service_account_token(
            SERVICE_ACCOUNT,
            OPERATOR_NAMESPACE,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 7 * 86400},
            },
        ).status.token
        admin = yaml.safe_load(self.kubeconfig.read_text())
        cluster = admin["clusters"][0]["cluster"]
        path = self.workdir / "spark-operator.kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "local", "cluster": cluster}],
                    "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
                    "contexts": [{"name": "local", "context": {"cluster": "local", "user": SERVICE_ACCOUNT}}],
                    "current-context": "local",
                },
                indent=2,
            )
        )
        path.chmod(0o600)
        return path

    def _environment(self) -> dict[str, str]:
        server = urlsplit(self._api.configuration.host)
        env = {
            "KUBECONFIG": str(self._identity),
            # The controller's master URL for spark-submit: k8s://https://$KUBERNETES_SERVICE_HOST:$..._PORT.
            "KUBERNETES_SERVICE_HOST": server.hostname or "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(server.port or 443),
            "SPARK_HOME": str(spark_home()),
            "SPARK_SUBMIT_OPTS": os.environ.get("SPARK_SUBMIT_OPTS") or short_job_options(),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        return env

    def _apply_webhook_configurations(self, client: Any, port: int) -> None:
        from kubernetes.client.exceptions import ApiException

        admission = client.AdmissionregistrationV1Api(self._api)
        mutating, validating = webhook_configurations(port, self.namespaces)
        for body, create, delete in (
            (
                mutating,
                admission.create_mutating_webhook_configuration,
                admission.delete_mutating_webhook_configuration,
            ),
            (
                validating,
                admission.create_validating_webhook_configuration,
                admission.delete_validating_webhook_configuration,
            ),
        ):
            try:
                delete(WEBHOOK_NAME)  # one left by an earlier run names another port
            except ApiException as exc:
                if exc.status != 404:
                    raise
            create(body)

    def _ca_bundles_set(self, client: Any) -> bool:
        admission = client.AdmissionregistrationV1Api(self._api)
        for read in (admission.read_mutating_webhook_configuration, admission.read_validating_webhook_configuration):
            hooks = read(WEBHOOK_NAME).webhooks or []
            if not hooks or not all(h.client_config.ca_bundle for h in hooks):
                return False
        return True

    def stop(self) -> None:
        """Stop the controller, then the webhook, by PID, and unregister the webhook (a webhook that is gone
        would refuse every SparkApplication). Idempotent."""
        for process in (self.controller, self.webhook):
            if process is not None:
                process.stop()
        self.controller = self.webhook = None
        self._ports.release_all()
        if self._api is not None:
            from kubernetes import client

            admission = client.AdmissionregistrationV1Api(self._api)
            for delete in (
                admission.delete_mutating_webhook_configuration,
                admission.delete_validating_webhook_configuration,
            ):
                try:
                    delete(WEBHOOK_NAME, _request_timeout=10)
                except Exception:  # the API server may be stopping too
                    pass
            self._api.close()
            self._api = None

    def __enter__(self) -> "SparkOperator":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_spark_controller(
    kubeconfig: str | Path, workdir: str | Path, *, namespaces: Sequence[str] = ()
) -> SparkOperator:
    """The running Spark operator for the SparkApplications of `namespaces` (all when empty); `stop()` it.

    Applications should name Spark `pyspark_version()`, the Spark that runs their drivers here (the
    operator's REPRISE_SPARK_VERSION on the local platform), so the connector jars of the image map exactly.
    """
    return SparkOperator(kubeconfig, workdir, namespaces=namespaces).start()


__all__ = [
    "DRIVER_CONTAINER",
    "NOTICE",
    "SparkOperator",
    "driver_log",
    "driver_pid",
    "driver_pod_name",
    "install_crd",
    "start_spark_controller",
]
