"""The local image store: where the files of an image built on this machine are, for the node agent.

A container runtime pulls an image and finds its files at the paths its Dockerfile put them
(`/app/lib/...`). The node agent has no images: the project's own image is this checkout (it runs
`python -m ...` from it), and any other image is only reported Running. An image whose build runs here
instead (a JVM example service: Maven builds it into the cache) is published under its reference with the
container paths it provides and the local folders that hold them:

    publish("reprise-examples/accounts-jvm:dev", {"/app": "~/.cache/reprise/images/accounts-jvm-<hash>"})

The node agent maps those container paths wherever they appear as paths in a container's command, args,
env and workingDir (as it maps volume mounts), so a pod spec written for the real image runs unchanged:
`java -cp /app/lib/* ...` becomes `java -cp ~/.cache/reprise/images/accounts-jvm-<hash>/lib/* ...`.

One JSON file per reference under `<cache>/local-images/`; publishing again replaces it, as pushing a tag
does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Mapping

from .cache import cache_root


def store_dir() -> Path:
    return cache_root() / "local-images"


def _file_of(reference: str, store: Path) -> Path:
    # A reference has `/` and `:`; the file name keeps it readable and unique.
    return store / (re.sub(r"[^A-Za-z0-9._-]", "_", reference) + ".json")


def publish(reference: str, paths: Mapping[str, str | Path], store: Path | None = None) -> Path:
    """Record that `reference`'s container paths are these local folders (replacing an earlier build)."""
    for container_path in paths:
        if not container_path.startswith("/") or container_path == "/":
            raise ValueError(f"image {reference}: container path {container_path!r} must be absolute and not /")
    store = store or store_dir()
    store.mkdir(parents=True, exist_ok=True)
    target = _file_of(reference, store)
    body = {"image": reference, "paths": {k.rstrip("/"): str(v) for k, v in paths.items()}}
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
    tmp.replace(target)  # atomic: an agent reading it never sees half a file
    return target


def image_paths(reference: str, store: Path | None = None) -> dict[str, str]:
    """{container path: local folder} of a published image; empty for any other image."""
    if not reference:
        return {}
    try:
        body = json.loads(_file_of(reference, store or store_dir()).read_text())
    except (OSError, ValueError):
        return {}
    if body.get("image") != reference:
        return {}
    return {str(k): str(v) for k, v in (body.get("paths") or {}).items()}


def source_hash(*roots: Path) -> str:
    """A hash of every source file under `roots` (build output and editor files left out)."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if not path.is_file() or rel.parts[0] in ("target", ".idea") or path.suffix in (".class", ".iml"):
                continue
            digest.update(f"{root.name}/{rel}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:16]
