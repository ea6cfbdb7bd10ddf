"""Start and end decisions per partition: resolved once, loud about retention, -1 means the end."""

from __future__ import annotations

import pytest

from replay_worker.protocol.start_position import (
    EndSpec,
    PartitionFacts,
    SpecError,
    StartOlderThanRetention,
    StartSpec,
    decide_end,
    decide_partition,
    decide_start,
    parse_duration,
    refuse_lost_start,
)


def facts(
    log_start: int = 0, end: int = 100, time_lookup: int | None = None, end_time_lookup: int | None = None
) -> PartitionFacts:
    return PartitionFacts("orders", 3, log_start, end, time_lookup, end_time_lookup)


@pytest.mark.parametrize(
    "text, kind",
    [
        ('{"earliest": true}', "earliest"),
        ('{"type": "earliest"}', "earliest"),
        ('"earliest"', "earliest"),
        ('{"timestamp": "2024-05-01T00:00:00Z"}', "timestamp"),
        ('{"timestamp": 1714521600000}', "timestamp"),
        ('{"duration": "2h"}', "duration"),
        ('{"type": "duration", "duration": "PT90M"}', "duration"),
        ('{"offsets": {"orders": {"0": 5}}}', "offsets"),
    ],
)
def test_start_specs(text: str, kind: str) -> None:
    spec = StartSpec.parse(text)
    assert spec.kind == kind
    assert StartSpec.parse(spec.to_json()) == spec


def test_timestamps_are_epoch_milliseconds() -> None:
    assert StartSpec.parse('{"timestamp":"2024-05-01T00:00:00Z"}').timestamp_ms == 1714521600000
    assert StartSpec.parse('{"timestamp":"2024-05-01T02:00:00+02:00"}').timestamp_ms == 1714521600000
    assert StartSpec.parse('{"timestamp":"2024-05-01T00:00:00"}').timestamp_ms == 1714521600000  # naive = UTC


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("7d", 604800),
        ("1h30m", 5400),
        ("PT2H", 7200),
        ("P1D", 86400),
        ("P1DT1H", 90000),
        (30, 30),
        ("250ms", 0.25),
    ],
)
def test_durations(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["2 hours", "h", "-5s", "0", "PT", "P"])
def test_bad_durations(bad) -> None:
    with pytest.raises(SpecError):
        parse_duration(bad)


def test_duration_becomes_a_timestamp_at_resolution() -> None:
    assert StartSpec.parse('{"duration":"1m"}').lookup_timestamp(now_ms=1_000_000) == 940_000
    assert StartSpec.parse('"earliest"').lookup_timestamp(now_ms=5) is None


@pytest.mark.parametrize("text", ['{"earliest":true,"duration":"1h"}', '{"latest":true}', "[1]", '{"type":"never"}'])
def test_bad_start_specs(text: str) -> None:
    with pytest.raises(SpecError):
        StartSpec.parse(text)


def test_earliest_is_the_log_start() -> None:
    assert decide_start(StartSpec("earliest"), facts(log_start=40), allow_clamp=False).offset == 40


def test_timestamp_found() -> None:
    assert decide_start(StartSpec("timestamp", timestamp_ms=5), facts(time_lookup=60), False).offset == 60


def test_no_record_that_new_starts_at_the_end() -> None:
    decision = decide_start(StartSpec("timestamp", timestamp_ms=5), facts(end=100, time_lookup=-1), False)
    assert decision.offset == 100 and not decision.clamped


def test_timestamp_before_retention_is_a_risk_the_worker_refuses_unless_clamping() -> None:
    spec = StartSpec("duration", duration_s=3600)
    risky = decide_start(spec, facts(log_start=40, time_lookup=40), allow_clamp=False)
    assert (risky.offset, risky.retention_risk, risky.clamped, risky.lost) == (40, True, False, True)
    with pytest.raises(StartOlderThanRetention) as error:
        refuse_lost_start(risky, facts(log_start=40, time_lookup=40))
    message = str(error.value)
    assert "orders[3]" in message and "40" in message and "LakeReplay" in message and "REPRISE_ALLOW_CLAMP" in message
    clamped = decide_start(spec, facts(log_start=40, time_lookup=40), allow_clamp=True)
    assert (clamped.offset, clamped.clamped, clamped.retention_risk, clamped.lost) == (40, True, True, False)
    assert refuse_lost_start(clamped, facts(log_start=40, time_lookup=40)) == clamped


def test_timestamp_at_log_start_zero_is_not_an_error() -> None:
    assert decide_start(StartSpec("timestamp", timestamp_ms=1), facts(log_start=0, time_lookup=0), False).offset == 0


def test_explicit_offsets() -> None:
    spec = StartSpec.parse('{"offsets":{"orders":{"3":70}}}')
    assert decide_start(spec, facts(), False).offset == 70
    below = decide_start(spec, facts(log_start=80, end=120), False)
    assert (below.offset, below.requested, below.lost) == (70, 70, True)
    with pytest.raises(StartOlderThanRetention, match="offset 70"):
        refuse_lost_start(below, facts(log_start=80, end=120))
    assert decide_start(spec, facts(log_start=80, end=120), True).offset == 80
    with pytest.raises(SpecError, match="beyond"):
        decide_start(spec, facts(end=50), False)
    with pytest.raises(SpecError, match="no offset for orders\\[3\\]"):
        decide_start(StartSpec.parse('{"offsets":{"orders":{"0":1}}}'), facts(), False)


def test_a_committed_offset_wins_over_the_spec() -> None:
    decision = decide_partition(
        StartSpec("earliest"), None, facts(log_start=0), allow_clamp=False, now_ms=0, committed=55
    )
    assert decision.offset == 55


def test_end_bounds() -> None:
    assert decide_end(None, facts(), 0) == (None, None)
    assert decide_end(EndSpec("snapshot"), facts(end=90), 0) == (90, None)
    assert decide_end(EndSpec.parse('{"offsets":{"orders":{"3":77}}}'), facts(), 0) == (77, None)
    past = EndSpec("timestamp", timestamp_ms=1000)
    assert decide_end(past, facts(end_time_lookup=66), now_ms=5000) == (66, None)
    assert decide_end(past, facts(end=90, end_time_lookup=-1), now_ms=5000) == (90, None)
    future = EndSpec("timestamp", timestamp_ms=9000)
    assert decide_end(future, facts(end=90, end_time_lookup=-1), now_ms=5000) == (None, 9000)


def test_end_below_start_means_nothing_to_do() -> None:
    decision = decide_partition(
        StartSpec.parse('{"offsets":{"orders":{"3":50}}}'),
        EndSpec.parse('{"offsets":{"orders":{"3":20}}}'),
        facts(),
        allow_clamp=False,
        now_ms=0,
    )
    assert decision.offset == 50 and decision.end_offset == 50
