"""`python -m replay_worker.conformance [--check] [--root DIR]`: write (or check) conformance/vectors/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import REPOSITORY, VECTOR_DIR, drifted, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replay_worker.conformance", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only say which files drifted; exit 1 if any")
    parser.add_argument("--root", type=Path, default=REPOSITORY, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.check:
        stale = drifted(args.root)
        for name in stale:
            print(f"{VECTOR_DIR / name}: differs from the reference")
        if stale:
            print("run `make vectors` and commit conformance/vectors/", file=sys.stderr)
        return 1 if stale else 0
    for path in write(args.root):
        print(path.relative_to(args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
