"""`make bench` can run: every benchmark module the runner lists imports and has `run` (a renamed helper once
left three of them failing on import, which only a full `make bench` would have shown)."""

import importlib

import pytest

from benchmarks.__main__ import available


def test_the_runner_lists_every_benchmark_and_none_of_the_support_modules():
    names = available()
    assert {"worker", "end_to_end", "go", "java_guard", "java_replay", "spark"} <= set(names)
    assert not {"measure", "baselines", "handlers"} & set(names)


@pytest.mark.parametrize("name", available())
def test_each_benchmark_imports_and_can_be_run(name):
    module = importlib.import_module(f"benchmarks.{name}")
    assert callable(getattr(module, "run", None)), f"benchmarks.{name} has no run()"
