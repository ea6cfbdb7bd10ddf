"""The Java library's compiled classes and its dependencies as a classpath, for tests that start JVM processes.

Built once per session with Maven into the cache (never into the checkout), under a file lock so test workers
that need it at the same time build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

from local_platform.cache import cache_root

REPO = Path(__file__).resolve().parents[3]
JAVA_DIR = REPO / "java"


def build_dir() -> Path:
    """Per checkout, and apart from the Maven suite's build folder (test_java_suite.py), which a test worker may be
    rebuilding at the same moment."""
    digest = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    return cache_root() / "build" / f"java-processes-{digest}"


def java_classpath() -> str:
    """`classes`, `test-classes` and every dependency jar (test scope), compiled from this checkout."""
    target = build_dir()
    target.mkdir(parents=True, exist_ok=True)
    listing = target / "classpath.txt"
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        log = target / "mvn.log"
        with open(log, "wb") as out:
            result = subprocess.run(
                [
                    "mvn",
                    "-B",
                    "-q",
                    f"-Dreprise.build.dir={target}",
                    "test-compile",
                    "dependency:build-classpath",
                    f"-Dmdep.outputFile={listing}",
                    "-Dmdep.includeScope=test",
                ],
                cwd=JAVA_DIR,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if result.returncode != 0:
            raise RuntimeError(
                f"building the Java library failed (exit {result.returncode}): see {log}\n" + log.read_text()[-3000:]
            )
    return os.pathsep.join([str(target / "test-classes"), str(target / "classes"), listing.read_text().strip()])
