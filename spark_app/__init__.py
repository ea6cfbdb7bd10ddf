"""The PySpark job of LakeReplay: history from the data lake into a temporary Kafka backfill topic.

It reads a time range of a lake table (Parquet, JSON, Delta, Iceberg) by Hadoop URI, evolves every record
to the latest schema, and writes the records, ordered per key, with Spark's own Kafka sink; it paces itself,
resumes where a killed attempt stopped, and checks per-day counts against the topic at the end.

Layout: `settings` (the command line: the contract with the operator), `schema` and `evolution` (the latest
schema and how older records reach it), `transforms` (pure DataFrame steps), `plan` (write units, pacing),
`validation` (the per-day comparison), `kafka_settings` (client settings from the mounted Secret);
`lake`, `topic` and `progress` (the only I/O: lake files, the backfill topic, retry markers); `session`,
`job` (one run) and `main` (the entry point); `lakegen` (generated lakes for tests and benchmarks).
`jars/pom.xml` names the Kafka connector jars; `Dockerfile` bakes them into the Spark image.
"""
