"""The operator's door to a resource's schema registry: one question at plan time, "is a Confluent-compatible
registry API at `spec.schemaRegistry.url`?", so that a wrong URL stops the replay before any pod starts
(the replay and the guard would otherwise wait on it, record by record: HANDOVER.md section 4, "Schemas").

The operator reads no schema and holds no registry credentials (they are the pods'): an answer of 401 or 403
proves a registry is there, and is enough.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

#: One probe's limit; the plan step asks again at its next attempt.
PROBE_TIMEOUT_S = 10.0


def registry_problem(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why `url` is not a usable Confluent-compatible registry base URL (`GET <url>/schemas/types` must list
    the schema types), or None when it is."""
    request = urllib.request.Request(f"{url.rstrip('/')}/schemas/types")
    request.add_header("Accept", "application/vnd.schemaregistry.v1+json, application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return None  # a registry that wants the pods' credentials
        return (
            f"GET {url}/schemas/types answered HTTP {exc.code}: not the base URL of a Confluent-compatible API "
            "(Apicurio's ends in /apis/ccompat/v7)"
        )
    except (OSError, ValueError) as exc:
        return f"the schema registry at {url} cannot be reached: {exc}"
    if not isinstance(body, list) or "AVRO" not in body:
        return f"GET {url}/schemas/types did not list the schema types: not a Confluent-compatible registry API"
    return None
