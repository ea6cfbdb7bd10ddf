"""Builds a Go service of `examples/` into a local image the node agent runs (`local_images.py`).

Where Docker would build the service into an image holding one binary, `go build` builds it (with the Reprise
Go module of this checkout, `go/`, which the example's go.mod replaces locally) into the cache:
`<cache>/images/<project>-<hash of the sources>/<binary>`. The image reference is then published with `/app`
mapped to that folder, and a pod whose container runs `/app/<binary>` runs it as is.

A build is reused while the sources are unchanged; concurrent builds (pytest workers) wait on a file lock.
Go's own caches stay in GOCACHE / GOMODCACHE as usual.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_root
from .local_images import publish, source_hash

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "go"
IMAGE_APP = "/app"


class GoBuildError(RuntimeError):
    """`go build` failed; the message holds the end of its output."""


@dataclass(frozen=True)
class GoImage:
    reference: str
    folder: Path
    binary: str
    """The command of the image: `/app/<binary>`."""

    @property
    def command(self) -> list[str]:
        return [f"{IMAGE_APP}/{self.binary}"]


def _go() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        raise GoBuildError("the Go toolchain is not installed (https://go.dev/dl/): `go` must be on PATH")
    return found


def build_go_image(project: Path, reference: str, module: Path = MODULE, log: Path | None = None) -> GoImage:
    """`go build` `project` (a main package) unless this exact source is built already; publish it."""
    project, module = project.resolve(), module.resolve()
    go = _go()
    images = cache_root() / "images"
    images.mkdir(parents=True, exist_ok=True)
    folder = images / f"{project.name}-{source_hash(module, project)}"
    binary = project.name
    with open(images / f"{project.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").exists():
            _build(go, project, folder, binary, log or images / f"{project.name}-build.log")
    publish(reference, {IMAGE_APP: folder})
    return GoImage(reference, folder, binary)


def _build(go: str, project: Path, folder: Path, binary: str, log: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [go, "build", "-o", str(folder / binary), "."]
    env = {**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
    with open(log, "w") as out:
        done = subprocess.run(command, cwd=project, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env, timeout=1200)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        shutil.rmtree(folder, ignore_errors=True)
        raise GoBuildError(f"building {project.name} failed ({' '.join(command)} in {project}); log {log}:\n{tail}")
    (folder / ".built").write_text(" ".join(command) + "\n")


def main() -> int:
    """`python -m local_platform.go_image <project folder> <image reference>`: build and publish."""
    import sys

    if len(sys.argv) != 3:
        print("usage: python -m local_platform.go_image <project folder> <image reference>", file=sys.stderr)
        return 2
    image = build_go_image(Path(sys.argv[1]), sys.argv[2])
    print(f"{image.reference}: {IMAGE_APP} -> {image.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
