"""Reprise's replay worker, and the handover guard a live service embeds.

What runs in the standby replay-consumer Deployments (role `replay`) and in Backfill Jobs (role
`backfill`), started as `python -m replay_worker`. The folders are the layers, as in the Java and Go ports
(an import goes only downward; pyproject.toml's import-linter contracts name these packages):

- `replay/` (the replay and backfill roles: bootstrap, the replay loop around its pure book, delivery, metrics)
  and `guard/` (the live side: `GuardedConsumer` around its pure book), independent of each other;
- `topic/`: the handover topic in Kafka, read, published and tailed;
- `connection/`: the librdkafka settings of every client, from the tenant's Secret; `settings`: the one typed
  settings object (also the operator's contract); `logging`: one JSON object per line;
- `protocol/`: the pure rules every port holds the same (records, view, marks, filters, start and finish, the
  guard's rules); `conformance` generates the language-neutral vectors from them and from the two books.

The operator imports the worker through `contract` (no Kafka client: the start decision, durations,
timestamps, the filter spec, `settings` and what the operator's own clients refuse, re-exported).

The handover protocol is specified in `HANDOVER.md` beside this file.
"""
