"""The job's one settings object, read from its command line: the contract with the operator.

The operator builds a SparkApplication's `arguments` from a LakeReplay spec; every flag below is one of them.
`parse_settings(argv)` rejects bad values with one readable line (argparse exits with code 2), so a
misconfigured LakeReplay fails at submission, before Spark reads anything.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Sequence

Format = Literal["parquet", "json", "avro", "delta", "iceberg"]
FORMATS: tuple[Format, ...] = ("parquet", "json", "avro", "delta", "iceberg")

DEFAULT_MAX_RECORDS_PER_WRITE = 5_000_000
DEFAULT_SLICE_SECONDS = 5.0

# As the LakeReplay API allows: a name, or a dotted path into a struct column.
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True)
class ReplaySettings:
    """Everything one LakeReplay run needs; see `build_parser()` for each flag's meaning."""

    source: str
    """Hadoop URI of the lake table: `file:///...` in tests, `s3a://bucket/path` in production."""
    timestamp_column: str
    """The event-time column (in the latest schema): the time range and per-key order use it."""
    key_column: str
    """The column whose value becomes the Kafka key (in the latest schema); per-key order is kept."""
    end: datetime
    """Exclusive end of the time range (UTC)."""
    bootstrap_servers: str
    topic: str
    """The temporary backfill topic (created by the operator before the job runs)."""
    progress: str
    """Hadoop URI of the folder where written days are recorded, for retries."""
    start: datetime | None = None
    """Inclusive start of the time range (UTC); None: from the oldest record."""
    format: Format = "parquet"
    partition_column: str | None = None
    """The day partition column of the lake (`dt=YYYY-MM-DD` folders); None: days come from the event time."""
    filter: str | None = None
    """A Spark SQL boolean expression over the latest schema; rows where it is not true are left out."""
    latest_schema: str | None = None
    """Path of the latest schema (JSON); without it the records keep the schema they were read with."""
    renames: tuple[tuple[str, str], ...] = ()
    """Older field name -> latest name, on top of the schema's own aliases."""
    defaults: tuple[tuple[str, str], ...] = ()
    """Field -> default as JSON text, on top of the schema's own defaults."""
    kafka_settings: str | None = None
    """Path of a mounted file of Kafka client settings (credentials): never logged."""
    max_records_per_second: int = 0
    """Across the whole job; 0 means no limit."""
    origin_id: str = ""
    """Goes into each record's `reprise-origin` header as `<origin_id>#<partition column>=<day>`; default: the source."""
    validate: bool = True
    max_records_per_write: int = DEFAULT_MAX_RECORDS_PER_WRITE
    """Consecutive days are written together up to this many records (one Spark job, one resume unit)."""
    write_partitions: int = 0
    """Spark tasks writing to Kafka at once; 0 means Spark's default parallelism."""
    slice_seconds: float = DEFAULT_SLICE_SECONDS
    """With a rate limit: the records of about this many seconds are written per Spark job, then paced."""
    dry_run: bool = False
    """Read and transform everything, write to Spark's `noop` sink: no Kafka, no progress, no validation."""
    as_of_version: int | None = None
    """Delta and Iceberg: read the table as of this version (Delta) or snapshot id (Iceberg)."""
    as_of_timestamp: datetime | None = None
    """Delta and Iceberg: read the table as it was at this time."""
    spark_conf: tuple[tuple[str, str], ...] = field(default=())
    """Extra Spark settings for local runs with `python -m spark_app` (spark-submit passes its own)."""

    def __post_init__(self) -> None:
        # Avro files read without a reader schema come back in one file's schema (nulls for the others'
        # fields, or a failure): such settings cannot be made.
        if self.format == "avro" and not self.latest_schema:
            raise ValueError("format avro needs latest_schema: Avro files are read only with the reader schema")

    @property
    def origin(self) -> str:
        return self.origin_id or self.source

    def identity(self) -> dict[str, str]:
        """What makes two runs the same replay: a retry must match it, or its progress is not ours."""
        return {
            "source": self.source,
            "format": self.format,
            "partition_column": self.partition_column or "",
            "timestamp_column": self.timestamp_column,
            "key_column": self.key_column,
            "from": rfc3339(self.start) if self.start else "",
            "to": rfc3339(self.end),
            "filter": self.filter or "",
            "topic": self.topic,
            "origin": self.origin,
            # Only when set, so the progress of replays that predate time travel stays theirs.
            **({"as_of_version": str(self.as_of_version)} if self.as_of_version is not None else {}),
            **({"as_of_timestamp": rfc3339(self.as_of_timestamp)} if self.as_of_timestamp else {}),
        }


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?$")


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp with an offset (`2024-03-01T00:00:00Z`), as an aware UTC datetime.

    Parsed by hand rather than with `fromisoformat`, which before Python 3.11 (the Spark image's Python)
    refuses `Z` and fractions other than 3 or 6 digits.
    """
    match = _RFC3339.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 timestamp (e.g. 2024-03-01T00:00:00Z)")
    day, clock, fraction, offset = match.groups()
    if offset is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset: RFC 3339 needs one (e.g. a trailing Z)")
    offset = "+00:00" if offset in ("Z", "z") else offset
    micros = ("." + (fraction + "000000")[:6]) if fraction else ""
    try:
        moment = datetime.fromisoformat(f"{day}T{clock}{micros}{offset}")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 timestamp (e.g. 2024-03-01T00:00:00Z)") from None
    return moment.astimezone(timezone.utc)


def _column(text: str) -> str:
    if not _COLUMN.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a column name (letters, digits, _ and . for nested fields)")
    return text


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def _uri(text: str) -> str:
    if "://" not in text and not text.startswith("/"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Hadoop URI (file:///..., s3a://bucket/...)")
    stripped = text.rstrip("/")
    return text if stripped.endswith(":") else stripped  # keep a bare root such as file:///


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def _rename(text: str) -> tuple[str, str]:
    old, sep, new = text.partition("=")
    if not sep or not _COLUMN.match(old.strip()) or not _COLUMN.match(new.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not OLD=NEW (two field names)")
    return old.strip(), new.strip()


def _default(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not _COLUMN.match(name.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not FIELD=JSON")
    try:
        json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"the default of {name.strip()} is not JSON text (a string needs quotes: {name.strip()}='\"en\"')"
        ) from None
    return name.strip(), value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark_app",
        description=(
            "LakeReplay's Spark job: read a time range of a lake table, evolve every record to the latest schema, "
            "and write it, ordered per key, to a temporary Kafka backfill topic with replay headers. Days already "
            "written are recorded in --progress and skipped on a retry; at the end the record count of every day "
            "is checked against the topic."
        ),
        epilog=(
            "Exit codes: 0 done and validated; 2 bad arguments or configuration; 3 validation found a day whose "
            "count in the topic differs from the lake; 1 anything else. "
            "Run as `spark-submit spark_app/main.py ...` or `python -m spark_app ...`."
        ),
    )
    source = parser.add_argument_group("the lake")
    source.add_argument(
        "--source",
        required=True,
        type=_uri,
        metavar="URI",
        help="Hadoop URI of the lake table (file:///..., s3a://bucket/path)",
    )
    source.add_argument(
        "--format",
        choices=FORMATS,
        default="parquet",
        help="table format (default parquet); avro, delta and iceberg need their Spark packages on spark.jars",
    )
    source.add_argument(
        "--as-of-version",
        type=int,
        metavar="N",
        help="delta, iceberg: read the table as of this version (Delta) or snapshot id (Iceberg)",
    )
    source.add_argument(
        "--as-of-timestamp",
        type=parse_time,
        metavar="RFC3339",
        help="delta, iceberg: read the table as it was at this time",
    )
    source.add_argument(
        "--partition-column",
        type=_column,
        metavar="NAME",
        help="day partition column of the table, values YYYY-MM-DD (e.g. dt): only the days of the "
        "range are read; unset: no pruning, days are the UTC dates of the event time",
    )
    source.add_argument(
        "--timestamp-column", required=True, type=_column, metavar="NAME", help="event-time column of the latest schema"
    )
    source.add_argument(
        "--key-column",
        required=True,
        type=_column,
        metavar="NAME",
        help="column of the latest schema that becomes the Kafka key",
    )
    source.add_argument(
        "--from",
        dest="start",
        type=parse_time,
        metavar="RFC3339",
        help="inclusive start of the time range, e.g. 2024-03-01T00:00:00Z (default: the oldest)",
    )
    source.add_argument(
        "--to", dest="end", required=True, type=parse_time, metavar="RFC3339", help="exclusive end of the time range"
    )
    source.add_argument(
        "--filter", metavar="SQL", help="Spark SQL condition over the latest schema, e.g. \"event_type <> 'view'\""
    )
    source.add_argument(
        "--latest-schema",
        metavar="PATH",
        help="JSON file: an Avro record schema, a Spark StructType (field metadata 'default', "
        '\'aliases\') or {"fields": [{"name", "type", "default"}], "renames": {"old": "new"}}',
    )
    source.add_argument(
        "--rename",
        type=_rename,
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="a field renamed since older records were written (repeatable)",
    )
    source.add_argument(
        "--default",
        type=_default,
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="default, as JSON text, of a field missing from older records (repeatable)",
    )

    sink = parser.add_argument_group("the backfill topic")
    sink.add_argument(
        "--bootstrap-servers",
        required=True,
        metavar="HOST:PORT,...",
        help="bootstrap brokers of the cluster holding the backfill topic",
    )
    sink.add_argument("--topic", required=True, metavar="NAME", help="the temporary backfill topic")
    sink.add_argument(
        "--kafka-settings",
        metavar="PATH",
        help="Kafka client settings, e.g. SASL and TLS: a mounted Secret folder (one librdkafka "
        "setting per file, translated for Spark's Java client) or a .properties/.json file; "
        "values are never logged",
    )
    sink.add_argument(
        "--origin-id",
        default="",
        metavar="ID",
        help="origin written in each record's reprise-origin header (default: the source URI)",
    )

    pacing = parser.add_argument_group("pacing, resuming and checking")
    pacing.add_argument(
        "--max-records-per-second",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="rate limit across the whole job (default 0: none)",
    )
    pacing.add_argument(
        "--progress",
        required=True,
        type=_uri,
        metavar="URI",
        help="Hadoop URI of a folder recording the days written, so a retry skips them",
    )
    pacing.add_argument(
        "--validate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compare per-day counts of the lake and the topic at the end (default on)",
    )
    pacing.add_argument(
        "--max-records-per-write",
        type=_non_negative_int,
        default=DEFAULT_MAX_RECORDS_PER_WRITE,
        metavar="N",
        help=f"days are written together up to N records (default {DEFAULT_MAX_RECORDS_PER_WRITE})",
    )
    pacing.add_argument(
        "--write-partitions",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="Spark tasks writing to Kafka (default: Spark's default parallelism)",
    )
    pacing.add_argument(
        "--slice-seconds",
        type=_positive_float,
        default=DEFAULT_SLICE_SECONDS,
        metavar="S",
        help=f"with a rate limit, write about S seconds' worth per Spark job (default {DEFAULT_SLICE_SECONDS:g})",
    )
    pacing.add_argument(
        "--dry-run",
        action="store_true",
        help="read and transform, write to Spark's noop sink; no Kafka, progress or validation",
    )

    local = parser.add_argument_group("local runs")
    local.add_argument(
        "--spark-conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for `python -m spark_app` (spark-submit takes --conf itself)",
    )
    return parser


def parse_settings(argv: Sequence[str] | None = None) -> ReplaySettings:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.start is not None and args.end <= args.start:
        parser.error(f"--to ({rfc3339(args.end)}) must be after --from ({rfc3339(args.start)})")
    if (args.rename or args.default) and not args.latest_schema:
        parser.error("--rename and --default need --latest-schema (they evolve records to it)")
    if args.max_records_per_write == 0:
        parser.error("--max-records-per-write must be at least 1")
    if args.format == "avro" and not args.latest_schema:
        parser.error(
            "--format avro needs --latest-schema, an Avro record schema: Avro files are always read with the "
            "latest schema as the reader schema (without it Spark takes one file's schema for all of them)"
        )
    if args.as_of_version is not None and args.as_of_timestamp is not None:
        parser.error("give --as-of-version or --as-of-timestamp, not both")
    if (args.as_of_version is not None or args.as_of_timestamp is not None) and args.format not in ("delta", "iceberg"):
        parser.error(f"--as-of-version and --as-of-timestamp are for --format delta or iceberg, not {args.format}")
    return ReplaySettings(
        source=args.source,
        format=args.format,
        partition_column=args.partition_column,
        timestamp_column=args.timestamp_column,
        key_column=args.key_column,
        start=args.start,
        end=args.end,
        filter=(args.filter or "").strip() or None,
        latest_schema=args.latest_schema,
        renames=tuple(args.rename),
        defaults=tuple(args.default),
        bootstrap_servers=args.bootstrap_servers,
        topic=args.topic,
        kafka_settings=args.kafka_settings,
        origin_id=args.origin_id,
        max_records_per_second=args.max_records_per_second,
        progress=args.progress,
        validate=args.validate,
        max_records_per_write=args.max_records_per_write,
        write_partitions=args.write_partitions,
        slice_seconds=args.slice_seconds,
        dry_run=args.dry_run,
        as_of_version=args.as_of_version,
        as_of_timestamp=args.as_of_timestamp,
        spark_conf=tuple(args.spark_conf),
    )
