"""Reprise's replay worker, and the handover guard a live service embeds.

What runs in the standby replay-consumer Deployments (role `replay`) and in Backfill Jobs (role
`backfill`), started as `python -m replay_worker`. The layout keeps decisions pure and I/O thin:

- the replay contract the operator shares, in one import: `contract` (re-exporting the start decision of
  `start_position`, `durations`, `timestamps`, `spec_error`, the filter spec and `settings`); no Kafka client;
- pure: `settings` (the one typed settings object, also the operator's contract), `throttle`, the record
  mapping in `delivery`, and the protocol kit a port of the handover protocol reads: `wire` (handover-topic
  records), `commit_marks`, `filters`, `start_position`, `finish_rules` (when the replay stops),
  `guard_rules` (the guard's per-record rules), `guard_book` (the guard's offsets), `handover` (the view
  of the handover topic); `conformance` generates the language-neutral vectors from them;
- I/O around confluent-kafka: `kafka_clients`, `bootstrap`, `handover_topic` (the operator-facing reader
  and publisher), `delivery`, `consumer` (the replay loop), `guard` (the live side), `backfill`, `metrics`,
  `logging`, `__main__`.

The handover protocol is specified in `HANDOVER.md` beside this file.
"""
