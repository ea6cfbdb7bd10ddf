"""How every Kafka client Reprise builds is configured (Java `topic.KafkaConnection`, Go
`handovertopic/setting_scopes.go`): `kafka_clients` (librdkafka settings from the tenant's Secret folder),
`setting_scopes` (which client type each setting goes to), `setting_allow_list` (what the operator's and the
plugin's own clients refuse) and `librdkafka_levels` (at which level librdkafka's own lines show)."""
