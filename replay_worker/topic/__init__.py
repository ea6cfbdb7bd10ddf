"""The handover topic in Kafka (Java `io.reprise.kafka.topic`, Go `handovertopic`): `handover_topic` reads it,
publishes to it and tails it (`HandoverTopic`, `HandoverFollower`); the records and the view they add up to are
`protocol`'s."""
