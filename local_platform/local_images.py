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
does. A published image runs on the node agent whatever its name (other images run only when their name
contains `reprise`).

For a service of your own (docs/local-platform.md, "Your own service"): build it into a folder laid out as
your image's `/app` and publish that folder, `python -m local_platform.local_images <image> <folder>`; or let
`python -m local_platform.jvm_image` / `go_image` build and publish a Maven project or a Go main package.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

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


#: Where the image's files are in its container: what a pod's command names.
IMAGE_APP = "/app"


def build_once(
    reference: str, name: str, sources: Sequence[Path], build: Callable[[Path, Path], None], log: Path | None = None
) -> Path:
    """The folder holding image `name` built from `sources`, published as `reference` with `/app` mapped to it.

    `build(folder, log)` runs only when this exact source has no finished build (its `.built` stamp, written
    here after `build` returns); concurrent callers (pytest workers) wait on a file lock instead of building
    twice."""
    images = cache_root() / "images"
    images.mkdir(parents=True, exist_ok=True)
    folder = images / f"{name}-{source_hash(*sources)}"
    with open(images / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder, log or images / f"{name}-build.log")
            (folder / ".built").write_text(f"{reference}\n")
    publish(reference, {IMAGE_APP: folder})
    return folder


def run_build(
    command: list[str],
    log: Path,
    error: type[Exception],
    what: str,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run one build command with its output in `log`; `error` with the log's last lines when it fails."""
    with open(log, "w") as out:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise error(
            f"building {what} failed ({' '.join(command)}{' in ' + str(cwd) if cwd else ''}); log {log}:\n{tail}"
        )


def build_command(module: str, build: Callable[[Path, str], Any]) -> int:
    """`python -m local_platform.<module> <project folder> <image reference>`: build and publish one image."""
    if len(sys.argv) != 3:
        print(f"usage: python -m local_platform.{module} <project folder> <image reference>", file=sys.stderr)
        return 2
    image = build(Path(sys.argv[1]), sys.argv[2])
    print(f"{sys.argv[2]}: {IMAGE_APP} -> {image.folder}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m local_platform.local_images <image reference> <folder>`: publish a folder you built as the
    image's `/app`, so a pod naming that image runs `/app/...` from it on the node agent."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0].startswith("-"):
        print(
            "usage: python -m local_platform.local_images <image reference> <folder holding the image's /app>",
            file=sys.stderr,
        )
        return 2
    reference, folder = args[0], Path(args[1]).expanduser().resolve()
    if not folder.is_dir():
        print(f"local_images: {folder} is not a folder: build the service into it first", file=sys.stderr)
        return 2
    publish(reference, {IMAGE_APP: folder})
    print(f"{reference}: {IMAGE_APP} -> {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
