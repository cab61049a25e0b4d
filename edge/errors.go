package edge

import (
	"errors"
	"fmt"

	"github.com/edgemq/edgemq/edge/mq"
)

// The broker's own errors. Errors that clients branch on (no such topic, no permission,
// bad argument, message too large, ...) are package mq's, which the broker returns wrapped
// with details.
var (
	// ErrClosed is returned by every call on a Broker that can fail, after Close (Close
	// included), and by calls in flight when Close answers them (parked pulls). It wraps
	// mq.ErrUnavailable.
	ErrClosed = fmt.Errorf("edge: broker closed (%w)", mq.ErrUnavailable)
	// ErrTopicExists is returned by CreateTopic for a topic that exists already.
	ErrTopicExists = errors.New("edge: topic exists")
)
