package replay

import (
	"testing"

	"reprise.io/kafka/internal/kafkatest"
)

// TestMain: without a broker, the broker tests fail the package with one line saying how to run them.
func TestMain(m *testing.M) { kafkatest.Main(m) }
