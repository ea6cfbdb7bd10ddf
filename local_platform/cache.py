"""Where builds and downloads live: outside the repository, keyed by component and version.

A fresh clone finds the same cache, so only the first run on a machine pays for the builds.
"""

from __future__ import annotations

import os
from pathlib import Path


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
