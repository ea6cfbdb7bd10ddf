"""`make bench`: run every benchmark module of this package and print its figures and ratios.

    python -m benchmarks                 # all of them, full size
    python -m benchmarks worker spark    # some of them
    python -m benchmarks --quick         # smaller sizes, for a quick check (REPRISE_BENCH_QUICK=1)
    python -m benchmarks worker --records 200000 --rounds 5 --parts forward
                                         # sizes by hand (REPRISE_BENCH_RECORDS, _ROUNDS, _PARTS)

A benchmark is a module `benchmarks/<name>.py` with `run() -> dict`: the figures it measured, with baselines
measured in the same run, and `meets_target` (bool) when it has targets. Each module starts what it needs
(its own broker, ...) and stops it by PID. The runner imports and calls them one after another, prints a
summary, writes all figures to `$REPRISE_CACHE/bench/results.json`, and exits 1 when a module failed or
missed a target. No module is timed by the test suite: performance lives here, as ratios.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import benchmarks


#: Modules of the package that are not benchmarks: how to measure, the hand-written loops, their handlers, the
#: instruction count of the worker's loop against the bare one (`python -m benchmarks.instructions`, needs valgrind),
#: and the guards' per-record path apart from Kafka (`python -m benchmarks.guard_path`, Go's needs valgrind).
SUPPORT = {"measure", "baselines", "handlers", "instructions", "guard_path"}


def available() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if not m.name.startswith("_") and m.name not in SUPPORT
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default all: {', '.join(available())})")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (sets REPRISE_BENCH_QUICK=1)")
    parser.add_argument(
        "--records", type=int, help="records per run, where a benchmark takes a size (sets REPRISE_BENCH_RECORDS)"
    )
    parser.add_argument(
        "--rounds", type=int, help="interleaved rounds (sets REPRISE_BENCH_ROUNDS; at least 5 for figures that count)"
    )
    parser.add_argument(
        "--parts",
        help="comma-separated parts of a benchmark, e.g. worker: forward,handler,guard (sets REPRISE_BENCH_PARTS)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        os.environ["REPRISE_BENCH_QUICK"] = "1"
    for option, variable in (
        ("records", "REPRISE_BENCH_RECORDS"),
        ("rounds", "REPRISE_BENCH_ROUNDS"),
        ("parts", "REPRISE_BENCH_PARTS"),
    ):
        if getattr(args, option):
            os.environ[variable] = str(getattr(args, option))
    names = args.names or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available())}")
    results: dict[str, Any] = {}
    failed = False
    for name in names:
        print(f"== benchmark {name}", flush=True)
        began = time.monotonic()
        try:
            figures = importlib.import_module(f"benchmarks.{name}").run()
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            traceback.print_exc()
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            failed = True
            continue
        figures = dict(figures or {})
        figures.setdefault("seconds", round(time.monotonic() - began, 1))
        results[name] = figures
        if figures.get("meets_target") is False:
            failed = True
    print("\n== summary")
    for name, figures in results.items():
        verdict = (
            "ERROR"
            if "error" in figures
            else {True: "meets targets", False: "MISSES TARGETS", None: "figures only"}[figures.get("meets_target")]
        )
        print(f"  {name:<10} {verdict}")
    cache = Path(os.environ.get("REPRISE_CACHE") or Path.home() / ".cache" / "reprise") / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    # Benchmarks run one at a time (`python -m benchmarks spark`) add to the figures of the others.
    stored = cache / "results.json"
    try:
        kept = json.loads(stored.read_text()) if stored.exists() else {}
    except ValueError:
        kept = {}
    stored.write_text(json.dumps({**kept, **results}, indent=2, default=str))
    print(f"  figures: {cache / 'results.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
