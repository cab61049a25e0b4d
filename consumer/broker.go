package consumer

import (
	"context"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// Broker is what a consumer needs of a broker. *edge.Broker satisfies it in-process; a
// remoting client satisfies it over the network, so the same consumer code runs in both.
type Broker interface {
	Pull(ctx context.Context, req edge.PullRequest) (edge.PullResult, error)
	CommitOffset(group, topic string, queueID int32, offset int64) error
	QueryOffset(group, topic string, queueID int32) (int64, error)
	MaxOffset(topic string, queueID int32) (int64, error)
	MinOffset(topic string, queueID int32) (int64, error)
	SearchOffset(topic string, queueID int32, at time.Time) (int64, error)
	Topic(name string) (edge.TopicConfig, bool)
	Heartbeat(hb edge.Heartbeat) error
	Unregister(clientID, group string) error
	ConsumerIDs(group string) ([]string, error)
	LockQueues(group, clientID string, mqs []edge.MessageQueue) ([]edge.MessageQueue, error)
	UnlockQueues(group, clientID string, mqs []edge.MessageQueue) error
	SendBack(ctx context.Context, req edge.SendBackRequest) (edge.SendResult, error)
	Send(ctx context.Context, m *edge.Message, sel edge.QueueSelector) (edge.SendResult, error)
}

var _ Broker = (*edge.Broker)(nil)
