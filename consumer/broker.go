package consumer

import (
	"context"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// Broker is what a consumer needs of a broker. The in-process broker (*edge.Broker)
// satisfies it, and so does a network client of a remote broker: the same consumer code runs
// on both. Every call takes a ctx, which bounds a network round trip, and reports failures
// as errors: a broker that cannot be reached is an error, never "no such topic". Errors a
// broker answers with wrap package mq's (mq.ErrTopicNotExist, mq.ErrOffsetNotFound, ...).
//
// Queues name their broker (mq.MessageQueue.BrokerName): a client of several brokers sends
// each call about a queue to the queue's broker.
type Broker interface {
	// Route returns the brokers and queues of topic (mq.ErrTopicNotExist if it has none).
	Route(ctx context.Context, topic string) (mq.TopicRoute, error)
	// Pull reads a queue from an offset, holding the request while nothing is there if
	// req.Suspend is set (long polling).
	Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error)
	// CommitOffset stores group's offset of q.
	CommitOffset(ctx context.Context, group string, q mq.MessageQueue, offset int64) error
	// QueryOffset returns group's stored offset of q, or mq.ErrOffsetNotFound.
	QueryOffset(ctx context.Context, group string, q mq.MessageQueue) (int64, error)
	// MaxOffset, MinOffset and SearchOffset return the offset after q's last message, of its
	// first, and of its first stored at or after a time.
	MaxOffset(ctx context.Context, q mq.MessageQueue) (int64, error)
	MinOffset(ctx context.Context, q mq.MessageQueue) (int64, error)
	SearchOffset(ctx context.Context, q mq.MessageQueue, at time.Time) (int64, error)
	// Heartbeat registers the client and its groups; Unregister removes it from group ("":
	// from all).
	Heartbeat(ctx context.Context, hb mq.Heartbeat) error
	Unregister(ctx context.Context, clientID, group string) error
	// ConsumerIDs returns the client ids of group's members, asking a broker of topic.
	ConsumerIDs(ctx context.Context, topic, group string) ([]string, error)
	// LockQueues locks queues for orderly consumption and returns those granted;
	// UnlockQueues frees them.
	LockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) ([]mq.MessageQueue, error)
	UnlockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) error
	// SendBack returns a message that failed to the group's retry (or dead-letter) topic.
	SendBack(ctx context.Context, req mq.SendBackRequest) error
	// Send sends a message; a consumer sends to its retry topic when SendBack fails.
	Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error)
}

// AsyncPuller is a Broker whose pulls can also end in a callback, as a network client's
// do. A PushConsumer over one pulls a queue in a chain: the callback of a pull that found
// messages hands them to the listeners and sends the queue's next pull itself, on the
// broker's goroutine that read the reply, so that a busy queue costs no goroutine
// hand-off per pull. Whatever needs waiting (a delay, flow control, an error, a lock)
// goes back to the queue's own goroutine.
type AsyncPuller interface {
	// PullAsync sends req as Pull does and returns; done gets the result, exactly once,
	// on a goroutine of the broker's, and must not block. It never waits for the network:
	// when it would have to (a route to look up, a connection to open) it returns an error
	// wrapping mq.ErrWouldBlock, and Pull is the way. Any error returned means done is
	// never called. The call ends with ctx: done then gets ctx's error.
	PullAsync(ctx context.Context, req mq.PullRequest, done func(mq.PullResult, error)) error
}
