"""The Dockerfile, checked statically (these machines have no Docker engine to build it).

What is checked: the base image is pinned to an exact version or a digest, the build is multi-stage, the
final USER is numeric and not root, nothing secret is baked in or sent in the build context, the
dependencies come from constraints.txt and match pyproject.toml, the image is read-only-root friendly, and
the ENTRYPOINT is what the node agent assumes for a container without a command.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_platform.node_agent import DEFAULT_ENTRYPOINT
from replay_worker.settings import WorkerSettings
from reprise_operator.shared.settings import OperatorSettings

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"

# An exact release (3.11.14, 3.11.14-slim-bookworm) or a digest; never `latest`, `3`, `3.11` or `slim`.
EXACT_TAG = re.compile(r"^\d+\.\d+\.\d+([-.][A-Za-z0-9.]+)*$")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
SECRET_NAME = re.compile(r"(?i)(password|passwd|secret|token|api[_-]?key|private[_-]?key|credential|sasl)")
SECRET_FILES = (".env", "*.pem", "*.key", "*.p12", "*.jks", "*kubeconfig*", ".kube", ".docker", ".netrc")


@dataclass
class Instruction:
    keyword: str
    arguments: str
    line: int


def instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions with line continuations joined and comments dropped."""
    found: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, rest = full.partition(" ")
        found.append(Instruction(keyword.upper(), rest.strip(), start))
    return found


def key_values(arguments: str) -> dict[str, str]:
    """`ENV A=1 B="x y"` / `LABEL ...` as a dict (the legacy `ENV A 1` form too)."""
    parts = shlex.split(arguments)
    if parts and "=" not in parts[0]:
        return {parts[0]: " ".join(parts[1:])}
    return dict(part.split("=", 1) for part in parts)


@pytest.fixture(scope="module")
def steps() -> list[Instruction]:
    return instructions(DOCKERFILE.read_text())


def stages(steps: list[Instruction]) -> list[tuple[str, str | None, list[Instruction]]]:
    """(image reference with global ARGs substituted, stage name, the stage's instructions)."""
    global_args: dict[str, str] = {}
    result: list[tuple[str, str | None, list[Instruction]]] = []
    for step in steps:
        if step.keyword == "ARG" and not result:
            name, _, default = step.arguments.partition("=")
            global_args[name.strip()] = default.strip().strip('"')
        elif step.keyword == "FROM":
            words = [w for w in step.arguments.split() if not w.startswith("--")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: global_args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            result.append((image, name, []))
        elif result:
            result[-1][2].append(step)
    return result


def test_the_build_is_multi_stage_and_every_base_is_pinned(steps: list[Instruction]) -> None:
    built = stages(steps)
    assert len(built) >= 2, "a multi-stage build: dependencies are installed in a stage of their own"
    names: set[str] = set()
    for image, name, _ in built:
        if image in names:
            continue  # FROM an earlier stage
        assert "$" not in image, f"{image}: an ARG without a default cannot be checked"
        assert not image.endswith(":latest") and ":" in image, f"{image}: the base must name an exact version"
        if not DIGEST.search(image):
            tag = image.rsplit(":", 1)[1]
            assert EXACT_TAG.match(tag), f"{image}: pin an exact release (x.y.z) or a digest, not a moving tag"
        assert "slim" in image or "distroless" in image or DIGEST.search(image), f"{image}: use a slim base"
        if name:
            names.add(name)


def test_the_final_stage_runs_as_a_numeric_non_root_user(steps: list[Instruction]) -> None:
    final = stages(steps)[-1][2]
    users = [s.arguments for s in final if s.keyword == "USER"]
    assert users, "the final stage must set USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit(), f"USER {users[-1]}: numeric, so the kubelet can verify runAsNonRoot"
    assert int(user) != 0 and (not group or (group.isdigit() and int(group) != 0))
    last_user_at = max(i for i, s in enumerate(final) if s.keyword == "USER")
    assert not [s for s in final[last_user_at:] if s.keyword == "RUN"], "nothing runs after dropping root"


def test_the_entrypoint_is_the_operator_as_the_node_agent_assumes(steps: list[Instruction]) -> None:
    final = stages(steps)[-1][2]
    (entrypoint,) = [s.arguments for s in final if s.keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["python", "-m", "reprise_operator"], "exec form, exactly the operator"
    assert tuple(json.loads(entrypoint)) == DEFAULT_ENTRYPOINT
    assert not [s for s in final if s.keyword == "CMD"], "no CMD: args given to the container are the operator's flags"


def test_the_image_is_read_only_root_friendly(steps: list[Instruction]) -> None:
    final = stages(steps)[-1][2]
    env: dict[str, str] = {}
    for step in final:
        if step.keyword == "ENV":
            env.update(key_values(step.arguments))
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1", "no __pycache__ writes at run time"
    assert env.get("HOME") == "/tmp", "anything that writes under $HOME writes to the /tmp emptyDir"
    assert "/opt/venv/bin" in env.get("PATH", "").split(":")[0]
    compiled = " ".join(s.arguments for _, _, body in stages(steps) for s in body if s.keyword == "RUN")
    assert compiled.count("compileall") >= 2, "bytecode is compiled at build time, for the venv and the code"


def test_dependencies_come_from_constraints_and_match_pyproject(steps: list[Instruction]) -> None:
    runs = " ".join(s.arguments for _, _, body in stages(steps) for s in body if s.keyword == "RUN")
    assert "--constraint /build/constraints.txt" in runs
    copies = [s.arguments for _, _, body in stages(steps) for s in body if s.keyword == "COPY"]
    assert "constraints.txt /build/constraints.txt" in copies
    installed = re.search(r"pip install --constraint \S+ (.*?) &&", runs)
    assert installed, "one pip install of the runtime requirements"
    wanted = {
        re.split(r"[<>=!~ \[]", d, maxsplit=1)[0].lower()
        for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    assert {p.lower() for p in installed.group(1).split()} == wanted
    pinned = {
        line.split("==")[0].lower() for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line
    }
    assert {w.replace("_", "-") for w in wanted} <= {p.replace("_", "-") for p in pinned}, "every requirement is pinned"


def test_nothing_secret_is_baked_in(steps: list[Instruction]) -> None:
    for step in steps:
        if step.keyword in ("ENV", "ARG", "LABEL"):
            pairs = (
                key_values(step.arguments) if "=" in step.arguments or step.keyword == "ENV" else {step.arguments: ""}
            )
            for name in pairs:
                assert not SECRET_NAME.search(name), f"line {step.line}: {step.keyword} {name} looks like a credential"
        if step.keyword in ("COPY", "ADD"):
            sources = [w for w in step.arguments.split() if not w.startswith("--")][:-1]
            for source in sources:
                assert not re.match(r"https?://", source), f"line {step.line}: no remote ADD (unpinned, unverified)"
                assert not re.search(r"(\.env|\.pem|\.key|kubeconfig|\.kube|\.docker|id_rsa|\.netrc)", source), source
                if step.keyword == "COPY" and "--from" not in step.arguments:
                    assert (REPO / source).exists(), f"line {step.line}: COPY {source} does not exist"
                    assert source not in (".", "./"), "copy named folders, never the whole context"
    assert not re.search(r"(?i)--(password|token)\b", DOCKERFILE.read_text())


def test_the_build_context_keeps_credentials_and_bulk_out() -> None:
    lines = {
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    }
    for pattern in SECRET_FILES:
        assert pattern in lines or f"**/{pattern}" in lines, f".dockerignore must exclude {pattern}"
    for bulky in (".git", ".venv", "tests", "**/__pycache__"):
        assert bulky in lines
    for needed in ("constraints.txt", "operator", "replay_worker", "spark_app"):
        assert needed not in lines, f"{needed} is part of an image"


def test_exposed_ports_are_the_programs_defaults(steps: list[Instruction]) -> None:
    final = stages(steps)[-1][2]
    exposed = {int(p) for s in final if s.keyword == "EXPOSE" for p in s.arguments.split()}
    assert exposed == {OperatorSettings.metrics_port, WorkerSettings.metrics_port}


def test_make_image_builds_this_dockerfile_and_the_spark_recipe() -> None:
    makefile = (REPO / "Makefile").read_text()
    target = makefile.split("\nimage:", 1)[1].split("\n\n", 1)[0]
    assert "-f Dockerfile ." in target
    assert "-f spark_app/Dockerfile ." in target
