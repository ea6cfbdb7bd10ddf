module example.com/orders

go 1.24

require (
	github.com/confluentinc/confluent-kafka-go/v2 v2.11.1
	reprise.io/kafka v0.0.0
)

replace reprise.io/kafka => ../../../../../go
