"""The replay side: what runs in the standby replay Deployments and Backfill Jobs (Java
`io.reprise.kafka.replay`, Go `replay`).

- `bootstrap`: resolve a replay's start once and record it; `consumer`: the replay loop (the I/O) around the pure
  `replay_book.ReplayBook` (the decisions the replay-trace vectors hold);
- `delivery`: where matching records go (the service's handler, a target topic, dead letters); `throttle`: the
  records and bytes per second;
- `metrics`: the worker's Prometheus metrics and health endpoint;
- `backfill`: the role `backfill` (the latest record of each named key, re-emitted).
"""
