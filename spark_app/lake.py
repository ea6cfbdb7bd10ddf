"""Reading the lake table: the only code here that touches the lake's files.

`LakeTable.records(days)` gives the records of the range (or of some of its days) evolved to the latest
schema, time-ranged, filtered and labelled (see transforms.py), ready to be ordered per key and written.

- Parquet: only the range's day folders are listed (Hadoop FileSystem, so s3a works the same), the files'
  footers read on the driver, and files with the same footer schema read as one group with that exact
  schema. Each group is evolved knowing its writer schema, then the groups are unioned: one scan. (A plain
  `spark.read.parquet` would merge all versions into one schema, where a missing field and a written null
  look alike, and int/long versions of a column do not merge at all.)
- JSON: read with the latest schema (plus the older names of renamed fields) as the read schema, so no
  inference pass over the data; JSON values widen by being parsed as the wider type.
- Avro files: always read with the latest schema as Avro's reader schema (`avroSchema`), so each file is
  resolved from its own writer schema by Avro's rules (defaults, promotions, aliases). Before the read,
  every file's writer schema is read from its header on the driver and checked against the reader schema:
  a version that cannot be resolved fails the plan naming the file and the field, and a file whose header
  cannot be read (truncated, not Avro) fails naming the file.
- Delta and Iceberg: through their Spark data sources, which resolve their own schema history, optionally
  as of a version or a time; only when their packages are on the classpath (`spark.jars`), else a
  LakeFormatUnavailable that says what to add.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from datetime import datetime, time, timedelta, timezone
from functools import reduce
from typing import Any, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from . import transforms as T
from .evolution import evolve
from .schema import LatestSchema, SchemaError
from .settings import ReplaySettings

log = logging.getLogger("spark_app.lake")

_SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"
_PACKAGES = {
    "avro": "org.apache.spark:spark-avro_2.13",
    "delta": "io.delta:delta-spark_2.13 (and spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension)",
    "iceberg": "org.apache.iceberg:iceberg-spark-runtime-<spark minor>_2.13",
}


class LakeFormatUnavailable(RuntimeError):
    """The table format's Spark package is not on the classpath."""


class LakeLayoutError(ValueError):
    """The table does not look as the settings say (no such partition column, no files, ...)."""


class LakeTable:
    def __init__(self, spark: SparkSession, settings: ReplaySettings, latest: LatestSchema | None) -> None:
        self.spark = spark
        self.settings = settings
        self.latest = latest
        self.first_day, self.last_day = T.day_bounds(settings.start, settings.end)
        self._footer_schemas: dict[str, str] = {}  # file -> schema JSON: each footer is read once per run

    @property
    def day_label(self) -> str:
        """The name days go by in origin headers: the partition column, else `day`."""
        return self.settings.partition_column or "day"

    # ------------------------------------------------------------------------------------------ records

    def records(self, days: Sequence[str] | None = None) -> DataFrame:
        """The range's records (only those of `days` when given), evolved, filtered and labelled."""
        s = self.settings
        pc = s.partition_column
        start, end = s.start, s.end
        if days and not pc:
            # Without partitions, a unit's days become a narrower time range (pushed down to the files).
            start = max(filter(None, [start, _midnight(min(days))]))
            end = min(end, _midnight(max(days)) + timedelta(days=1))
        evolved = self._evolved(days)
        fields = [f for f in evolved.columns if f != pc] if self.latest is None else self.latest.names
        ranged = T.within_time_range(evolved, s.timestamp_column, start, end)
        kept = T.keep_matching(ranged, s.filter)
        if pc:
            day = T.day_of(kept.schema[pc].dataType, T.path(pc))
        else:
            moment = T.event_time(T.type_at(kept, s.timestamp_column), T.path(s.timestamp_column))
            day = F.date_format(moment, T.DAY_FORMAT)
        labelled = T.label_records(
            kept, fields=fields, key_column=s.key_column, timestamp_column=s.timestamp_column, day=day
        )
        if days and not pc:
            labelled = labelled.where(F.col(T.DAY).isin(*days))
        return labelled

    def _evolved(self, days: Sequence[str] | None) -> DataFrame:
        fmt = self.settings.format
        if fmt == "parquet":
            return self._parquet(days)
        if fmt == "json":
            return self._json(days)
        if fmt == "avro":
            if self.latest is None:  # ReplaySettings refuses it; this keeps a reader-less read unreachable
                raise SchemaError("Avro lake files are read only with the latest schema as the reader schema")
            return self._avro(days, self.latest.avro_reader_schema())
        return self._table_format(fmt, days)

    def _pruned(self, df: DataFrame, days: Sequence[str] | None) -> DataFrame:
        pc = self.settings.partition_column
        if not pc:
            return df
        if pc not in df.columns:
            raise LakeLayoutError(
                f"{self.settings.source} has no column {pc} (--partition-column); "
                f"its columns are {', '.join(df.columns)}"
            )
        if days:
            return T.only_days(df, pc, days)
        return T.prune_days(df, pc, self.first_day, self.last_day)

    def _carry(self) -> list[str]:
        pc = self.settings.partition_column
        if pc and self.latest is not None and pc in self.latest.names:
            return []  # the partition column is a field of the record itself
        return [pc] if pc else []

    # ------------------------------------------------------------------------------------------ parquet

    def _parquet(self, days: Sequence[str] | None) -> DataFrame:
        uri = self.settings.source
        if self.latest is None:
            return self._pruned(self.spark.read.option("mergeSchema", "true").parquet(uri), days)
        files = self._data_files(days)
        if not files:
            return self._empty()
        groups = self._by_footer_schema(sorted(files))
        log.info("lake: %d parquet files in %d schema group(s)", len(files), len(groups))
        frames = []
        for schema_json, group in groups.items():
            written = StructType.fromJson(json.loads(schema_json))
            group_df = self.spark.read.schema(written).option("basePath", uri).parquet(*group)
            group_df = self._pruned(group_df, days)
            try:
                frames.append(evolve(group_df, self.latest, writer_schema_known=True, carry=self._carry()))
            except SchemaError as exc:
                raise SchemaError(f"{exc} (in {len(group)} file(s) such as {group[0]})") from None
        return reduce(lambda a, b: a.unionByName(b), frames)

    def _data_files(self, days: Sequence[str] | None) -> list[str]:
        """The data files of the range's days (or of `days`), listed through Hadoop's FileSystem.

        Only the partition folders wanted are listed when days are the top level (`<uri>/dt=2024-01-03/`),
        as lakes usually are; otherwise every file is listed and kept by its `<column>=<day>` path segment.
        Names starting with `_` or `.` (`_SUCCESS`, checksums, `_delta_log`) are not data.
        """
        jvm = self.spark.sparkContext._jvm  # type: ignore[attr-defined]
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        root = jvm.org.apache.hadoop.fs.Path(self.settings.source)
        fs = root.getFileSystem(conf)
        if not fs.exists(root):
            raise LakeLayoutError(f"{self.settings.source} does not exist")
        pc = self.settings.partition_column
        wanted = set(days) if days else None

        def in_range(day: str) -> bool:
            if wanted is not None:
                return day in wanted
            return (self.first_day is None or day >= self.first_day) and day <= self.last_day

        def listed(folder: Any) -> list[str]:
            found, files = [], fs.listFiles(folder, True)
            while files.hasNext():
                status = files.next()
                relative = str(status.getPath().toUri().getPath())[len(str(root.toUri().getPath())) :]
                if not any(part.startswith(("_", ".")) for part in relative.split("/") if part):
                    found.append(str(status.getPath()))
            return found

        if not pc:
            return listed(root)
        prefix = pc + "="
        top = [status.getPath() for status in fs.listStatus(root) if status.isDirectory()]
        if any(p.getName().startswith(prefix) for p in top):
            return [
                f
                for p in top
                if p.getName().startswith(prefix) and in_range(p.getName()[len(prefix) :][:10])
                for f in listed(p)
            ]
        return [
            f
            for f in listed(root)
            if any(part.startswith(prefix) and in_range(part[len(prefix) :][:10]) for part in f.split("/"))
        ]

    def _by_footer_schema(self, files: list[str]) -> "OrderedDict[str, list[str]]":
        """Files grouped by the schema their footer records (Spark's own schema when Spark wrote them)."""
        jvm = self.spark.sparkContext._jvm  # type: ignore[attr-defined]
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        converter = None
        groups: "OrderedDict[str, list[str]]" = OrderedDict()
        for name in files:
            if name in self._footer_schemas:
                groups.setdefault(self._footer_schemas[name], []).append(name)
                continue
            source = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
                jvm.org.apache.hadoop.fs.Path(name), conf
            )
            reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(source)
            try:
                metadata = reader.getFooter().getFileMetaData()
                text = metadata.getKeyValueMetaData().get(_SPARK_ROW_METADATA)
                if not text:
                    if converter is None:
                        sql_conf = self.spark._jsparkSession.sessionState().conf()  # type: ignore[attr-defined]
                        converter = (
                            jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter(
                                sql_conf
                            )
                        )
                    text = converter.convert(metadata.getSchema()).json()
            finally:
                reader.close()
            # Nullability and metadata do not change what a file holds: group on names and types only.
            struct = StructType(
                [StructField(f.name, f.dataType, True) for f in StructType.fromJson(json.loads(text)).fields]
            )
            self._footer_schemas[name] = struct.json()
            groups.setdefault(struct.json(), []).append(name)
        return groups

    def _empty(self) -> DataFrame:
        """No files in range: an empty frame of the latest schema (the counts then say 0 for every day)."""
        assert self.latest is not None
        fields = list(self.latest.struct.fields)
        for name in self._carry():
            fields.append(StructField(name, StringType(), True))
        return self.spark.createDataFrame([], StructType(fields))

    # ------------------------------------------------------------------------------------------ json

    def _json(self, days: Sequence[str] | None) -> DataFrame:
        uri = self.settings.source
        if self.latest is None:
            return self._pruned(self.spark.read.json(uri), days)
        read_schema = StructType(list(self.latest.struct.fields))
        for old, new in self.latest.renames.items():
            read_schema.add(old, self.latest.field(new).dataType, True)
        df = self.spark.read.schema(read_schema).json(uri)
        return evolve(self._pruned(df, days), self.latest, writer_schema_known=False, carry=self._carry())

    # ------------------------------------------------------------------------------------------ avro

    def _avro(self, days: Sequence[str] | None, reader_schema: str) -> DataFrame:
        """The Avro files of the range read with `reader_schema`: the only way this module reads Avro."""
        assert self.latest is not None
        files = sorted(self._data_files(days))
        if not files:
            return self._empty()
        versions = self._check_writer_schemas(files, reader_schema)
        log.info("lake: %d avro files in %d writer schema version(s)", len(files), versions)
        try:
            df = (
                self.spark.read.format("avro")
                .option("avroSchema", reader_schema)
                .option("mode", "FAILFAST")
                .option("basePath", self.settings.source)
                .load(files)
            )
        except Exception as exc:
            self._unavailable("avro", exc)
            raise
        return self._pruned(df, days).select(*self.latest.names, *self._carry())

    def _check_writer_schemas(self, files: list[str], reader_schema: str) -> int:
        """Check every file's writer schema against the reader schema; the number of distinct versions."""
        jvm = self.spark.sparkContext._jvm  # type: ignore[attr-defined]
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        avro = jvm.org.apache.avro
        reader = avro.Schema.Parser().parse(reader_schema)
        checked: dict[str, str] = {}  # writer schema text -> first file with it
        for name in files:
            source = jvm.org.apache.avro.mapred.FsInput(jvm.org.apache.hadoop.fs.Path(name), conf)
            try:
                stream = avro.file.DataFileReader.openReader(source, avro.generic.GenericDatumReader())
                writer = stream.getSchema()
                stream.close()
            except Exception as exc:
                raise LakeLayoutError(
                    f"{name} is not a readable Avro file (truncated, or not Avro): {_java_message(exc)}"
                ) from None
            finally:
                source.close()
            text = writer.toString()
            if text in checked:
                continue
            checked[text] = name
            result = avro.SchemaCompatibility.checkReaderWriterCompatibility(reader, writer).getResult()
            if result.getCompatibility().toString() != "COMPATIBLE":
                problems = [
                    f"{problem.getLocation()}: {problem.getMessage()}" for problem in result.getIncompatibilities()
                ]
                raise SchemaError(
                    f"{name} was written under a schema version that cannot be evolved to the latest schema: "
                    f"{'; '.join(problems)} (writer schema: {text})"
                )
        return len(checked)

    # ------------------------------------------------------------------------------------------ delta, iceberg

    def _unavailable(self, fmt: str, exc: Exception) -> None:
        text = str(exc)
        if "DATA_SOURCE_NOT_FOUND" in text or "ClassNotFoundException" in text or "Failed to find data source" in text:
            raise LakeFormatUnavailable(
                f"--format {fmt} needs its Spark package, which is not on the classpath: add "
                f"{_PACKAGES[fmt]} to spark.jars (the platform resolves it when a LakeReplay names the format)"
            ) from None

    def _table_format(self, fmt: str, days: Sequence[str] | None) -> DataFrame:
        s = self.settings
        reader = self.spark.read.format(fmt)
        # Spark's own time-travel options, which both read: a Delta version or an Iceberg snapshot id, or a
        # time (a timestamp literal in the session's time zone, which the job pins to UTC).
        if s.as_of_version is not None:
            reader = reader.option("versionAsOf", str(s.as_of_version))
        if s.as_of_timestamp is not None:
            moment = s.as_of_timestamp.astimezone(timezone.utc)
            reader = reader.option("timestampAsOf", moment.strftime("%Y-%m-%d %H:%M:%S.%f"))
        try:
            df = reader.load(s.source)
        except Exception as exc:
            self._unavailable(fmt, exc)
            raise
        pruned = self._pruned(df, days)
        if self.latest is None:
            return pruned
        return evolve(pruned, self.latest, writer_schema_known=False, carry=self._carry())


def _java_message(exc: Exception) -> str:
    """The Java exception's own message, not py4j's wrapping of it."""
    java = getattr(exc, "java_exception", None)
    return str(java.toString()) if java is not None else str(exc).splitlines()[0]


def _midnight(day: str) -> datetime:
    return datetime.combine(datetime.fromisoformat(day).date(), time(0), tzinfo=timezone.utc)
