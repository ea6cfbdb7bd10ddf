"""Where builds and downloads live: outside the repository, keyed by component and version.

A fresh clone finds the same cache, so only the first run on a machine pays for the builds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import PlatformError
from .prerequisites import missing

#: Maven Central can be slow on a shared machine; a fetch that takes longer is reported, not waited for.
MAVEN_TIMEOUT_S = 1800.0


def cache_root() -> Path:
    """`$REPRISE_CACHE`, else `$XDG_CACHE_HOME/reprise`, else `~/.cache/reprise`."""
    explicit = os.environ.get("REPRISE_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "reprise"


def component_dir(component: str, version: str) -> Path:
    """The cache folder of one component at one version, e.g. `~/.cache/reprise/kafka-4.1.1`."""
    path = cache_root() / f"{component}-{version}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def maven_artifact(artifact: str, path: str, log: Path) -> Path:
    """One artifact (`group:name:version:type[:classifier]`, no dependencies) fetched by Maven into the cache's
    Maven repository the first time; its file, at `path` inside that repository. Maven's output goes to `log`."""
    repo = cache_root() / "maven-repository"
    target = repo / path
    if target.is_file():
        return target
    problem = missing("mvn")
    if problem:
        raise PlatformError(problem)
    argv = [
        "mvn",
        "-q",
        "-B",
        "-Dstyle.color=never",
        f"-Dmaven.repo.local={repo}",
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get",
        f"-Dartifact={artifact}",
        "-Dtransitive=false",
    ]
    try:
        with open(log, "wb") as out:
            code = subprocess.run(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=MAVEN_TIMEOUT_S
            ).returncode
    except subprocess.TimeoutExpired:
        raise PlatformError(
            f"Maven did not fetch {artifact} within {MAVEN_TIMEOUT_S:.0f}s: check access to Maven Central; see {log}"
        ) from None
    if code != 0 or not target.is_file():
        raise PlatformError(f"Maven could not fetch {artifact} (exit {code}): check access to Maven Central; see {log}")
    return target
