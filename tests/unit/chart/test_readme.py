"""The chart README is generated from values.yaml, is current, and every value is documented."""

from __future__ import annotations

import importlib.util
import sys

from .conftest import CHART


def load_readme_module():
    spec = importlib.util.spec_from_file_location("chart_readme", CHART / "readme.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["chart_readme"] = module
    spec.loader.exec_module(module)
    return module


readme = load_readme_module()


def test_every_value_has_a_doc_comment() -> None:
    assert readme.undocumented((CHART / "values.yaml").read_text()) == []


def test_the_committed_readme_is_what_values_yaml_gives() -> None:
    assert (CHART / "README.md").read_text() == readme.render(), (
        "run `python charts/reprise/readme.py` and commit README.md"
    )
    assert readme.main(["--check"]) == 0


def test_every_documented_key_is_a_row() -> None:
    text = (CHART / "values.yaml").read_text()
    table = readme.values_table(text)
    for item in readme.parse(text):
        assert f"| `{item.path}` |" in table


def test_parser_reads_continued_comments_nesting_and_finds_gaps() -> None:
    text = (
        "# a file comment, not a doc\n"
        "a:\n"
        "  # -- first line\n"
        "  # second line\n"
        "  b: 1\n"
        "  c: x\n"
        "  # -- a whole map\n"
        "  d:\n"
        "    e: [1]\n"
        "list:\n"
        "  - name: x\n"
    )
    parsed = {d.path: (d.description, d.value) for d in readme.parse(text)}
    assert parsed == {"a.b": ("first line second line", 1), "a.d": ("a whole map", {"e": [1]})}
    assert readme.undocumented(text) == ["a.c", "list"]
