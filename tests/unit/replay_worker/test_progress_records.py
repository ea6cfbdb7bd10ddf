"""`progress` records: what a replica publishes of its committed position, and what the operator reads."""

from replay_worker.protocol.handover import HandoverView
from replay_worker.protocol.wire import ProgressInfo, StartInfo, decode, encode


def test_progress_record_round_trips_and_lands_on_its_partition():
    record = ProgressInfo("ns/r/1234", "users", 3, 1500, at_end=True, member="pod-a", at_ms=7)
    key, value = encode(record)
    decoded_key, decoded = decode(key, value)
    assert decoded == record and decoded_key.kind == "progress"
    view = HandoverView()
    view.apply(*encode(StartInfo("ns/r/1234", "users", 3, 100)))
    view.apply(key, value)
    part = view.replay("ns/r/1234").partitions[("users", 3)]
    assert part.progress.position == 1500 and part.progress.at_end
    assert part.start.offset == 100


def test_a_tombstone_removes_progress_with_the_rest_of_the_replay():
    view = HandoverView()
    key, value = encode(ProgressInfo("ns/r/1234", "users", 0, 10))
    view.apply(key, value)
    assert view.replay("ns/r/1234").live_keys == {key}
    view.apply(key, None)
    assert "ns/r/1234" not in view.replays
