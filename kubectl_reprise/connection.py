"""Which cluster, which namespace and which resource a command means: kubeconfig, context, `-n` / `-A`,
and `KIND/NAME` or a bare NAME, resolved the way kubectl resolves them.

The API door itself is the operator's `Kube` (reprise_operator.doors.kube), built from the user's kubeconfig
instead of the operator's in-cluster account.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import urllib3

from kubernetes import config
from kubernetes.client.exceptions import ApiException

from reprise_operator.api import GROUP, KINDS, VERSION, KindDefinition
from reprise_operator.doors.kube import Kube


class PluginError(Exception):
    """What went wrong, in one line that names the fix; the command prints it and exits non-zero."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Target:
    """Where the plugin's commands go: the API door and the namespace (`None` with `-A`)."""

    kube: Kube
    namespace: str | None
    context: str


def connect(kubeconfig: str | None, context: str | None, namespace: str | None, all_namespaces: bool = False) -> Target:
    """The kubeconfig's current (or named) context, and its namespace unless `-n` names one."""
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = active
        if context is not None:
            chosen = next((c for c in contexts if c["name"] == context), None)
            if chosen is None:
                names = ", ".join(c["name"] for c in contexts) or "none"
                raise PluginError(f"--context {context}: no such context in the kubeconfig (it has: {names})")
        api = config.new_client_from_config(config_file=kubeconfig, context=chosen["name"])
    except config.ConfigException as exc:
        raise PluginError(f"no usable kubeconfig ({exc}): set KUBECONFIG or pass --kubeconfig") from None
    except FileNotFoundError as exc:
        raise PluginError(f"kubeconfig {exc.filename} not found: set KUBECONFIG or pass --kubeconfig") from None
    if all_namespaces:
        ns = None
    else:
        ns = namespace or (chosen.get("context") or {}).get("namespace") or "default"
    return Target(Kube(api), ns, chosen["name"])


def kind_named(word: str) -> KindDefinition | None:
    """`reconsume`, `reconsumes`, `rcs`, `Reconsume`, `reconsumes.reprise.io`: the kind they name."""
    word = word.lower().removesuffix(f".{GROUP}")
    for kind in KINDS:
        if word in (kind.kind.lower(), kind.plural, kind.singular, *kind.short_names):
            return kind
    return None


def kind_of_manifest(kind: str) -> KindDefinition:
    found = kind_named(kind)
    if found is None:
        raise PluginError(f"kind {kind}: not a Reprise kind (one of {', '.join(k.kind for k in KINDS)})")
    return found


def explain(exc: ApiException, what: str) -> PluginError:
    """An API server's refusal as one line that names the fix."""
    if exc.status == 404:
        return PluginError(f"{what}: not found")
    try:
        message = json.loads(exc.body).get("message") or exc.reason
    except (TypeError, ValueError):
        message = exc.reason
    if exc.status == 403:
        if "admission webhook" in str(message):
            # Reprise's webhook names the missing right (an approval needs the verb `approve`): say it as it is.
            return PluginError(f"{what}: {message}")
        return PluginError(f"{what}: forbidden for this user; ask for RBAC on {GROUP} resources")
    return PluginError(f"{what}: the API server answered {exc.status}: {message}")


def api_call(fn, *args, what: str, **kwargs):
    """One API call, its failures turned into a one-line PluginError."""
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        raise explain(exc, what) from None
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        raise PluginError(
            f"{what}: cannot reach the API server ({type(exc).__name__}); check --context or KUBECONFIG"
        ) from None


def find(target: Target, ref: str) -> tuple[KindDefinition, dict]:
    """The object `ref` names: `KIND/NAME`, or a bare NAME looked up in every Reprise kind."""
    if target.namespace is None:
        raise PluginError(f"{ref}: -A lists resources; a single resource needs a namespace (-n NAMESPACE)")
    custom = target.kube.custom
    if "/" in ref:
        word, name = ref.split("/", 1)
        kind = kind_named(word)
        if kind is None:
            raise PluginError(f"{ref}: {word} is not a Reprise kind (reconsume, backfill, lakereplay)")
        body = api_call(
            custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            target.namespace,
            kind.plural,
            name,
            what=f"{kind.singular} {name} in namespace {target.namespace}",
        )
        return kind, body
    found: list[tuple[KindDefinition, dict]] = []
    for kind in KINDS:
        try:
            body = custom.get_namespaced_custom_object(GROUP, VERSION, target.namespace, kind.plural, ref)
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise explain(exc, f"{kind.singular} {ref}") from None
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise PluginError(
                f"reading {ref}: cannot reach the API server ({type(exc).__name__}); check --context or KUBECONFIG"
            ) from None
        found.append((kind, body))
    if not found:
        raise PluginError(
            f"no Reprise replay named {ref} in namespace {target.namespace}: "
            f"list them with `kubectl reprise get -n {target.namespace}` or `-A`"
        )
    if len(found) > 1:
        kinds = " or ".join(f"{k.singular}/{ref}" for k, _ in found)
        raise PluginError(f"{ref} names more than one replay: say which, {kinds}")
    return found[0]


def list_all(target: Target) -> list[tuple[KindDefinition, dict]]:
    """Every Reprise replay in the namespace (or all namespaces), all kinds, sorted by namespace and name."""
    items: list[tuple[KindDefinition, dict]] = []
    custom = target.kube.custom
    for kind in KINDS:
        if target.namespace is None:
            got = api_call(
                custom.list_cluster_custom_object, GROUP, VERSION, kind.plural, what=f"listing {kind.plural}"
            )
        else:
            got = api_call(
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                target.namespace,
                kind.plural,
                what=f"listing {kind.plural} in namespace {target.namespace}",
            )
        items.extend((kind, body) for body in got.get("items") or [])
    items.sort(key=lambda kb: (kb[1]["metadata"].get("namespace", ""), kb[1]["metadata"]["name"], kb[0].kind))
    return items
