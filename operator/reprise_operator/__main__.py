"""`python -m reprise_operator`: run the operator (metrics, leader election, then Kopf)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import warnings

import kopf

from . import admission, handlers
from .rules import routine_logs
from .doors.kube import Kube, load_client_config
from .doors.leadership import Leadership
from .shared.metrics import serve
from .core.runtime import Runtime
from .shared.settings import OperatorSettings, SettingsError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m reprise_operator",
        description=(
            "Reprise: reconciles Backfill, Reconsume and LakeReplay resources (group reprise.io). "
            "Settings come from REPRISE_* environment variables; see reprise_operator/shared/settings.py."
        ),
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=None,
        help="watch only this namespace (repeatable); default: REPRISE_NAMESPACES or the whole cluster",
    )
    parser.add_argument("--no-leader-election", action="store_true", help="run without taking the leader Lease")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


async def _beat(rt: Runtime) -> None:
    """Liveness: proves the event loop still runs, with or without resources to reconcile. Also closes the Kafka
    connections nobody used for the idle time (of resources that finished or went away)."""
    while True:
        rt.heartbeat.beat()
        rt.sweep_idle()
        await asyncio.sleep(10)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format='{"time":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","message":"%(message)s"}',
    )
    routine_logs.install()
    # confluent-kafka's RuntimeWarnings (a bootstrap producer closed while a fenced init is still under way) are
    # log lines like any other, not raw lines on the terminal.
    logging.captureWarnings(True)
    warnings.formatwarning = routine_logs.one_line_warning
    try:
        settings = OperatorSettings.from_env()
    except SettingsError as exc:
        print(f"reprise-operator: {exc}", file=sys.stderr)
        return 2
    namespaces = tuple(args.namespace or settings.namespaces)
    rt = Runtime(settings=settings, kube=Kube(load_client_config()))
    if settings.metrics_port:
        serve(settings.metrics_port, rt.heartbeat.healthy)
    if settings.webhook_port:
        # Before the Lease: every replica serves the webhook (see `admission`).
        admission.start(rt.kube, settings, namespaces)
    # Named here, not left to Kopf: Kopf's own default asks getpass.getuser(), which raises KeyError for the
    # image's uid 65532 (no /etc/passwd entry, no USER in a pod's env) and crash-looped the chart's pod.
    identity = f"{socket.gethostname()}-{os.getpid()}"
    if settings.leader_election and not args.no_leader_election:
        Leadership(rt.kube, settings.lease_namespace, identity=identity).acquire()

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: object) -> kopf.ConnectionInfo | None:
        # The same credentials as the kubernetes client: in-cluster, else $KUBECONFIG.
        return kopf.login_via_client(**kwargs)

    beats: list[asyncio.Task[None]] = []

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, logger: logging.Logger, **_: object) -> None:
        handlers.configure(settings)
        beats.append(asyncio.create_task(_beat(rt)))
        where = ", ".join(namespaces) if namespaces else "all namespaces"
        logger.info("reprise operator watching Reconsume, Backfill and LakeReplay in %s", where)

    @kopf.on.cleanup(registry=registry)
    async def shutdown(**_: object) -> None:
        await rt.handovers.aio.close()

    handlers.register(registry, rt)
    kopf.run(
        registry=registry,
        standalone=True,
        clusterwide=not namespaces,
        namespaces=list(namespaces),
        memo=kopf.Memo(rt=rt),
        identity=identity,  # type: ignore[arg-type]  # kopf's Identity (a NewType of str) is not exported
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
