"""Checks for the tools the platform is built with, each failing with one line that says the fix.

Runs with the system Python before the virtual environment exists, so it uses the standard library only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

FIXES = {
    "python": "install Python 3.11 (the project pins it) and run make with PYTHON_BOOT=python3.11",
    "java": "install a Java 17 JDK (Debian: apt-get install openjdk-17-jdk-headless)",
    "mvn": "install Maven 3.8+ (Debian: apt-get install maven)",
    "go": "install Go 1.24 or newer (https://go.dev/doc/install, or Debian's golang package if new enough)",
}


def _java_major() -> int | None:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    for token in out.split():
        token = token.strip('"')
        if token[:2].isdigit():
            return int(token.split(".")[0])
    return None


def missing(tool: str) -> str | None:
    """The one-line problem with `tool`, or None when it is fine."""
    if tool == "python":
        if sys.version_info[:2] != (3, 11):
            return f"Python 3.11 is required, this is {sys.version.split()[0]}: {FIXES['python']}"
        return None
    if shutil.which(tool) is None:
        return f"{tool} not found on PATH: {FIXES[tool]}"
    if tool == "java":
        major = _java_major()
        if major is None or major < 17:
            return f"Java 17 or newer is required (found {major}): {FIXES['java']}"
    return None


def require(*tools: str) -> None:
    problems = [p for p in (missing(t) for t in tools) if p]
    if problems:
        for p in problems:
            print(f"reprise: {p}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    require(*(sys.argv[1:] or ["python", "java", "mvn", "go"]))
