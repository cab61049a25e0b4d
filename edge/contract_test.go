package edge_test

import (
	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
)

// The in-process broker is a consumer.Broker: consumers run on it unchanged.
var _ consumer.Broker = (*edge.Broker)(nil)
