"""How a trace's script runs with a crash: the one rule that the guard traces and the replay traces share.

A trace is a list of actions on a simulated consumer or worker that counts its steps. Crashing "after step k"
means crashing at the first action boundary at or after k steps, so that a crash never splits an action.
"""

from __future__ import annotations

from typing import Any, Protocol, Sized, TypeVar

Action = tuple[Any, ...]


class Restartable(Protocol):
    @property
    def steps(self) -> Sized: ...

    def crash_and_restart(self) -> None: ...


R = TypeVar("R", bound=Restartable)


def run(runner: R, actions: list[Action], crash_after: int | None = None) -> tuple[R, int | None]:
    """Run the script; with `crash_after`, crash at the first action boundary at or after that many steps.
    Returns the runner and the step count at which it crashed (None: no crash)."""
    crashed = None
    for action in actions:
        if crash_after is not None and crashed is None and len(runner.steps) >= crash_after:
            crashed = len(runner.steps)
            runner.crash_and_restart()
        name, *args = action
        getattr(runner, name)(*args)
    if crash_after is not None and crashed is None and len(runner.steps) >= crash_after:
        crashed = len(runner.steps)
        runner.crash_and_restart()
    return runner, crashed
