"""The entry point: `spark-submit spark_app/main.py ARGS` (the SparkApplication's mainApplicationFile) or
`python -m spark_app ARGS`.

Exit codes: 0 done and validated; 2 bad arguments or configuration (one line says which); 3 validation
found days whose records in the topic differ from the lake (one line per day); 1 anything else. On every
failure the line that says why is also the driver pod's termination message (`failure_report`).
"""

from __future__ import annotations

import logging
import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
    # Run as a file by spark-submit: Python put spark_app/ itself first on sys.path, where its modules
    # would shadow top-level ones; put the folder holding the package there instead.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.path.dirname(here))

from spark_app.failure_report import failure_summary, write_termination_message  # noqa: E402
from spark_app.schema import SchemaError  # noqa: E402
from spark_app.kafka_settings import KafkaSettingsError  # noqa: E402
from spark_app.lake import LakeFormatUnavailable, LakeLayoutError  # noqa: E402
from spark_app.progress import ProgressMismatch  # noqa: E402
from spark_app.settings import ReplaySettings, parse_settings  # noqa: E402
from spark_app.transforms import FilterError  # noqa: E402
from spark_app.validation import ValidationFailed  # noqa: E402

log = logging.getLogger("spark_app")

EXIT_FAILED = 1
EXIT_CONFIGURATION = 2
EXIT_VALIDATION = 3

CONFIGURATION_ERRORS = (
    SchemaError,
    FilterError,
    KafkaSettingsError,
    LakeFormatUnavailable,
    LakeLayoutError,
    ProgressMismatch,
)


def main(argv: list[str] | None = None) -> int:
    settings = parse_settings(argv)
    logging.basicConfig(
        level=os.environ.get("REPRISE_LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return _run(settings)
    except Exception as exc:
        # Anything else (a Py4J error from the JVM: a class Spark cannot load, a lake it cannot read): the
        # traceback goes to the log as before; its root cause to where the operator reads it.
        write_termination_message(failure_summary(exc))
        raise


def _run(settings: ReplaySettings) -> int:
    from spark_app.job import run
    from spark_app.session import job_session

    spark = job_session(dict(settings.spark_conf), settings.format)
    spark.sparkContext.setLogLevel(os.environ.get("REPRISE_SPARK_LOG_LEVEL", "WARN"))
    try:
        run(spark, settings)
    except CONFIGURATION_ERRORS as exc:
        log.error("%s", exc)
        write_termination_message(str(exc))
        return EXIT_CONFIGURATION
    except ValidationFailed as exc:
        log.error("%s", exc)
        write_termination_message(str(exc))
        return EXIT_VALIDATION
    finally:
        spark.stop()
    log.info("LakeReplay job done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
