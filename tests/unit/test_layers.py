"""`make lint`'s layer contracts bite: an import across a forbidden layer fails import-linter.

import-linter runs on a copy of the two packages (the checkout is never touched): once as they are, which
must pass, then with one forbidden import planted, which must fail and name the contract it breaks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "replay_worker", tree / "replay_worker", ignore=ignore)
    shutil.copytree(ROOT / "operator" / "reprise_operator", tree / "operator" / "reprise_operator", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'operator'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _plant(path: Path, line: str) -> None:
    text = path.read_text()
    # After the module docstring and `from __future__`, where an import belongs.
    head, sep, rest = text.partition("from __future__ import annotations\n")
    assert sep, f"{path} has no `from __future__ import annotations` to plant after"
    path.write_text(head + sep + line + "\n" + rest)


def test_the_packages_as_they_are_keep_every_contract(tmp_path: Path) -> None:
    clean = _lint_imports(_copy(tmp_path))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "0 broken" in clean.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        # A pure rule reaching for a door.
        ("operator/reprise_operator/rules/planning.py", "from ..doors import kafka_admin", "Pure rules do no I/O"),
        # The replay contract opening a Kafka client.
        (
            "replay_worker/protocol/start_position.py",
            "import confluent_kafka",
            "The replay contract opens no Kafka client",
        ),
        # The handover topic reaching up into the replay side.
        (
            "replay_worker/topic/handover_topic.py",
            "from ..replay import metrics",
            "The worker's layers import only downward",
        ),
        # The operator reaching past the contract into the worker's I/O.
        (
            "operator/reprise_operator/rules/progress.py",
            "from replay_worker.replay import consumer",
            "The operator imports the worker only through replay_worker.contract",
        ),
        # A lower layer importing a higher one.
        (
            "operator/reprise_operator/rules/workloads.py",
            "from ..core import lifecycle",
            "The operator's layers import only downward",
        ),
        # A kind opening the handover topic itself instead of going through its door (handover_state).
        (
            "operator/reprise_operator/kinds/lakereplay/steps.py",
            "from replay_worker.topic.handover_topic import HandoverTopic",
            "Only the doors talk to Kubernetes and Kafka",
        ),
        # One kind importing another.
        (
            "operator/reprise_operator/kinds/backfill/steps.py",
            "from ..reconsume import steps",
            "The kinds are independent of each other",
        ),
    ],
)
def test_an_import_across_a_forbidden_layer_fails_lint(
    tmp_path: Path, module: str, planted: str, contract: str
) -> None:
    tree = _copy(tmp_path)
    _plant(tree / module, planted)
    broken = _lint_imports(tree)
    assert broken.returncode != 0, broken.stdout
    # The report wraps long names over lines: compare with the whitespace normalised.
    report = " ".join(broken.stdout.split())
    assert f"{contract}" in report and "BROKEN" in report, broken.stdout


# A new module is checked by the folder it lands in: no contract names it, and it is caught all the same.
@pytest.mark.parametrize(
    ("module", "text", "contract"),
    [
        # A new rule in protocol/ opening a Kafka client.
        (
            "replay_worker/protocol/planted_rule.py",
            "import confluent_kafka\n",
            "The replay contract opens no Kafka client",
        ),
        # A new module in topic/ reaching up into the guard.
        (
            "replay_worker/topic/planted_reader.py",
            "from ..guard import consumer\n",
            "The worker's layers import only downward",
        ),
        # A new module beside the folders, in no layer at all.
        ("replay_worker/planted_helper.py", "", "The worker's layers import only downward"),
        # The same at the top of the operator, beside handlers and admission: even one that imports nothing.
        ("operator/reprise_operator/planted_helper.py", "", "The operator's layers import only downward"),
        # ... and one that would reach Kubernetes itself, which no forbidden contract names it for.
        (
            "operator/reprise_operator/planted_client.py",
            "import kubernetes\n",
            "The operator's layers import only downward",
        ),
        # A new kind beside the three, not yet listed: its independence from the others is unchecked until it is.
        ("operator/reprise_operator/kinds/planted_kind.py", "", "The kinds are independent of each other"),
    ],
)
def test_a_new_module_is_checked_by_its_folder(tmp_path: Path, module: str, text: str, contract: str) -> None:
    tree = _copy(tmp_path)
    (tree / module).write_text(f'"""A module no contract names."""\n\nfrom __future__ import annotations\n\n{text}')
    broken = _lint_imports(tree)
    assert broken.returncode != 0, broken.stdout
    report = " ".join(broken.stdout.split())
    assert f"{contract}" in report and "BROKEN" in report, broken.stdout


@pytest.mark.parametrize(
    ("folder", "planted", "contract"),
    [
        # A rule in a new sub-folder of rules/ reaching up into the reconcile.
        ("rules/quotas", "from ...core import lifecycle", "The operator's layers import only downward"),
        # A new module of shared/'s in a new sub-folder opening a Kafka client itself.
        ("shared/pools", "import confluent_kafka", "Only the doors talk to Kubernetes and Kafka"),
        # A new folder in a kind's folder importing another kind.
        ("kinds/backfill/sources", "from ...reconsume import steps", "The kinds are independent of each other"),
    ],
)
def test_a_new_module_in_a_folder_no_contract_names_is_checked_by_its_parent(
    tmp_path: Path, folder: str, planted: str, contract: str
) -> None:
    """The contracts name folders: a module nobody listed is held to the contract of the folder it lands in."""
    tree = _copy(tmp_path)
    pyproject = (tree / "pyproject.toml").read_text()
    assert f"reprise_operator.{folder.replace('/', '.')}" not in pyproject  # no contract names the new folder
    package = tree / "operator" / "reprise_operator" / folder
    package.mkdir()
    (package / "__init__.py").write_text('"""A folder nobody listed."""\n')
    (package / "newcomer.py").write_text(f'"""A new module."""\n\nfrom __future__ import annotations\n\n{planted}\n')
    broken = _lint_imports(tree)
    assert broken.returncode != 0, broken.stdout
    report = " ".join(broken.stdout.split())
    assert contract in report and "BROKEN" in report, broken.stdout
    assert f"reprise_operator.{folder.replace('/', '.')}.newcomer" in report, broken.stdout
