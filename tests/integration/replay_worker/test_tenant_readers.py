"""Readers of the handover topic under a team's own principal ask for no group outside the team's ACLs (issue 27).

librdkafka looks up the coordinator of the group id every consumer carries, also of an assign()-only reader that
never joins. The readers carried `reprise-reader-unused`, outside every team's prefixes, so under tenant ACLs each
one logged "FindCoordinator response error: Group authorization failed" (in the stalled tenant suite's worker log,
where it hid the real cause). A guard's readers now carry the live group, a replay worker's the replay group.
"""

from __future__ import annotations

import logging

from replay_worker.protocol.wire import ReplayInfo
from replay_worker.topic.handover_topic import HandoverFollower, HandoverTopic


def test_a_guards_handover_follower_under_a_team_principal_meets_no_group_refusal(kafka, caplog):
    tenants = kafka.multi_tenant
    tenants.create_topics(kafka)
    team_b = tenants.tenant("team-b")
    topic = team_b.handover_topic()
    writer = HandoverTopic(kafka.sasl_bootstrap, topic, team_b.client_settings())
    try:
        writer.publish(ReplayInfo("team-b/readers/1", "Drain", "reprise.team-b.readers", None, ("team-b.x",), {}, 1))
    finally:
        writer.close()
    caplog.set_level(logging.WARNING, logger="replay_worker.handover_topic")
    follower = HandoverFollower(
        kafka.sasl_bootstrap,
        topic,
        team_b.client_settings(),
        lambda view: set(view.replays),
        reader_group="team-b.accounts",  # what the guard of the live group team-b.accounts passes
    ).start()
    try:
        assert follower.wait_synced(follower.request_sync(), 60), f"the follower did not read {topic}: {follower.error}"
        assert "team-b/readers/1" in follower.snapshot
        bounded = HandoverTopic(kafka.sasl_bootstrap, topic, team_b.client_settings(), reader_group="team-b.accounts")
        assert "team-b/readers/1" in bounded.read().replays
        bounded.close()
    finally:
        follower.stop()
    refused = [r for r in caplog.records if "authorization" in str(getattr(r, "error", "")).lower()]
    assert not refused, [getattr(r, "error", "") for r in refused]
