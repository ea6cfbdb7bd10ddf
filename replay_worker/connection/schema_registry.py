"""The schema registry, asked for schemas by id over its Confluent-compatible REST API, with a bounded cache.

A registered schema never changes under its id, so a schema, once read, is kept (up to `CACHE_SIZE` ids, least
recently used out first); so is an id the registry answered 404 for, briefly (`UNKNOWN_TTL_S`), so a topic full
of records with a bad id does not become a request per record. What the registry's answers mean is
`protocol.record_values`' to say: a 404 with error_code 40403 is an unknown id (`None`, a decision); anything
that is not an answer about the id (refused, timed out, a 5xx, a 401/403, a 404 of a wrong URL) raises
`SchemaUnavailable` (a wait). Credentials go in an
Authorization header and never into a message.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from typing import Any, Callable

from ..protocol.filters import FilterSpec
from ..protocol.record_values import REGISTRY_FORMATS, Schema, SchemaSource, SchemaUnavailable

#: Schemas kept per registry: a topic carries a handful of versions; this bounds a pathological one.
CACHE_SIZE = 1000
#: How long an unknown id is remembered before the registry is asked again.
UNKNOWN_TTL_S = 30.0
#: The error code of a Confluent-compatible registry's 404 for an id it does not hold (Apicurio's ccompat API
#: answers the same): only this 404 says "unknown id".
SCHEMA_NOT_FOUND = 40403
#: One request's limit: a registry slower than this is waited for by retrying, not by a longer read.
REQUEST_TIMEOUT_S = 10.0


class RegistrySchemas:
    """A `SchemaSource` over one registry (`url` is the ccompat base, e.g. `http://host:8080/apis/ccompat/v7`)."""

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url.rstrip("/")
        self._auth = None
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self._auth = f"Basic {token}"
        self._clock = clock
        self._known: OrderedDict[int, Schema] = OrderedDict()
        self._unknown: dict[int, float] = {}
        self._lock = threading.Lock()
        #: Requests made (a test reads it to see the cache work).
        self.requests = 0

    def schema(self, schema_id: int) -> Schema | None:
        with self._lock:
            cached = self._known.get(schema_id)
            if cached is not None:
                self._known.move_to_end(schema_id)
                return cached
            until = self._unknown.get(schema_id)
            if until is not None and self._clock() < until:
                return None
        schema = self._fetch(schema_id)
        with self._lock:
            if schema is None:
                self._unknown[schema_id] = self._clock() + UNKNOWN_TTL_S
            else:
                self._unknown.pop(schema_id, None)
                self._known[schema_id] = schema
                while len(self._known) > CACHE_SIZE:
                    self._known.popitem(last=False)
        return schema

    def _fetch(self, schema_id: int) -> Schema | None:
        body = self._get(f"/schemas/ids/{schema_id}", schema_id)
        if body is None:
            return None
        schema = Schema(str(body.get("schemaType") or "AVRO"), body["schema"])
        if schema.schema_type == "PROTOBUF" and not _is_base64(schema.text):
            # .proto text (registered by a Java or Go client): the registry's `format=serialized` gives the
            # FileDescriptorProto, which every language reads without a .proto parser. Confluent returns it in
            # base64; Apicurio 3.3 returns the bytes themselves as the string's characters (one per byte).
            serialized = self._get(f"/schemas/ids/{schema_id}?format=serialized", schema_id)
            if serialized is None:
                return None
            text = serialized["schema"]
            if not _is_base64(text):
                try:
                    text = base64.b64encode(text.encode("latin-1")).decode("ascii")
                except UnicodeEncodeError:
                    pass  # not bytes either: the reader finds it unreadable (undecodable), with the reason
            schema = Schema("PROTOBUF", text)
        return schema

    def _get(self, path: str, schema_id: int) -> dict[str, Any] | None:
        request = urllib.request.Request(f"{self.url}{path}")
        request.add_header("Accept", "application/vnd.schemaregistry.v1+json, application/json")
        if self._auth is not None:
            request.add_header("Authorization", self._auth)
        self.requests += 1
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and _error_code(exc) == SCHEMA_NOT_FOUND:
                return None
            if exc.code == 404:
                # A 404 without the registry's "schema not found" code is a path nobody serves: a wrong URL
                # (say, Apicurio's without /apis/ccompat/v7), never a verdict on the id.
                raise SchemaUnavailable(
                    f"schema registry {self.url} answered HTTP 404 without error_code {SCHEMA_NOT_FOUND} for "
                    f"schema {schema_id}: is it the base URL of a Confluent-compatible API?"
                ) from None
            # 401/403 (credentials), 5xx, anything else: not an answer about the id.
            raise SchemaUnavailable(
                f"schema registry {self.url} answered HTTP {exc.code} for schema {schema_id}"
            ) from None
        except (OSError, ValueError) as exc:
            raise SchemaUnavailable(f"schema registry {self.url} cannot be reached: {exc}") from None
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise SchemaUnavailable(f"schema registry {self.url} gave no schema text for id {schema_id}")
        return body


def _error_code(exc: urllib.error.HTTPError) -> int | None:
    try:
        body = json.loads(exc.read() or b"null")
    except (OSError, ValueError):
        return None
    code = body.get("error_code") if isinstance(body, dict) else None
    return code if isinstance(code, int) else None


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return bool(text)


_sources: dict[str, RegistrySchemas] = {}
_sources_lock = threading.Lock()


#: The registry's credentials, when it needs them: the operator sets them from the Secret the resource names
#: (`spec.schemaRegistry.credentialsSecret`); a guard's deployment sets them the same way.
USERNAME_ENV, PASSWORD_ENV = "REPRISE_SCHEMA_REGISTRY_USERNAME", "REPRISE_SCHEMA_REGISTRY_PASSWORD"


def registry_schemas(url: str) -> RegistrySchemas:
    """One cache per registry URL in a process, shared by the replay's filter and the guard's."""
    with _sources_lock:
        source = _sources.get(url)
        if source is None:
            source = _sources[url] = RegistrySchemas(
                url, username=os.environ.get(USERNAME_ENV), password=os.environ.get(PASSWORD_ENV)
            )
        return source


def filter_schemas(spec: FilterSpec) -> SchemaSource | None:
    """The schema source a filter reads its values with: its registry's, when its values carry schema ids."""
    if spec.value_format in REGISTRY_FORMATS and spec.registry:
        return registry_schemas(spec.registry)
    return None
