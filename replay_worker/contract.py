"""The replay contract: everything the operator and the replay worker must agree on, in one import.

The operator plans a replay and writes the worker's environment; the worker bootstraps from that
environment and publishes where it started. Both sides read the same rules from here, so the plan in
`status.plan` and the start S in the handover topic come from one decision:

- the start and end specs and `decide_start` (which returns the retention risk; each caller picks its
  error) and `PartitionFacts`, from `start_position`;
- the one duration grammar (`durations`) and the one timestamp module (`timestamps`);
- the filter spec (`filters.FilterSpec`), which the worker and the guard evaluate alike;
- the view of one replay in the handover topic (`handover.ReplayHandover`), which the operator follows;
- the worker's environment contract (`settings.WorkerSettings`: every `REPRISE_*` variable, `to_env`) and
  its published table (`settings_table`: what the service ports do not support, which the operator refuses);
- which settings of a tenant's Kafka Secret may run in the operator's own process (`setting_allow_list`).

Pure: nothing here, nor anything it imports, opens a Kafka client (import-linter checks it: `make lint`).
The operator imports the worker only through this module and the handover topic's reader.
"""

from __future__ import annotations

from .protocol.durations import GO_DURATION, format_duration, parse_duration, parse_go_duration
from .protocol.filters import FilterSpec, FilterSpecError
from .protocol.handover import PartitionHandover, ReplayHandover
from .settings import SettingsError, WorkerSettings
from .settings_table import service_unsupported, service_unsupported_asked
from .connection.setting_allow_list import RefusedSetting, client_refusal, operator_settings
from .connection.setting_scopes import ClientType, settings_for
from .protocol.start_position import (
    EndSpec,
    PartitionFacts,
    SpecError,
    StartDecision,
    StartOlderThanRetention,
    StartSpec,
    decide_end,
    decide_start,
    refuse_lost_start,
)
from .protocol.timestamps import (
    epoch_ms,
    from_epoch_ms,
    parse_rfc3339,
    rfc3339,
    rfc3339_exact,
    rfc3339_micros,
    rfc3339_ms,
    utc_now,
)
from .protocol.wire import TopicPartitionKey

__all__ = [
    "GO_DURATION",
    "ClientType",
    "EndSpec",
    "FilterSpec",
    "FilterSpecError",
    "PartitionFacts",
    "PartitionHandover",
    "RefusedSetting",
    "ReplayHandover",
    "SettingsError",
    "SpecError",
    "StartDecision",
    "StartOlderThanRetention",
    "StartSpec",
    "TopicPartitionKey",
    "WorkerSettings",
    "client_refusal",
    "decide_end",
    "decide_start",
    "epoch_ms",
    "format_duration",
    "from_epoch_ms",
    "parse_duration",
    "parse_go_duration",
    "operator_settings",
    "parse_rfc3339",
    "refuse_lost_start",
    "rfc3339",
    "service_unsupported",
    "service_unsupported_asked",
    "rfc3339_exact",
    "rfc3339_micros",
    "rfc3339_ms",
    "settings_for",
    "utc_now",
]
