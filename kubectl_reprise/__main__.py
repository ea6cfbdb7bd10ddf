"""The command line of `kubectl reprise`: arguments, the one-line errors, exit statuses, and the watch loop.

Exit statuses: 0 done (watch: the replay is Complete); 1 an error, a refused plan, or (watch) the replay
Failed; 2 bad arguments; 3 (watch) the replay was deleted or --timeout passed before it finished.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from datetime import datetime
from typing import Sequence

import yaml

from reprise_operator.api import GROUP, VERSION
from reprise_operator.doors.kube import KubeUnavailable
from reprise_operator.shared.settings import OAUTH_TOKEN_ENDPOINTS_ENV
from replay_worker.contract import utc_now

from . import controls, live_progress, plan as planning, tables
from .connection import PluginError, Target, connect, find, list_all
from .kafka_address import KafkaAddressing, addressing

EXAMPLES = {
    "plan": "kubectl reprise plan -f examples/reconsume-handover.yaml -n accounts\n"
    "  kubectl reprise plan -f rewind.yaml -o json\n\n"
    "Kafka is reached as the operator reaches it: names like kafka-bootstrap.kafka:9092 are mapped by\n"
    "REPRISE_KAFKA_BOOTSTRAP_ALIASES when it is set here, else, against `make run`'s cluster, by the\n"
    "mapping the local platform gives its operator.",
    "get": "kubectl reprise get -n accounts\n  kubectl reprise get -A",
    "status": "kubectl reprise status accounts-add-locale -n accounts\n  kubectl reprise status reconsume/accounts-add-locale -o yaml",
    "watch": "kubectl reprise watch accounts-add-locale -n accounts\n"
    "  kubectl reprise watch accounts-add-locale --timeout 2h && echo replayed",
    "approve": "kubectl reprise approve accounts-add-locale -n accounts",
    "reverify": "kubectl reprise reverify orders-v2-shadow -n shop",
    "suspend": "kubectl reprise suspend accounts-add-locale -n accounts",
    "resume": "kubectl reprise resume accounts-add-locale -n accounts",
    "cancel": "kubectl reprise cancel accounts-add-locale -n accounts\n  kubectl reprise cancel accounts-add-locale --yes",
    "rollback": "kubectl reprise rollback rewind-accounts -n accounts\n"
    "  kubectl reprise rollback rewind-accounts --yes --bootstrap-servers kafka:9092   # the Reconsume is deleted",
}

HELP = {
    "plan": "compute a Reconsume manifest's plan without creating anything",
    "get": "list the replays (all kinds) with phase, progress, lag and ETA",
    "status": "one replay: its conditions, plan and per-partition state",
    "watch": "follow a replay live until Complete (exit 0) or Failed (exit 1)",
    "approve": "approve a plan (annotate reprise.io/approve=true), or a held replay's cutover (reprise.io/approve-cutover=true)",
    "reverify": "run a failed spec.verify check again, without replaying (annotate reprise.io/reverify)",
    "suspend": "suspend a replay (spec.suspend: true)",
    "resume": "resume a suspended replay (spec.suspend: false)",
    "cancel": "cancel a replay (delete it; the operator hands back and cleans up)",
    "rollback": "restore a Rewind's live-group offsets from its rollback ConfigMap",
}


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = {"default": argparse.SUPPRESS} if suppress else {}
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)", **default)
    parser.add_argument("--context", help="kubeconfig context (default: the current context)", **default)
    parser.add_argument("-n", "--namespace", help="namespace (default: the context's namespace)", **default)
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (get)", **default)


def _token_endpoint_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--oauth-token-endpoint",
        action="append",
        dest="token_endpoints",
        metavar="URL",
        help="an OAuth token endpoint the Secret's OAUTHBEARER settings may name, as the chart's "
        f"kafka.oauthTokenEndpoints (repeatable; default: ${OAUTH_TOKEN_ENDPOINTS_ENV}, comma-separated); any "
        "other is refused, like every setting that would read a file or call a URL on this machine",
    )


def _token_endpoints(args: argparse.Namespace) -> tuple[str, ...]:
    given = args.token_endpoints or os.environ.get(OAUTH_TOKEN_ENDPOINTS_ENV, "").split(",")
    return tuple(e.strip() for e in given if e.strip())


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="kubectl reprise",
        description="Plan, follow and steer Reprise replays (Reconsume, Backfill, LakeReplay).",
        epilog="examples:\n  " + "\n  ".join(e.splitlines()[0] for e in EXAMPLES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(main, suppress=False)
    commands = main.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=HELP[name],
            description=HELP[name][0].upper() + HELP[name][1:] + ".",
            epilog="examples:\n  " + EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _common(sub, suppress=True)
        return sub

    p = command("plan")
    p.add_argument("-f", "--filename", required=True, help="the manifest (YAML; - for stdin)")
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    p.add_argument(
        "--rate",
        type=float,
        default=2000.0,
        help="records/s one consumer is assumed to process, for the estimate (default 2000; a "
        "REPRISE_MAX_RECORDS_PER_SECOND in the manifest wins)",
    )
    _token_endpoint_option(p)
    p = command("get")
    p.add_argument("name", nargs="?", help="KIND/NAME or NAME (default: all)")
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    p = command("status")
    p.add_argument("name", help="KIND/NAME or NAME")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    p = command("watch")
    p.add_argument("name", help="KIND/NAME or NAME")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between two looks (default 1)")
    p.add_argument("--timeout", type=_seconds, default=None, help="give up after this long (e.g. 90s, 30m, 2h): exit 3")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    for name in ("approve", "reverify", "suspend", "resume"):
        command(name).add_argument("name", help="KIND/NAME or NAME")
    p = command("cancel")
    p.add_argument("name", help="KIND/NAME or NAME")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        help="how long to wait for the cleanup to finish (default 2m; 0: do not wait)",
    )
    p = command("rollback")
    p.add_argument("name", help="the Rewind Reconsume's name (its ConfigMap is NAME-rollback)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--bootstrap-servers", help="Kafka to use when the Reconsume is deleted (else its spec.kafka)")
    _token_endpoint_option(p)
    return main


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        return float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration like 90s, 30m or 2h") from None


def _target(args: argparse.Namespace) -> Target:
    return connect(args.kubeconfig, args.context, args.namespace, bool(args.all_namespaces))


def _dump(obj: object, output: str) -> str:
    return json.dumps(obj, indent=2) if output == "json" else yaml.safe_dump(obj, sort_keys=False).rstrip()


def _now() -> datetime:
    return utc_now()


def run(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # librdkafka's own lines (one per retry: "Failed to resolve ...", hundreds while a broker is unreachable)
    # stay off the terminal: a command that cannot reach Kafka says so in one line that names the address.
    logging.getLogger("reprise_operator.librdkafka").disabled = True
    target = _target(args)
    if args.command == "plan":
        return _plan(args, target)
    if args.command == "get":
        if args.name:
            kind, body = find(target, args.name)
            items = [(kind, body)]
        else:
            items = list_all(target)
        if args.output != "table":
            print(_dump([body for _, body in items] if not args.name else items[0][1], args.output))
        elif not items:
            where = "any namespace" if target.namespace is None else f"namespace {target.namespace}"
            print(f"No Reprise replays in {where}.", file=sys.stderr)
        else:
            print(tables.get_table(items, _now(), target.namespace is None))
        return 0
    if args.command == "status":
        kind, body = find(target, args.name)
        print(tables.status_text(kind, body, _now()) if args.output == "text" else _dump(body, args.output))
        return 0
    if args.command == "watch":
        return watch(target, args.name, args.interval, args.timeout, plain=args.plain or not sys.stdout.isatty())
    if args.command == "approve":
        print(controls.approve(target, args.name))
    elif args.command == "reverify":
        print(controls.reverify(target, args.name))
    elif args.command in ("suspend", "resume"):
        print(controls.set_suspend(target, args.name, args.command == "suspend"))
    elif args.command == "cancel":
        print(controls.cancel(target, args.name, (lambda _q: True) if args.yes else controls.ask, args.timeout))
    elif args.command == "rollback":
        print(
            controls.rollback(
                target,
                args.name,
                (lambda _q: True) if args.yes else controls.ask,
                args.bootstrap_servers,
                token_endpoints=_token_endpoints(args),
            )
        )
    return 0


def _plan(args: argparse.Namespace, target: Target) -> int:
    status = 0
    kafka = _kafka_addressing(target)
    for body in planning.read_manifests(args.filename):
        # As kubectl apply: -n wins, then the manifest's namespace, then the context's.
        namespace = args.namespace or (body.get("metadata") or {}).get("namespace") or target.namespace or "default"
        try:
            found = planning.compute(
                target, body, namespace, args.rate, token_endpoints=_token_endpoints(args), kafka=kafka
            )
        except planning.PlanRefused as refused:
            if refused.shown is not None and args.output == "table":
                print(tables.plan_text(refused.shown, _now()))
            elif refused.shown is not None:
                print(
                    _dump(
                        {"plan": refused.shown, "refused": {"reason": refused.reason, "message": refused.message}},
                        args.output,
                    )
                )
            print(f"error: plan refused: {refused}", file=sys.stderr)
            status = 1
            continue
        print(planning_report(found, args))
    return status


def _kafka_addressing(target: Target) -> KafkaAddressing:
    """The operator's mapping of in-cluster Kafka names, as far as the plugin can know it (kafka_address)."""
    try:
        from local_platform.platform import read_state
    except ImportError:  # an installed plugin, without a checkout's local platform
        state = None
    else:
        state = read_state()
    return addressing(target.kube.api_client.configuration.host, os.environ, state)


def planning_report(found: planning.ManifestPlan, args: argparse.Namespace) -> str:
    if args.output == "table":
        return tables.plan_report(found, args.filename)
    return _dump(found.as_dict(), args.output)


def watch(target: Target, ref: str, interval: float, timeout: float | None, plain: bool, out=sys.stdout) -> int:
    """Follow a replay until it finishes; the exit status is its outcome."""
    kind, body = find(target, ref)
    name = body["metadata"]["name"]
    label = f"{kind.singular}/{name}"
    mode = tables.mode_of(kind, body)
    meter = live_progress.RateMeter()
    previous: live_progress.Frame | None = None
    height = 0
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        frame = live_progress.frame(label, mode, body, time.monotonic(), meter)
        if plain:
            for line in live_progress.plain_lines(previous, frame, tables.utc(_now())):
                out.write(line + "\n")
        else:
            width = shutil.get_terminal_size((120, 40)).columns
            lines = [line[: width - 1] for line in live_progress.terminal_lines(frame)]
            out.write(live_progress.redraw(lines, height))
            height = len(lines)
        out.flush()
        previous = frame
        if frame.phase == "Complete":
            out.write(f"{label} Complete: {frame.message}\n")
            return 0
        if frame.phase == "Failed":
            out.write(f"{label} Failed: {frame.message}\n")
            return 1
        if deadline is not None and time.monotonic() > deadline:
            out.write(f"{label} still {frame.phase} after --timeout; it goes on without you\n")
            return 3
        time.sleep(interval)
        try:
            fresh = target.kube.get_custom(GROUP, VERSION, kind.plural, target.namespace, name)
        except KubeUnavailable:
            continue  # a slow or restarting API server: look again, the replay goes on regardless
        if fresh is None:
            out.write(f"{label} was deleted before it finished\n")
            return 3
        body = fresh


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
