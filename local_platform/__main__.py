"""The platform CLI: `python -m local_platform build|up|down|status|run-operator` (what `make` calls).

Every setup problem is a PlatformError, printed as one line `reprise: <message>` with exit code 2.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from .errors import PlatformError
from .kafka_tenants import CLIENT_SECRET, MultiTenant, namespace_manifests
from .processes import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent

DESCRIPTION = """\
The local platform of Reprise: a real Kafka broker (jars from Maven Central) and a real Kubernetes
control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, built from the Go module
proxy) on loopback, with a node agent that runs the project's own pods as local processes (these
machines have no container runtime). Builds are cached under ~/.cache/reprise (or $REPRISE_CACHE)."""

EPILOG = """\
examples:
  python -m local_platform build          # first time on a machine: build/fetch everything (minutes)
  python -m local_platform up             # start it; Ctrl-C stops it
  python -m local_platform run-operator   # the operator on $KUBECONFIG's cluster, or on a fresh local platform
  python -m local_platform run-operator --local --multi-tenant   # teams team-a, team-b on a SASL listener with ACLs
  python -m local_platform status
  python -m local_platform down           # stop a platform another terminal started"""


NODE_NAMES = {"agent": "the node agent", "real": "a real node: kubelet + containerd"}


class _Stop(BaseException):
    """SIGTERM, turned into an exception so `finally` blocks tear the platform down."""


def _raise_stop(signum: int, frame: Any) -> None:
    raise _Stop()


def _say(message: str) -> None:
    print(message, flush=True)


def cmd_build(args: argparse.Namespace) -> int:
    from .kafka_broker import ensure_kafka, kafka_version
    from .toolchain import COMPONENTS, ensure

    total = time.monotonic()
    for component in COMPONENTS:
        began = time.monotonic()
        cached = component.built()
        paths = ensure(component, announce=_say)
        where = paths[0].parent
        _say(
            f"{component.name} {component.version}: {'cached' if cached else f'built in {time.monotonic() - began:.0f}s'} ({where})"
        )
    if not args.skip_kafka:
        began = time.monotonic()
        version = kafka_version()
        _say(f"kafka {version}: resolving jars with Maven if not cached ...")
        libs = ensure_kafka()
        _say(f"kafka {version}: ready in {time.monotonic() - began:.0f}s ({libs})")
        # LakeReplay's parts: Spark's Kafka connector jars (Maven) and the real SparkApplication CRD (Go proxy).
        from .spark_jars import ensure_spark_jars
        from .spark_operator import ensure_sparkapplication_crd

        began = time.monotonic()
        jars = ensure_spark_jars()
        crd = ensure_sparkapplication_crd()
        _say(
            f"spark: {len(jars)} connector jars and the SparkApplication CRD ready in {time.monotonic() - began:.0f}s ({crd.parent})"
        )
        # The lake's object store (one jar); the lake's own jar sets are resolved when a resource asks for one.
        from .object_store import S3PROXY_VERSION, ensure_s3proxy

        began = time.monotonic()
        s3proxy = ensure_s3proxy()
        _say(f"s3proxy {S3PROXY_VERSION}: ready in {time.monotonic() - began:.0f}s ({s3proxy})")
        from .spark_jvm import archive_path, ensure_class_data_archive

        began, cached = time.monotonic(), archive_path().is_file()
        archive = ensure_class_data_archive()
        _say(
            f"spark: class-data archive {'cached' if cached else f'dumped in {time.monotonic() - began:.0f}s'} ({archive})"
        )
    _say(f"everything is in the cache ({time.monotonic() - total:.0f}s)")
    return 0


def _wait_for_signal() -> None:
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started from a script, which ignores SIGINT
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, _Stop):
        pass


def summary_line(total_s: float, platform_s: float, control_plane_s: float, node: str = "the node agent") -> str:
    """The headline once everything is up: the time that passed since the command started (what the user waited),
    then the parts (Kafka, Kubernetes and the node agent together; the control plane alone)."""
    return (
        f"local platform up in {total_s:.1f}s (Kafka, Kubernetes and {node} {platform_s:.1f}s, "
        f"of which the control plane {control_plane_s:.1f}s)"
    )


def _platform_summary(platform: Any, began: float) -> None:
    node = "the node agent" if platform.agent is not None else "the real node"
    _say(summary_line(time.monotonic() - began, platform.started_in, platform.control_plane.startup_seconds, node))
    _say(f"  kubeconfig: {platform.kubeconfig}")
    _say(f"  export KUBECONFIG={platform.kubeconfig}")
    if platform.bootstrap:
        _say(f"  Kafka bootstrap: {platform.bootstrap}")
    _say(f"  kubectl: {platform.kubectl}")
    # bin/kubectl-reprise runs the plugin from this checkout; kubectl finds it on the PATH.
    _say(f"  kubectl reprise: export PATH={REPO_ROOT / 'bin'}:{Path(platform.kubectl).parent}:$PATH")
    if platform.agent is not None:
        _say(f"  node agent pods (volumes, logs): {platform.agent.workdir / 'pods'}")
    else:
        node = platform.real_node
        _say(
            f"  real node {node.name} (kubelet + containerd): logs {node.workdir / 'logs'}; a container's log: kubectl logs"
        )
        _say(f"  its containers: {' '.join(node.ctr)} -n k8s.io tasks ls")


def cmd_up(args: argparse.Namespace) -> int:
    from .platform import LocalPlatform

    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started from a script, which ignores SIGINT
    platform = LocalPlatform(kafka=not args.no_kafka)
    began = time.monotonic()
    try:
        _say("starting the local platform (Kafka, the control plane, the node agent) ...")
        platform.up()
        _platform_summary(platform, began)
        _say("running; Ctrl-C (or `python -m local_platform down`) stops it")
        _wait_for_signal()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        _say("stopping the local platform ...")
        platform.down()
        _say("stopped")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from .platform import stop_recorded

    stopped = stop_recorded()
    if not stopped:
        _say("no local platform is running")
    for what in stopped:
        _say(f"stopped {what}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .platform import status

    state = status()
    if state is None:
        _say("no local platform is recorded (start one with `python -m local_platform up`)")
        return 1
    if args.json:
        _say(json.dumps(state, indent=2))
        return 0 if state["owner_alive"] else 1
    owner = state["owner"][0]
    _say(
        f"local platform of process {owner}: {'running' if state['owner_alive'] else 'NOT running (stale; run `down`)'}"
        f" since {state.get('started_at')}"
    )
    _say(f"  export KUBECONFIG={state['kubeconfig']}")
    if state.get("bootstrap"):
        _say(f"  Kafka bootstrap: {state['bootstrap']}")
    for name, pid_and_ticks in state.get("processes", {}).items():
        _say(f"  {name:<24} pid {pid_and_ticks[0]:<8} {'alive' if state['alive'][name] else 'gone'}")
    return 0 if state["owner_alive"] else 1


def _reachable(kubeconfig: str) -> str | None:
    """None when the cluster of `kubeconfig` answers /version, else why not (one line)."""
    try:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=kubeconfig)
        try:
            client.VersionApi(api).get_code(_request_timeout=5)
        finally:
            api.close()
    except Exception as exc:  # any failure means "not usable"; the reason is shown
        return str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    return None


def _operator_command(extra: Sequence[str]) -> list[str]:
    if (
        importlib.util.find_spec("reprise_operator") is None
        or importlib.util.find_spec("reprise_operator.__main__") is None
    ):
        raise PlatformError(
            "the operator cannot run yet: reprise_operator has no __main__ module (operator/reprise_operator/__main__.py)"
        )
    return [sys.executable, "-m", "reprise_operator", *extra]


def _run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run the operator until it exits or we get Ctrl-C/SIGTERM (then stop it by PID, gracefully)."""
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started from a script, which ignores SIGINT
    proc = subprocess.Popen(argv, env=env, cwd=REPO_ROOT, start_new_session=True)
    try:
        return proc.wait()
    except (KeyboardInterrupt, _Stop):
        _say("stopping the operator ...")
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 0


def _operator_env(kubeconfig: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, KUBECONFIG=kubeconfig, **(extra or {}))
    paths = [str(REPO_ROOT), str(REPO_ROOT / "operator")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def start_prometheus(platform: Any, operator_port: int) -> Any:
    """Prometheus with the chart's rules (as rendered, default windows) and the example lag alerts, scraping
    the operator at `operator_port` and the node agent's pods; recorded so `down` stops it by PID."""
    from .prometheus import CHART, PrometheusServer, chart_rules
    from .toolchain import ensure_helm, ensure_prometheus

    binary = ensure_prometheus(announce=_say)
    folder = platform.workdir / "prometheus"
    rules = chart_rules(ensure_helm(announce=_say), folder / "reprise-rules.yaml")
    server = PrometheusServer(
        binary,
        folder,
        operator_port=operator_port,
        targets_file=platform.agent.scrape_targets_file if platform.agent is not None else _no_targets(folder),
        rule_files=[rules, CHART / "monitoring" / "lag-alerts.rules.yaml"],
    ).start()
    assert server.pid is not None
    platform.record_process("prometheus", server.pid)
    platform.record_url("prometheus", server.url)
    return server


def _no_targets(folder: Path) -> Path:
    """An empty file of scrape targets: on the real node Prometheus scrapes the operator's pod by its host port."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "targets.json").write_text("[]")
    return folder / "targets.json"


def _run_chart_release(platform: Any, metrics_port: int, env: dict[str, str]) -> int:
    """The operator as the chart's Deployment on the real node, in the image the Dockerfile builds; then wait for
    Ctrl-C/SIGTERM (the caller stops the platform, the node and its pods with it)."""
    from . import chart_release, node_images

    began = time.monotonic()
    _say("  building the operator's image from the Dockerfile (cached by the hash of its inputs) ...")
    tag, seconds = node_images.reprise_image()
    platform.real_node.load_image(tag, f"{chart_release.IMAGE_REPOSITORY}:{chart_release.IMAGE_TAG}")
    _say(
        f"  image {tag} ({'built in %.0fs' % seconds if seconds else 'cached'}), loaded as reprise:dev; helm install ..."
    )
    values = chart_release.values(
        api_port=platform.control_plane.port, metrics_port=metrics_port, webhook_port=free_port(), extra_env=env
    )
    pod = chart_release.install(
        platform.helm, platform.kubectl, platform.kubeconfig, values, platform.workdir / "chart"
    )
    _say(
        f"  release {chart_release.RELEASE} installed; operator pod {pod} Ready after {time.monotonic() - began:.1f}s "
        f"(helm list -A; kubectl get pods -n {chart_release.NAMESPACE}; kubectl logs -n {chart_release.NAMESPACE} {pod})"
    )
    _say("running; Ctrl-C (or `make clean-platform` from another shell) stops the operator and the platform")
    _wait_for_signal()
    return 0


def start_schema_registry(platform: Any) -> Any:
    """Apicurio Registry (the Confluent-compatible API, BACKWARD), for Avro and Protobuf topics; recorded so
    `down` stops it by PID."""
    from .schema_registry import SchemaRegistry

    _say("  starting the schema registry (Apicurio; 30-60 s on a loaded machine) ...")
    registry = SchemaRegistry(platform.workdir / "schema-registry").start()
    assert registry.pid is not None
    platform.record_process("schema-registry", registry.pid)
    platform.record_url("schema-registry", registry.url)
    return registry


def cmd_run_operator(args: argparse.Namespace) -> int:
    argv = _operator_command(args.operator_args)
    kubeconfig = os.environ.get("KUBECONFIG")
    if kubeconfig and not args.local:
        problem = _reachable(kubeconfig)
        if problem is None:
            _say(
                f"running the operator on the cluster of KUBECONFIG={kubeconfig} "
                "(its CRDs are not installed for you there: kubectl apply -f crds/)"
            )
            return _run_foreground(argv, _operator_env(kubeconfig))
        _say(f"KUBECONFIG={kubeconfig} is not reachable ({problem}); starting the local platform instead")

    from reprise_operator.api import KINDS  # the one list of kinds: the plurals asked for below

    from .platform import IN_CLUSTER_KAFKA, LocalPlatform

    crds = sorted(glob.glob(str(REPO_ROOT / "crds" / "*.yaml")))
    if not crds:
        raise PlatformError("crds/ has no CRD manifests: generate them with `make crds`")
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started from a script, which ignores SIGINT
    multi_tenant = MultiTenant() if args.multi_tenant else None
    platform = LocalPlatform(multi_tenant=multi_tenant, node=args.node)
    spark_controller = None
    began = time.monotonic()
    prometheus = None
    object_store = None
    schema_registry = None
    try:
        _say(f"starting the local platform (Kafka, the control plane, {NODE_NAMES[platform.node]}) ...")
        platform.up()
        _say(f"  Kafka and Kubernetes up in {platform.started_in:.1f}s; installing the Reprise CRDs ...")
        applied = subprocess.run(
            [
                str(platform.kubectl),
                f"--kubeconfig={platform.kubeconfig}",
                "apply",
                "--server-side",
                *sum((["-f", c] for c in crds), []),
            ],
            capture_output=True,
            text=True,
        )
        if applied.returncode != 0:
            raise PlatformError(
                f"installing crds/ failed: {applied.stderr.strip().splitlines()[-1] if applied.stderr.strip() else applied.returncode}"
            )
        subprocess.run(
            [
                str(platform.kubectl),
                f"--kubeconfig={platform.kubeconfig}",
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                *sum((["-f", c] for c in crds), []),
            ],
            capture_output=True,
            text=True,
        )
        # Established is not yet served: a new resource's storage answers 429 for a moment, which the
        # operator's first watch would log as an error.
        deadline = time.monotonic() + 30
        while (
            subprocess.run(
                [
                    str(platform.kubectl),
                    f"--kubeconfig={platform.kubeconfig}",
                    "get",
                    ",".join(kind.plural for kind in KINDS),
                    "-A",
                ],
                capture_output=True,
            ).returncode
            != 0
        ):
            if time.monotonic() > deadline:
                raise PlatformError("the API server does not serve the Reprise kinds 30 s after installing crds/")
            time.sleep(0.2)
        if multi_tenant is not None:
            _set_up_tenants(platform, multi_tenant)
        from . import admission_webhook
        from .spark_controller import NOTICE, install_crd, start_spark_controller
        from .spark_jars import pyspark_version

        _say(f"  CRDs served after {time.monotonic() - began:.1f}s; starting the Spark operator ...")
        install_crd(platform.kubeconfig)
        spark_controller = start_spark_controller(platform.kubeconfig, platform.workdir / "spark-operator")
        for process in (spark_controller.controller, spark_controller.webhook):
            if process is not None:
                platform.record_process(process.name, process.pid)
        metrics_port = free_port()
        prometheus = start_prometheus(platform, metrics_port)
        object_store = _start_object_store(platform)
        schema_registry = start_schema_registry(platform)
        _platform_summary(platform, began)
        _say(f"  Schema registry (spec.schemaRegistry.url of an Avro or Protobuf resource): {schema_registry.url}")
        _say(
            f"  Prometheus (the chart's alert rules and the example lag alerts, no web UI): {prometheus.url}; "
            f"alerts: curl -s {prometheus.url}/api/v1/alerts; a query: curl -s '{prometheus.url}/api/v1/query' "
            "--data-urlencode 'query=reprise:consumergroup_under_replay'"
        )
        _say(f"  CRDs installed: {', '.join(Path(c).name for c in crds)}, the Spark operator's (sparkoperator.k8s.io)")
        if platform.agent is not None:
            _say(f"  {NOTICE}")
        else:
            _say(
                "  Spark operator: running, but LakeReplay's driver pods are not run on the real node yet (NODE=agent)"
            )
        if platform.agent is not None:
            _say(
                f"  Spark operator logs: {spark_controller.workdir}/controller.log, webhook.log; a driver's log: "
                f"{platform.agent.workdir / 'pods'}/<namespace>_<app>-driver_*/logs/spark-kubernetes-driver.log"
            )
        aliases = platform.kafka_bootstrap_aliases or ""
        _say(
            f"  Kafka in-cluster names: {IN_CLUSTER_KAFKA} (kafka-bootstrap.kafka:9092 of examples/) is {aliases.partition('=')[2] or platform.bootstrap} "
            f"for the operator and the pods it makes (REPRISE_KAFKA_BOOTSTRAP_ALIASES={aliases})"
        )
        operator_env = {
            "REPRISE_KAFKA_BOOTSTRAP_ALIASES": aliases,
            # The SparkApplications it makes name the Spark of the local drivers' spark-submit, whose jars are mapped.
            "REPRISE_SPARK_VERSION": pyspark_version(),
        }
        if platform.real_node is not None:
            return _run_chart_release(platform, metrics_port, operator_env)
        _say("running the operator (Ctrl-C stops it and the platform) ...")
        return _run_foreground(
            argv,
            _operator_env(
                str(platform.kubeconfig),
                {
                    **operator_env,
                    # Its admission webhook on 127.0.0.1, registered by the operator itself (the API server is local).
                    **admission_webhook.webhook_env(platform.workdir / "webhook-tls", free_port()),
                    "REPRISE_METRICS_PORT": str(metrics_port),  # the port Prometheus scrapes
                },
            ),
        )
    except (KeyboardInterrupt, _Stop):
        return 0
    finally:
        if schema_registry is not None:
            _say("stopping the schema registry ...")
            schema_registry.stop()
        if prometheus is not None:
            _say("stopping Prometheus ...")
            prometheus.stop()
        if object_store is not None:
            _say("stopping S3Proxy ...")
            object_store.stop()
        if spark_controller is not None:
            _say("stopping the Spark operator ...")
            spark_controller.stop()
        _say("stopping the local platform ...")
        platform.down()
        _say("stopped")


def _start_object_store(platform: Any) -> Any:
    """S3Proxy on loopback with the demo bucket; its credentials go to a file only the user can read (and
    to the LakeReplays' Secrets the demo makes), never to the terminal."""
    from .object_store import DEMO_BUCKET, ObjectStore

    store = ObjectStore(platform.workdir / "s3")
    store.start()
    pid = store.pid
    if pid is not None:  # recorded so `python -m local_platform down` stops it too, by its PID
        platform.record_process("s3proxy", pid)
    store.create_bucket(DEMO_BUCKET)
    credentials = platform.workdir / "s3" / "credentials.env"
    credentials.write_text("".join(f"{key}={value}\n" for key, value in store.credentials_env().items()))
    credentials.chmod(0o600)
    platform.record_url("s3", store.endpoint)
    _say(
        f"  S3 (S3Proxy, path-style): {store.endpoint}, bucket {DEMO_BUCKET}, objects under {store.data_dir}; "
        f"credentials in {credentials}"
    )
    return store


def _set_up_tenants(platform: Any, multi_tenant: MultiTenant) -> None:
    """The teams of the multi-tenant form: topics the platform owns, and each team's namespace and Secret."""
    multi_tenant.create_topics(platform.kafka)
    manifests = [m for t in multi_tenant.tenants for m in namespace_manifests(t)]
    kubectl = [str(platform.kubectl), f"--kubeconfig={platform.kubeconfig}"]
    # Server-side: a client-side apply would copy the Secrets' passwords into an annotation.
    applied = subprocess.run(
        [*kubectl, "apply", "--server-side", "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}),
        capture_output=True,
        text=True,
    )
    if applied.returncode != 0:
        raise PlatformError(f"creating the teams' namespaces failed: {applied.stderr.strip()}")
    # The chart's Kafka prefix policy, bound to the teams' namespaces only (the examples elsewhere keep their names).
    teams = [t.name for t in multi_tenant.tenants]
    policy = subprocess.run(
        [
            str(platform.helm),
            "template",
            "reprise",
            str(REPO_ROOT / "charts" / "reprise"),
            "--set",
            "networkPolicy.enabled=false",
            "--set-json",
            f"watchNamespaces={json.dumps(teams)}",
            "--show-only",
            "templates/admission/kafka-prefixes.yaml",
        ],
        capture_output=True,
        text=True,
    )
    if policy.returncode == 0:
        policy = subprocess.run([*kubectl, "apply", "-f", "-"], input=policy.stdout, capture_output=True, text=True)
    if policy.returncode != 0:
        raise PlatformError(f"installing the chart's kafka-prefixes policy failed: {policy.stderr.strip()}")
    names = ", ".join(teams)
    _say(
        f"  multi-tenant Kafka: SASL/PLAIN on {platform.kafka.sasl_bootstrap} with ACLs (docs/security.md); "
        f"namespaces {names}, each with Secret `{CLIENT_SECRET}` (its principal) for spec.kafka.configFrom; "
        f"shared topic {', '.join(multi_tenant.shared_topics)}; the chart's kafka-prefixes policy binds them; "
        f"PLAINTEXT {platform.bootstrap} stays the platform's"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m local_platform",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = sub.add_parser(
        "build",
        help="build/fetch every binary and Kafka's jars into the cache (once per machine)",
        description="Build etcd, the Kubernetes control plane, kubectl, helm, the Spark operator, promtool and Prometheus from the Go module "
        "proxy and resolve Kafka's jars from Maven Central, unless already cached.",
    )
    build.add_argument("--skip-kafka", action="store_true", help="only the Go-built binaries")
    build.set_defaults(func=cmd_build)

    up = sub.add_parser(
        "up",
        help="start Kafka + Kubernetes + the node agent in the foreground until Ctrl-C",
        description="Start the local platform and keep it running until Ctrl-C or SIGTERM; prints the "
        "kubeconfig path and the Kafka bootstrap address.",
    )
    up.add_argument("--no-kafka", action="store_true", help="only Kubernetes")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop a local platform started by another process (by PID)")
    down.set_defaults(func=cmd_down)

    st = sub.add_parser("status", help="show the recorded local platform and whether its processes live")
    st.add_argument("--json", action="store_true", help="the recorded state as JSON")
    st.set_defaults(func=cmd_status)

    run = sub.add_parser(
        "run-operator",
        help="run the operator on $KUBECONFIG's cluster, or on a fresh local platform",
        description="If KUBECONFIG is set and its cluster answers, run `python -m reprise_operator` there. Otherwise "
        "start the local platform, install crds/*.yaml, print the KUBECONFIG export and the Kafka "
        "bootstrap, run the operator in the foreground, and stop everything on Ctrl-C/SIGTERM. "
        "Arguments after `--` go to the operator.",
    )
    run.add_argument("--local", action="store_true", help="use a local platform even if KUBECONFIG is set")
    run.add_argument(
        "--multi-tenant",
        action="store_true",
        help="the multi-tenant form (`make run TENANTS=1`): a SASL listener with ACLs, namespaces team-a and team-b",
    )
    run.add_argument(
        "--node",
        choices=("agent", "real"),
        default=os.environ.get("REPRISE_NODE") or "agent",
        help="the local platform's node: `agent` runs pods as local processes and the operator as one; `real` is a "
        "kubelet + containerd, the operator installed by the Helm chart in its image (root; docs/local-platform.md)",
    )
    run.add_argument("operator_args", nargs=argparse.REMAINDER, help="arguments for the operator (after --)")
    run.set_defaults(func=cmd_run_operator)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "operator_args", None) and args.operator_args[0] == "--":
        args.operator_args = args.operator_args[1:]
    try:
        return int(args.func(args) or 0)
    except PlatformError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"reprise: {first}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
