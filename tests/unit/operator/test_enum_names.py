"""Condition types and phases are named through the API's enums (`ConditionType`, `Phase`), never as string
literals, wherever the operator sets or reads them on a resource: a misspelt literal would be a condition no
`kubectl wait` ever sees, and the enums are what the CRD documents."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

OPERATOR = Path(__file__).resolve().parents[3] / "operator" / "reprise_operator"
#: Methods of `lifecycle.Resource` whose first argument is a condition type or a phase.
NAMED_FIRST = {"condition", "condition_true", "set_phase"}


def literal_names(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal given as a condition type or a phase in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in NAMED_FIRST:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "phase":
            for right in node.comparators:
                items = right.elts if isinstance(right, (ast.Tuple, ast.List)) else [right]
                found += [(node.lineno, i.value) for i in items if isinstance(i, ast.Constant)]
    return found


def test_the_checker_sees_a_literal_condition_type_and_phase() -> None:
    planted = 'resource.condition("Running", "True", "X", "")\nif resource.phase in ("Running", Phase.FAILED): pass\n'
    assert literal_names(planted) == [(1, "Running"), (2, "Running")]
    assert literal_names("resource.condition(ConditionType.RUNNING, 'True', 'X', '')\n") == []


@pytest.mark.parametrize("path", sorted(OPERATOR.rglob("*.py")), ids=lambda p: str(p.relative_to(OPERATOR)))
def test_the_operator_names_condition_types_and_phases_by_their_enums(path: Path) -> None:
    assert literal_names(path.read_text()) == [], f"{path}: use ConditionType / Phase instead of string literals"
