package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgemq/edgemq/edge/mq"
)

// Message is a message delivered to a listener. A message from the group's retry topic
// carries its original topic (RocketMQ restores it from RETRY_TOPIC before delivery).
// A listener may keep a message, its body and its properties after it returns: the
// consumer does not reuse them (over the network, the bodies of one pull share the
// reply's buffer, which stays alive while any of them is kept). It must not change them
// while the batch may still be consumed again.
type Message = mq.MessageExt

// ConsumeConcurrentlyStatus is a concurrent listener's verdict on a batch.
type ConsumeConcurrentlyStatus int

const (
	// ConsumeSuccess: the batch (up to ConcurrentlyContext.AckIndex) is consumed.
	ConsumeSuccess ConsumeConcurrentlyStatus = iota
	// ReconsumeLater: the batch failed; it is sent back and consumed again later.
	ReconsumeLater
)

// ConcurrentlyContext goes with each batch to a concurrent listener.
type ConcurrentlyContext struct {
	Queue mq.MessageQueue
	// DelayLevel of the send-back when the batch fails: -1 straight to the DLQ, 0 the broker
	// decides (3 + reconsume times), > 0 that level. Default 0.
	DelayLevel int32
	// AckIndex: with ConsumeSuccess, messages after this index count as failed. Default: the
	// last index (all consumed).
	AckIndex int
}

// ConsumeOrderlyStatus is an orderly listener's verdict on a batch.
type ConsumeOrderlyStatus int

const (
	// OrderlySuccess: the batch is consumed (committed with auto-commit).
	OrderlySuccess ConsumeOrderlyStatus = iota
	// SuspendCurrentQueueAMoment: consume the same batch again after SuspendTime
	// (OrderlyContext.SuspendTime, else Options.SuspendCurrentQueueTime).
	SuspendCurrentQueueAMoment
	// Commit (auto-commit off): commit everything taken so far.
	Commit
	// Rollback (auto-commit off): put everything taken since the last commit back.
	Rollback
)

// OrderlyContext goes with each batch to an orderly listener.
type OrderlyContext struct {
	Queue mq.MessageQueue
	// AutoCommit commits each successful batch; turn it off to use Commit and Rollback.
	// Default true.
	AutoCommit bool
	// SuspendTime overrides Options.SuspendCurrentQueueTime for this batch when > 0.
	SuspendTime int64 // milliseconds
}

// Listener is what a PushConsumer calls with the messages it pulled: a ConcurrentListener
// or an OrderlyListener.
type Listener interface {
	isListener()
}

// ConcurrentListener consumes batches on a worker pool, in any order.
type ConcurrentListener func(ctx context.Context, msgs []*Message, cc *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error)

// OrderlyListener consumes each queue's messages in queue order, one batch at a time.
type OrderlyListener func(ctx context.Context, msgs []*Message, oc *OrderlyContext) (ConsumeOrderlyStatus, error)

func (ConcurrentListener) isListener() {}
func (OrderlyListener) isListener()    {}

// Errors.
var (
	// ErrNotStarted is returned by calls that need a started consumer.
	ErrNotStarted = errors.New("consumer: not started")
	// ErrStarted is returned by Subscribe and Start on a consumer already started.
	ErrStarted = errors.New("consumer: already started")
	// ErrShutdown is returned after Shutdown.
	ErrShutdown = errors.New("consumer: shut down")
	// ErrInvalidOptions is returned by NewPushConsumer and NewPullConsumer for options out of
	// range, naming the field.
	ErrInvalidOptions = errors.New("consumer: invalid options")
	// ErrMixedListeners is returned when one consumer gets both concurrent and orderly
	// listeners.
	ErrMixedListeners = errors.New("consumer: concurrent and orderly listeners in one consumer")
)

// errNilContext answers a call given a nil context where it needs one.
var errNilContext = fmt.Errorf("%w: nil context", mq.ErrInvalidArgument)
