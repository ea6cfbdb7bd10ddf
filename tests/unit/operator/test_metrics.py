"""The operator's liveness signal."""

from reprise_operator.shared.metrics import Heartbeat


def test_heartbeat_is_healthy_while_standby_then_goes_stale():
    heartbeat = Heartbeat(stale_after=0.0)
    assert heartbeat.healthy(), "a replica waiting for the leader Lease is alive"
    heartbeat.beat()
    assert not heartbeat.healthy(), "once leading, a loop that stops beating is unhealthy"
