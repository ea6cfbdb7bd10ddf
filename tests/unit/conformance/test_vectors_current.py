"""The committed conformance vectors are what the Python reference generates now (the drift check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from replay_worker import conformance
from replay_worker.conformance import AREAS, REPOSITORY, VECTOR_DIR, render
from replay_worker.conformance.__main__ import main

HINT = "run `make vectors` and commit conformance/vectors/ (a rule of the reference in replay_worker/ changed)"


def test_committed_vectors_match_the_reference_byte_for_byte() -> None:
    committed = REPOSITORY / VECTOR_DIR
    drifted = [
        name
        for name, text in render().items()
        if not (committed / name).exists() or (committed / name).read_bytes() != text.encode("utf-8")
    ]
    assert not drifted, f"conformance vectors drifted from the reference: {drifted}; {HINT}"
    leftover = sorted(p.name for p in committed.glob("*.json") if p.name not in AREAS)
    assert not leftover, f"vector files no generator writes: {leftover}; {HINT}"


def test_check_mode_passes_on_the_committed_files(capsys) -> None:
    assert main(["--check"]) == 0, f"{capsys.readouterr().out}\n{HINT}"


def test_check_mode_names_the_drifted_file(tmp_path: Path, capsys) -> None:
    conformance.write(tmp_path)
    target = tmp_path / VECTOR_DIR / "filters.json"
    document = json.loads(target.read_text())
    document["cases"][0]["result"] = "no-match"
    target.write_text(json.dumps(document))
    (tmp_path / VECTOR_DIR / "old.json").write_text("{}")
    assert main(["--check", "--root", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "conformance/vectors/filters.json: differs from the reference" in captured.out
    assert "conformance/vectors/old.json" in captured.out
    assert "make vectors" in captured.err


def test_generation_is_deterministic_across_processes(tmp_path: Path) -> None:
    # A different hash seed changes set and dict order in a fresh interpreter; the files must not change.
    outputs = []
    for seed in ("0", "4242"):
        root = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": f"{REPOSITORY}:{REPOSITORY / 'operator'}"}
        subprocess.run(
            [sys.executable, "-m", "replay_worker.conformance", "--root", str(root)],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        outputs.append({p.name: p.read_text() for p in sorted((root / VECTOR_DIR).glob("*.json"))})
    assert outputs[0] == outputs[1] == render()
