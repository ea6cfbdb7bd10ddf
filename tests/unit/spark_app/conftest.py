"""One local Spark session (`local[2]`, no UI) for every Spark unit test: the transforms run on tiny DataFrames.

Its JVM is started once per test session and stopped by its PID at the end.
"""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # noqa: F821
    from spark_app.session import local_session, stop_local_session

    session = local_session()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        stop_local_session(session)
