"""The operator's only door to the Kubernetes API (besides Kopf's own watching).

Objects go in and come out as plain dicts in the API's own camelCase shape, the same shape the pure
builders produce, so nothing converts between models and client classes. The kubernetes client blocks;
async callers use the `a*` wrappers, which run the call in a thread.

Creates are idempotent: a child that already exists (the operator restarted between creating it and
recording it) is read back instead of failing, so a restart never makes a duplicate.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any, Callable, TypeVar, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ..shared.constants import CREATED_FOR_ANNOTATION, GROUP, VERSION

T = TypeVar("T")

#: The client's error, named here so that code behind this door never imports the client itself.
ApiError = ApiException

#: How long a Secret's values are served from the cache before its resourceVersion is checked again:
#: a rotated Secret is picked up within this many seconds.
SECRET_RECHECK_S = 30.0
#: Ask the API server for an object's metadata only (no Secret values cross the wire for a check).
_METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"}


class KubeUnavailable(RuntimeError):
    """A temporary API failure (timeouts, 5xx, conflicts): back off and retry."""


class SecretNotLabelled(RuntimeError):
    """A Secret a resource names lacks the opt-in label: its values were not read."""

    def __init__(self, namespace: str, name: str, label: str) -> None:
        super().__init__(f"Secret {namespace}/{name} is not labelled {label}=true")
        self.namespace, self.name, self.label = namespace, name, label


class NotOwned(RuntimeError):
    """A child name is taken by an object this resource does not own: a person must resolve it."""


def load_client_config() -> client.ApiClient:
    """In a pod, the service account; elsewhere, `$KUBECONFIG` or `~/.kube/config`."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def _json(response: Any) -> dict:
    return json.loads(response.data)


def _temporary(exc: ApiException) -> bool:
    return exc.status in (409, 429) or exc.status >= 500


class Kube:
    def __init__(self, api_client: client.ApiClient):
        self.api_client = api_client
        self.apps = client.AppsV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.authorization = client.AuthorizationV1Api(api_client)
        self.admissionregistration = client.AdmissionregistrationV1Api(api_client)
        #: (namespace, name) -> (resourceVersion, decoded data, monotonic time of the last check).
        self._secrets: dict[tuple[str, str], tuple[str, dict[str, str], float]] = {}
        self._secrets_lock = threading.Lock()
        #: The async face of this door: `await kube.aio.get_job(ns, name)` (see `AsyncKube`).
        self.aio = AsyncKube(self)

    # -- reads ----------------------------------------------------------------------------

    def _read(self, fn: Callable[..., Any], *args: Any, headers: dict[str, str] | None = None) -> dict | None:
        try:
            if headers:
                return _json(fn(*args, _preload_content=False, _headers=headers))
            return _json(fn(*args, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            if _temporary(exc):
                raise KubeUnavailable(f"reading: {exc.status} {exc.reason}") from None
            raise

    def get_deployment(self, namespace: str, name: str) -> dict | None:
        return self._read(self.apps.read_namespaced_deployment, name, namespace)

    def get_job(self, namespace: str, name: str) -> dict | None:
        return self._read(self.batch.read_namespaced_job, name, namespace)

    def get_configmap(self, namespace: str, name: str) -> dict | None:
        return self._read(self.core.read_namespaced_config_map, name, namespace)

    def get_custom(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict | None:
        return self._read(self.custom.get_namespaced_custom_object, group, version, namespace, plural, name)

    def secret_data(self, namespace: str, name: str, label: str | None = None) -> dict[str, str] | None:
        """A Secret's values, decoded. The caller must never log, store or emit them.

        With `label`, only a Secret labelled `<label>=true` is read: another raises `SecretNotLabelled`, and its
        values never cross the wire (its metadata is read first). So naming a Secret in a resource reads nothing
        its owner did not opt in to.

        Cached by resourceVersion: every replay polls `Resource.kafka()` every few seconds, and the values
        only change when the Secret does. Within `SECRET_RECHECK_S` the cached values are returned with no
        request; after it, only the Secret's metadata is read (no values cross the wire) and the values are
        read again only when its resourceVersion moved. A deleted Secret is noticed at the next check."""
        key = (namespace, name)
        now = time.monotonic()
        with self._secrets_lock:
            cached = self._secrets.get(key)
        if cached is not None and now - cached[2] < SECRET_RECHECK_S:
            return dict(cached[1])
        meta = self._read(self.core.read_namespaced_secret, name, namespace, headers=_METADATA_ONLY)
        if meta is None:
            with self._secrets_lock:
                self._secrets.pop(key, None)
            return None
        self._check_label(meta, key, label)
        if cached is not None and (meta.get("metadata") or {}).get("resourceVersion") == cached[0]:
            with self._secrets_lock:
                self._secrets[key] = (cached[0], cached[1], now)
            return dict(cached[1])
        secret = self._read(self.core.read_namespaced_secret, name, namespace)
        if secret is None:
            with self._secrets_lock:
                self._secrets.pop(key, None)
            return None
        self._check_label(secret, key, label)  # the label may have gone between the two reads
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        data.update(secret.get("stringData") or {})
        with self._secrets_lock:
            self._secrets[key] = ((secret.get("metadata") or {}).get("resourceVersion") or "", data, now)
        return dict(data)

    # -- access reviews (the admission webhook asks whether a requesting user may do what a resource implies) -------

    def user_may(
        self,
        user: dict[str, Any],
        namespace: str,
        verb: str,
        group: str,
        resource: str,
        subresource: str = "",
        name: str | None = None,
    ) -> bool:
        """A SubjectAccessReview: may `user` (an admission request's userInfo: username, uid, groups, extra) do
        `verb` on the resource in `namespace`? The API server's authorizers answer, as for the user's own request."""
        attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
        if subresource:
            attributes["subresource"] = subresource
        if name:
            attributes["name"] = name
        spec: dict[str, Any] = {"resourceAttributes": attributes, "user": user.get("username", "")}
        for key in ("uid", "groups", "extra"):
            if user.get(key):
                spec[key] = user[key]
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            review = _json(self.authorization.create_subject_access_review(cast(Any, body), _preload_content=False))
        except ApiException as exc:
            if _temporary(exc):
                raise KubeUnavailable(f"asking a SubjectAccessReview: {exc.status} {exc.reason}") from None
            raise
        return bool((review.get("status") or {}).get("allowed"))

    def put_validating_webhook_configuration(self, body: dict) -> None:
        """Create or replace a ValidatingWebhookConfiguration (an operator outside the cluster registers its
        own admission webhook; in a cluster the chart ships it)."""
        api, name = self.admissionregistration, body["metadata"]["name"]
        try:
            api.create_validating_webhook_configuration(cast(Any, body))
            return
        except ApiException as exc:
            if exc.status != 409:
                raise
        current = _json(api.read_validating_webhook_configuration(name, _preload_content=False))
        replaced = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        api.replace_validating_webhook_configuration(name, cast(Any, replaced))

    def _check_label(self, secret: dict, key: tuple[str, str], label: str | None) -> None:
        """Refuse a Secret without `<label>=true`, and forget its values if they were cached before."""
        if label is not None and ((secret.get("metadata") or {}).get("labels") or {}).get(label) != "true":
            with self._secrets_lock:
                self._secrets.pop(key, None)
            raise SecretNotLabelled(key[0], key[1], label)

    # -- the leader Lease (leadership.py decides; this only reads and writes it) -------------------

    def get_lease(self, namespace: str, name: str) -> dict | None:
        return self._read(self.coordination.read_namespaced_lease, name, namespace)

    def create_lease(self, namespace: str, body: dict) -> bool:
        """False when another replica created it first (409)."""
        try:
            # The client sends a plain dict as it is (its V1Lease type is only the documented shape).
            self.coordination.create_namespaced_lease(namespace, cast(Any, body))
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            if _temporary(exc):
                raise KubeUnavailable(f"creating Lease: {exc.status} {exc.reason}") from None
            raise

    def replace_lease(self, namespace: str, name: str, body: dict) -> bool:
        """False when someone else wrote it between our read and this write (409: resourceVersion moved)."""
        try:
            self.coordination.replace_namespaced_lease(name, namespace, cast(Any, body))
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            if _temporary(exc):
                raise KubeUnavailable(f"replacing Lease: {exc.status} {exc.reason}") from None
            raise

    def list_pods(self, namespace: str, selector: str) -> list[dict]:
        try:
            return _json(self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False))[
                "items"
            ]
        except ApiException as exc:
            raise KubeUnavailable(f"listing pods: {exc.status} {exc.reason}") from None

    # -- writes ---------------------------------------------------------------------------

    def create_owned(self, obj: dict, owner_uid: str) -> dict:
        """Create `obj`; when it exists already and is ours, return it; when it is not ours, NotOwned.

        Ours: it has an owner reference with `owner_uid`, or (a child that outlives its resource, so has no
        owner reference) the annotation `reprise.io/created-for` with it. An object of that name that says
        neither was put there by someone else, and is never adopted."""
        kind = obj["kind"]
        namespace = obj["metadata"].get("namespace")
        name = obj["metadata"]["name"]
        create, read = self._verbs(obj)
        try:
            return _json(create(namespace, obj, _preload_content=False))
        except ApiException as exc:
            if exc.status != 409:
                if _temporary(exc):
                    raise KubeUnavailable(f"creating {kind} {name}: {exc.status} {exc.reason}") from None
                raise
        existing = _json(read(name, namespace, _preload_content=False))
        owners = {ref.get("uid") for ref in existing["metadata"].get("ownerReferences") or []}
        created_for = (existing["metadata"].get("annotations") or {}).get(CREATED_FOR_ANNOTATION)
        if owner_uid not in owners and created_for != owner_uid:
            raise NotOwned(f"{kind} {namespace}/{name} exists and is not owned by this resource: rename or delete it")
        return existing

    def _verbs(self, obj: dict) -> tuple[Callable[..., Any], Callable[..., Any]]:
        kind, api_version = obj["kind"], obj["apiVersion"]
        if kind == "Deployment":
            return self.apps.create_namespaced_deployment, self.apps.read_namespaced_deployment
        if kind == "Job":
            return self.batch.create_namespaced_job, self.batch.read_namespaced_job
        if kind == "ConfigMap":
            return self.core.create_namespaced_config_map, self.core.read_namespaced_config_map
        group, version = api_version.split("/")
        plural = kind.lower() + "s"
        return (
            lambda ns, body, **kw: self.custom.create_namespaced_custom_object(group, version, ns, plural, body, **kw),
            lambda name, ns, **kw: self.custom.get_namespaced_custom_object(group, version, ns, plural, name, **kw),
        )

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        try:
            self.apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})
        except ApiException as exc:
            if _temporary(exc):
                raise KubeUnavailable(f"scaling Deployment {name}: {exc.status} {exc.reason}") from None
            raise

    def suspend_job(self, namespace: str, name: str, suspend: bool) -> bool:
        """Set a Job's `spec.suspend` (suspending stops its pods, resuming starts new ones); False when gone."""
        try:
            self.batch.patch_namespaced_job(name, namespace, {"spec": {"suspend": suspend}})
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            if _temporary(exc):
                raise KubeUnavailable(f"suspending Job {name}: {exc.status} {exc.reason}") from None
            raise

    def patch_custom(self, group: str, version: str, plural: str, namespace: str, name: str, patch: dict) -> bool:
        """Merge-patch a custom object (LakeReplay suspends its SparkApplication and Reconsume); False when gone."""
        try:
            self.custom.patch_namespaced_custom_object(group, version, namespace, plural, name, patch)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            if _temporary(exc):
                raise KubeUnavailable(f"patching {plural}/{name}: {exc.status} {exc.reason}") from None
            raise

    def _delete(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Delete in the foreground; False when it was already gone."""
        try:
            fn(*args, body=client.V1DeleteOptions(propagation_policy="Foreground"))
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            if _temporary(exc):
                raise KubeUnavailable(f"deleting: {exc.status} {exc.reason}") from None
            raise

    def delete_deployment(self, namespace: str, name: str) -> bool:
        return self._delete(self.apps.delete_namespaced_deployment, name, namespace)

    def delete_job(self, namespace: str, name: str) -> bool:
        return self._delete(self.batch.delete_namespaced_job, name, namespace)

    def delete_configmap(self, namespace: str, name: str) -> bool:
        return self._delete(self.core.delete_namespaced_config_map, name, namespace)

    def delete_custom(self, group: str, version: str, plural: str, namespace: str, name: str) -> bool:
        return self._delete(self.custom.delete_namespaced_custom_object, group, version, namespace, plural, name)

    def delete_replay(self, plural: str, namespace: str, name: str) -> bool:
        """Delete one of Reprise's own resources (the finished-resource TTL)."""
        return self.delete_custom(GROUP, VERSION, plural, namespace, name)

    def patch_status(self, plural: str, namespace: str, name: str, status: dict) -> dict:
        """Merge-patch `status` of one of Reprise's resources through the status subresource."""
        try:
            patched = self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, plural, name, {"status": status}
            )
            return patched if isinstance(patched, dict) else {}
        except ApiException as exc:
            if exc.status == 404:
                return {}
            if _temporary(exc):
                raise KubeUnavailable(f"patching status of {plural}/{name}: {exc.status} {exc.reason}") from None
            raise


class AsyncKube:
    """The Kubernetes door for reconcile code: the same calls as `Kube`, awaitable.

    The client library blocks, so each call runs on a worker thread; that hop lives here, once, instead of
    in every reconcile step (`await rt.kube.aio.get_job(ns, name)`)."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    async def get_deployment(self, namespace: str, name: str) -> dict | None:
        return await asyncio.to_thread(self._kube.get_deployment, namespace, name)

    async def get_job(self, namespace: str, name: str) -> dict | None:
        return await asyncio.to_thread(self._kube.get_job, namespace, name)

    async def get_configmap(self, namespace: str, name: str) -> dict | None:
        return await asyncio.to_thread(self._kube.get_configmap, namespace, name)

    async def get_custom(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict | None:
        return await asyncio.to_thread(self._kube.get_custom, group, version, plural, namespace, name)

    async def secret_data(self, namespace: str, name: str, label: str | None = None) -> dict[str, str] | None:
        return await asyncio.to_thread(self._kube.secret_data, namespace, name, label)

    async def user_may(
        self,
        user: dict[str, Any],
        namespace: str,
        verb: str,
        group: str,
        resource: str,
        subresource: str = "",
        name: str | None = None,
    ) -> bool:
        return await asyncio.to_thread(self._kube.user_may, user, namespace, verb, group, resource, subresource, name)

    async def list_pods(self, namespace: str, selector: str) -> list[dict]:
        return await asyncio.to_thread(self._kube.list_pods, namespace, selector)

    async def create_owned(self, obj: dict, owner_uid: str) -> dict:
        return await asyncio.to_thread(self._kube.create_owned, obj, owner_uid)

    async def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        await asyncio.to_thread(self._kube.scale_deployment, namespace, name, replicas)

    async def suspend_job(self, namespace: str, name: str, suspend: bool) -> bool:
        return await asyncio.to_thread(self._kube.suspend_job, namespace, name, suspend)

    async def patch_custom(self, group: str, version: str, plural: str, namespace: str, name: str, patch: dict) -> bool:
        return await asyncio.to_thread(self._kube.patch_custom, group, version, plural, namespace, name, patch)

    async def delete_deployment(self, namespace: str, name: str) -> bool:
        return await asyncio.to_thread(self._kube.delete_deployment, namespace, name)

    async def delete_job(self, namespace: str, name: str) -> bool:
        return await asyncio.to_thread(self._kube.delete_job, namespace, name)

    async def delete_configmap(self, namespace: str, name: str) -> bool:
        return await asyncio.to_thread(self._kube.delete_configmap, namespace, name)

    async def delete_custom(self, group: str, version: str, plural: str, namespace: str, name: str) -> bool:
        return await asyncio.to_thread(self._kube.delete_custom, group, version, plural, namespace, name)

    async def delete_replay(self, plural: str, namespace: str, name: str) -> bool:
        return await asyncio.to_thread(self._kube.delete_replay, plural, namespace, name)

    async def patch_status(self, plural: str, namespace: str, name: str, status: dict) -> dict:
        return await asyncio.to_thread(self._kube.patch_status, plural, namespace, name, status)
