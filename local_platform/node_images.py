"""The real node's images: built here from the project's own Dockerfiles with podman, cached by the hash of
their inputs, and handed to the node's containerd.

No image registry is reachable on these machines, so:
- the Python base is made from Debian's packages (`build/base-image.sh`, mmdebstrap) and passed to the
  unchanged Dockerfile as `--build-arg PYTHON_BASE=...`; a user builds the same Dockerfile with Docker
  against the official base;
- the pod sandbox's pause image is built from `node/pause.c` (registry.k8s.io is not reachable either).

An image is tagged `localhost/<name>:<hash>`, the hash covering the Dockerfile, its build arguments and every
file its `COPY` lines take from the context, so an unchanged checkout finds its image at once and a changed
file builds a new one. `load()` imports an image into containerd under the references pod specs name.

podman and buildah keep their storage under the cache (`node/podman-env.sh`), never in /var/lib/containers.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

from .cache import cache_root
from .errors import PlatformError

REPO = Path(__file__).resolve().parent.parent
NODE_FILES = Path(__file__).resolve().parent / "node"
BUILD_DIR = Path(__file__).resolve().parent / "build"
#: The host's CA bundle, mounted (read-only) while images build: TLS egress here is re-signed by a proxy whose CA
#: only the host trusts. The image itself is not changed by it.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def podman_env() -> dict[str, str]:
    """The environment podman and buildah run in: the cache's storage and settings (written by podman-env.sh)."""
    script = f". {shlex.quote(str(NODE_FILES / 'podman-env.sh'))} && env -0"
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True, env=dict(os.environ)).stdout
    env = dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    return env


def _run(argv: Sequence[str], what: str, env: Mapping[str, str], log: Path | None = None) -> str:
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            rc = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, env=dict(env)).returncode
        if rc != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise PlatformError(f"{what} failed (exit {rc}); see {log}:\n{tail}")
        return ""
    done = subprocess.run(list(argv), capture_output=True, text=True, env=dict(env))
    if done.returncode != 0:
        raise PlatformError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout


def exists(tag: str, env: Mapping[str, str]) -> bool:
    return subprocess.run(["podman", "image", "exists", tag], env=dict(env)).returncode == 0


def base_image(env: Mapping[str, str] | None = None) -> str:
    """The mmdebstrap-made Python base (built once per package list)."""
    env = env or podman_env()
    log = cache_root() / "node" / "base-image.log"
    out = subprocess.run(["bash", str(BUILD_DIR / "base-image.sh")], capture_output=True, text=True, env=dict(env))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(out.stderr)
    if out.returncode != 0:
        raise PlatformError(f"building the Debian base image failed (exit {out.returncode}); see {log}")
    return out.stdout.strip().splitlines()[-1]


def pause_image(env: Mapping[str, str] | None = None) -> str:
    """The sandbox image: node/pause.c compiled statically into an image of one file."""
    env = env or podman_env()
    source = NODE_FILES / "pause.c"
    tag = f"localhost/reprise-node/pause:{hashlib.sha256(source.read_bytes()).hexdigest()[:12]}"
    if exists(tag, env):
        return tag
    with tempfile.TemporaryDirectory(prefix="reprise-pause-") as scratch:
        binary = Path(scratch) / "pause"
        _run(["gcc", "-Os", "-static", "-o", str(binary), str(source)], "compiling node/pause.c", env)
        _run(["strip", str(binary)], "stripping pause", env)
        container = _run(["buildah", "from", "scratch"], "buildah from scratch", env).strip()
        try:
            _run(["buildah", "copy", container, str(binary), "/pause"], "buildah copy", env)
            _run(
                ["buildah", "config", "--entrypoint", '["/pause"]', "--user", "65535:65535", container],
                "buildah config",
                env,
            )
            _run(["buildah", "commit", "--quiet", container, tag], "buildah commit", env)
        finally:
            subprocess.run(["buildah", "rm", container], capture_output=True, env=dict(env))
    return tag


def copy_sources(dockerfile: Path) -> list[str]:
    """The context paths a Dockerfile's `COPY` lines take (not those `--from` another stage)."""
    sources: list[str] = []
    for line in dockerfile.read_text().splitlines():
        parts = line.split()
        if not parts or parts[0].upper() != "COPY" or any(p.startswith("--from") for p in parts):
            continue
        sources += [p for p in parts[1:-1] if not p.startswith("--")]
    return sources


def input_hash(dockerfile: Path, context: Path, build_args: Mapping[str, str]) -> str:
    """sha256 over the Dockerfile, the build arguments and the files its COPY lines take (path and content)."""
    digest = hashlib.sha256()
    digest.update(dockerfile.read_bytes())
    for key in sorted(build_args):
        digest.update(f"\0arg {key}={build_args[key]}".encode())
    for source in sorted(copy_sources(dockerfile)):
        root = context / source
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            relative = path.relative_to(context).as_posix()
            if "__pycache__" in relative or relative.endswith(".pyc"):
                continue  # .dockerignore keeps them out of the context
            digest.update(f"\0file {relative}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build(
    name: str,
    dockerfile: Path,
    context: Path = REPO,
    build_args: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[str, float]:
    """`localhost/<name>:<input hash>`, built with podman unless it exists; and the seconds the build took
    (0 for a cached image)."""
    env = env or podman_env()
    args = dict(build_args or {})
    tag = f"localhost/{name}:{input_hash(dockerfile, context, args)}"
    if exists(tag, env):
        return tag, 0.0
    began = time.monotonic()
    argv = ["podman", "build", "--network", "host", "--quiet", "-t", tag, "-f", str(dockerfile)]
    if HOST_CA_BUNDLE.is_file():
        argv += ["-v", f"{HOST_CA_BUNDLE}:/etc/ssl/certs/ca-certificates.crt:ro"]
    for key, value in args.items():
        argv += ["--build-arg", f"{key}={value}"]
    log = cache_root() / "node" / f"{name.replace('/', '-')}-build.log"
    log.unlink(missing_ok=True)
    _run([*argv, str(context)], f"building {name} from {dockerfile.name}", env, log)
    # Older builds of the same image are superseded: one tagged build per image. The untagged stages stay, as
    # podman's layer cache (the dependencies' stage is rebuilt only when constraints.txt changes).
    listed = _run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", f"localhost/{name}"], "listing", env)
    older = [t for t in listed.split() if t != tag and t.startswith(f"localhost/{name}:")]
    if older:
        subprocess.run(["podman", "rmi", *older], capture_output=True, env=dict(env))
    return tag, time.monotonic() - began


def reprise_image(env: Mapping[str, str] | None = None) -> tuple[str, float]:
    """The operator and worker image, from the project's Dockerfile on the Debian base."""
    env = env or podman_env()
    return build("reprise", REPO / "Dockerfile", REPO, {"PYTHON_BASE": base_image(env)}, env)


def load(tag: str, references: Sequence[str], ctr: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    """Import `tag` into containerd (namespace k8s.io) once, and name it `references` there too.

    `ctr` is the ctr command line that reaches the node's containerd (address included)."""
    env = env or podman_env()
    listed = _run([*ctr, "-n", "k8s.io", "images", "ls", "-q"], "listing containerd's images", env).split()
    wanted = [_normalised(r) for r in (tag, *references)]
    if _normalised(tag) not in listed:
        with tempfile.TemporaryDirectory(prefix="reprise-image-", dir=cache_root()) as scratch:
            archive = Path(scratch) / "image.tar"
            _run(
                ["podman", "save", "--quiet", "--format", "docker-archive", "-o", str(archive), tag], "podman save", env
            )
            _run([*ctr, "-n", "k8s.io", "images", "import", str(archive)], f"importing {tag} into containerd", env)
    for reference in wanted[1:]:  # always: the reference may name an older build of the image
        _run([*ctr, "-n", "k8s.io", "images", "tag", "--force", wanted[0], reference], f"tagging {reference}", env)


def _normalised(reference: str) -> str:
    """What containerd calls a reference: `reprise:dev` is `docker.io/library/reprise:dev`."""
    first = reference.split("/", 1)[0]
    if "/" not in reference:
        return f"docker.io/library/{reference}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{reference}"
    return reference
