"""An example the local platform cannot run as it is says so where a user reads first (issue 32 item 5): the
LakeReplay examples read `s3a://`, and the local platform has no s3a file system yet."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
#: Where a user reads whether an example runs on `make run`.
DOCS = [REPO / "README.md", REPO / "docs" / "local-platform.md", REPO / "docs" / "lakereplay.md"]


def s3a_examples() -> list[str]:
    found = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            uri = ((doc or {}).get("spec") or {}).get("source", {}).get("uri", "")
            if str(uri).startswith("s3a://"):
                found.append(f"examples/{path.name}")
    return found


def test_every_example_that_reads_s3a_is_named_in_the_docs_as_not_for_the_local_platform():
    examples = s3a_examples()
    assert "examples/lakereplay.yaml" in examples
    for doc in DOCS:
        text = doc.read_text()
        missing = [name for name in examples if name not in text]
        assert not missing, f"{doc.relative_to(REPO)} does not say that {missing} need s3a"
        assert "s3a" in text and "cannot read" in text, (
            f"{doc.relative_to(REPO)} does not say the platform cannot read s3a"
        )
