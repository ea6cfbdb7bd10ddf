"""An unreachable registry is a wait in the guard's rules (HANDOVER.md section 4, "Schemas"): neither
`verdict` nor `skips_by_value` decides anything or changes the partition's state, so the same record is
judged again, with the same rules, once the registry answers."""

from __future__ import annotations

import copy

import pytest

from replay_worker.protocol.filters import FilterSpec, RecordFilter, SchemaUnavailable
from replay_worker.protocol.guard_rules import ActiveHandover, GuardPartition, Verdict
from replay_worker.protocol.record_values import InlineSchemas, Schema, avro_schema_text, encode_avro

RID = "shop/orders-avro/1a2b3c4d"
ORDER = {"type": "record", "name": "Order", "fields": [{"name": "region", "type": "string"}]}
SPEC = FilterSpec.parse(
    {"valueFormat": "avro", "registry": "http://registry.invalid", "json": [{"path": "region", "equals": "eu"}]}
)
EU = encode_avro(1, ORDER, {"region": "eu"})


class FlakyRegistry:
    """A registry that is down until `up` is set (a source of the real kind, not a stand-in for a library)."""

    def __init__(self) -> None:
        self.up = False
        self.inner = InlineSchemas({1: Schema("AVRO", avro_schema_text(ORDER))})

    def schema(self, schema_id: int) -> Schema | None:
        if not self.up:
            raise SchemaUnavailable("down")
        return self.inner.schema(schema_id)


def guard_with(registry: FlakyRegistry) -> GuardPartition:
    guard = GuardPartition("orders", 0)
    guard.update(ActiveHandover(RID, 10, 50, RecordFilter.compile(SPEC, registry)))
    return guard


def test_a_verdict_that_needs_an_unreachable_schema_changes_nothing_and_is_given_later() -> None:
    registry = FlakyRegistry()
    guard = guard_with(registry)
    # Unframed: undecodable without asking the registry, so the replay's (skipped here).
    assert guard.verdict(11, None, None, b"not framed") is Verdict.SKIP
    before = copy.deepcopy(vars(guard))
    with pytest.raises(SchemaUnavailable):
        guard.verdict(12, None, None, EU)
    after = vars(guard)
    assert {k: after[k] for k in ("seen_until", "skipped", "first_skipped")} == {
        k: before[k] for k in ("seen_until", "skipped", "first_skipped")
    }
    registry.up = True
    assert guard.verdict(12, None, None, EU) is Verdict.SKIP
    assert guard.seen_until == 13


def test_a_run_that_needs_an_unreachable_schema_changes_nothing() -> None:
    registry = FlakyRegistry()
    guard = guard_with(registry)
    before = copy.deepcopy({k: v for k, v in vars(guard).items() if "matcher" not in k})
    with pytest.raises(SchemaUnavailable):
        guard.skips_by_value([20, 21], [EU, EU])
    assert {k: v for k, v in vars(guard).items() if "matcher" not in k} == before
