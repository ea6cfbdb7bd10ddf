"""Builds a Go service of `examples/` into a local image the node agent runs (`local_images.py`).

Where Docker would build the service into an image holding one binary, `go build` builds it (with the Reprise
Go module of this checkout, `go/`, which the example's go.mod replaces locally) into the cache:
`<cache>/images/<project>-<hash of the sources>/<binary>`. The image reference is then published with `/app`
mapped to that folder, and a pod whose container runs `/app/<binary>` runs it as is.

A build is reused while the sources are unchanged; concurrent builds (pytest workers) wait on a file lock.
Go's own caches stay in GOCACHE / GOMODCACHE as usual.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .local_images import IMAGE_APP, build_command, build_once, run_build

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "go"


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
    binary = project.name

    def build(folder: Path, log: Path) -> None:
        folder.mkdir(parents=True)
        env = {**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
        try:
            run_build(
                [go, "build", "-o", str(folder / binary), "."],
                log,
                GoBuildError,
                project.name,
                1200,
                cwd=project,
                env=env,
            )
        except GoBuildError:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    return GoImage(reference, build_once(reference, project.name, (module, project), build, log), binary)


if __name__ == "__main__":
    raise SystemExit(build_command("go_image", build_go_image))
