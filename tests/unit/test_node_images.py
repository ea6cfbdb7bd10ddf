"""The real node's image cache key: the Dockerfile, its build arguments and exactly the files its COPY lines take."""

from __future__ import annotations

from pathlib import Path

from local_platform.node_images import _normalised, copy_sources, input_hash

REPO = Path(__file__).resolve().parents[2]


def _context(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "main.py").write_text("print(1)\n")
    (tmp_path / "notes.txt").write_text("not copied\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "ARG BASE=x\nFROM ${BASE} AS one\nCOPY app /opt/app\nFROM one\nCOPY --from=one /opt/app /app\n"
    )
    return tmp_path, dockerfile


def test_copy_sources_of_the_project_dockerfile_skip_other_stages():
    assert copy_sources(REPO / "Dockerfile") == ["constraints.txt", "operator/reprise_operator", "replay_worker"]


def test_hash_follows_copied_files_and_build_args_only(tmp_path: Path):
    context, dockerfile = _context(tmp_path)
    first = input_hash(dockerfile, context, {"BASE": "a"})
    (context / "notes.txt").write_text("changed, but no COPY takes it\n")
    assert input_hash(dockerfile, context, {"BASE": "a"}) == first
    assert input_hash(dockerfile, context, {"BASE": "b"}) != first
    (context / "app" / "main.py").write_text("print(2)\n")
    assert input_hash(dockerfile, context, {"BASE": "a"}) != first


def test_containerd_reference_names():
    assert _normalised("reprise:dev") == "docker.io/library/reprise:dev"
    assert _normalised("ghcr.io/reprise-io/reprise:0.1.0") == "ghcr.io/reprise-io/reprise:0.1.0"
    assert _normalised("localhost/reprise:abc") == "localhost/reprise:abc"
    assert _normalised("bitnami/kafka:3") == "docker.io/bitnami/kafka:3"
