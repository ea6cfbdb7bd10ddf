"""`make bench` can run: every benchmark module the runner lists imports and has `run` (a renamed helper once
left three of them failing on import, which only a full `make bench` would have shown)."""

import importlib

import pytest

from benchmarks.__main__ import available


def test_the_runner_lists_every_benchmark_and_none_of_the_support_modules():
    names = available()
    assert {"worker", "end_to_end", "go", "java_guard", "java_replay", "spark"} <= set(names)
    assert not {"measure", "baselines", "handlers", "instructions", "guard_path"} & set(names)


@pytest.mark.parametrize("name", available())
def test_each_benchmark_imports_and_can_be_run(name):
    module = importlib.import_module(f"benchmarks.{name}")
    assert callable(getattr(module, "run", None)), f"benchmarks.{name} has no run()"


def test_the_instruction_count_runs_each_loop_over_the_same_batches():
    """`benchmarks.instructions` without valgrind: both loop bodies go through its batches (the count itself needs
    valgrind, which the unit tests do not)."""
    from benchmarks import instructions

    made = instructions.batches(2, 700)
    assert [len(batch) for batch, _ in made] == [instructions.BATCH] * 2
    positions = made[-1][1]
    assert sum(positions.values()) == 2 * instructions.BATCH
    for loop in (instructions.bare_loop, instructions.worker_loop):
        step = loop("benchmarks.handlers:noop")
        for item in made:
            step(None, item)


def test_guard_path_help_shows_its_usage_and_an_unknown_part_is_named(capsys):
    """`python -m benchmarks.guard_path --help` printed a KeyError (issue 32 item 5)."""
    from benchmarks import guard_path

    with pytest.raises(SystemExit) as done:
        guard_path.main(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "python -m benchmarks.guard_path" in shown and "go-process" in shown
    with pytest.raises(SystemExit) as refused:
        guard_path.main(["gopher"])
    assert refused.value.code == 2
    assert "invalid choice: 'gopher'" in capsys.readouterr().err
