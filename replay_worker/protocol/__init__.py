"""The handover protocol's pure rules: what every port (Java `io.reprise.kafka.protocol`, Go `protocol`) holds
the same, and the conformance vectors check. No Kafka client, no I/O.

- `wire`: the handover topic's records (keys, values, decoding of malformed ones); `json_limits`: how much JSON
  the protocol reads;
- `handover`: the view the handover topic's records add up to, per replay and per partition;
- `commit_marks`: the marks both groups attach to committed offsets;
- `filters`: which records a replay covers;
- `start_position` (with the grammars of `durations` and `timestamps`, and `spec_error`): where a replay
  starts and ends per partition; `finish_rules`: when the replay stops a partition;
- `guard_rules`: the guard's rules per record of one live partition.

HANDOVER.md (in `replay_worker/`) is the specification.
"""
