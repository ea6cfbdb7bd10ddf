"""`make lint-go` (part of `make lint`) holds the Go modules to gofmt's layout and go vet: a planted unformatted
file fails it, naming the file and the fix, and the same module passes once gofmt has formatted it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint_go(module: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if shutil.which("gofmt") is None and Path("/usr/local/go/bin/gofmt").exists():
        env["PATH"] = f"/usr/local/go/bin:{env['PATH']}"
    if shutil.which("gofmt", path=env["PATH"]) is None:
        pytest.fail("the Go toolchain is not installed (https://go.dev/dl/): `make lint` checks the Go modules")
    return subprocess.run(
        ["make", "--no-print-directory", "lint-go", f"GO_MODULES={module}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_lint_go_fails_on_an_unformatted_file_and_passes_once_formatted(tmp_path: Path) -> None:
    module = tmp_path / "plant"
    module.mkdir()
    (module / "go.mod").write_text("module example.com/plant\n\ngo 1.24\n")
    (module / "plant.go").write_text("package plant\n\nfunc  Planted( ) int { return 1 }\n")
    failed = _lint_go(module)
    assert failed.returncode != 0
    assert "not gofmt-formatted" in failed.stdout and "plant.go" in failed.stdout, failed.stdout + failed.stderr

    (module / "plant.go").write_text("package plant\n\nfunc Planted() int { return 1 }\n")
    passed = _lint_go(module)
    assert passed.returncode == 0, passed.stdout + passed.stderr
