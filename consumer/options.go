package consumer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// ConsumeFromWhere says where a queue starts when the group has no stored offset for it.
//
// As with RocketMQ, the broker may answer the offset query of a group that has none with 0:
// the in-process broker does so for a queue whose first message is still stored and younger
// than its NewQueueWindow (60 s by default), so that the first messages of a topic created
// moments before its consumers started are not skipped. Such a queue is read from its first
// message whatever ConsumeFromWhere says.
type ConsumeFromWhere int

const (
	// ConsumeFromLastOffset starts after the last message: only messages sent from then on
	// are consumed (but see above for a new queue). The retry topic starts at 0. Default.
	ConsumeFromLastOffset ConsumeFromWhere = iota
	// ConsumeFromFirstOffset starts at the first stored message.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// Options.ConsumeTimestamp.
	ConsumeFromTimestamp
)

// Hook runs before or after each consume of a batch (RocketMQ's ConsumeMessageHook).
type Hook func(ctx context.Context, hc *HookContext)

// HookContext describes one consume of a batch.
type HookContext struct {
	Group    string
	Queue    mq.MessageQueue
	Messages []*Message
	Success  bool          // after the consume: the listener's verdict was a success
	Status   string        // after the consume: the verdict's name
	Elapsed  time.Duration // after the consume
}

// Options configures a consumer. A zero field takes its default; every number of RocketMQ's
// push consumer is here.
type Options struct {
	// Group is the consumer group. Required.
	Group string
	// ClientID identifies this consumer instance in the group. Default, clustering:
	// host@pid#n, unique to the consumer. Default, broadcasting: host@DEFAULT, the same in
	// every run, since it names the directory of the group's local offsets (OffsetDir), as
	// RocketMQ's broadcasting clients do; give two broadcasting consumers of one group in one
	// process ids of their own.
	ClientID string
	// Model is clustering (each message to one member, default) or broadcasting.
	Model mq.MessageModel
	// FromWhere and ConsumeTimestamp place a queue without a stored offset.
	FromWhere ConsumeFromWhere
	// ConsumeTimestamp for ConsumeFromTimestamp. Default 30 minutes before Start.
	ConsumeTimestamp time.Time

	// PullBatchSize is the most messages one pull asks for: 1..1024, default 32.
	PullBatchSize int
	// PullInterval waits this long between pulls of a queue. Default 0.
	PullInterval time.Duration
	// PullThresholdForQueue pauses a queue's pulls while it caches more messages. Default 1000.
	PullThresholdForQueue int
	// PullThresholdSizeForQueue pauses a queue's pulls while it caches more body bytes.
	// Default 100 MiB.
	PullThresholdSizeForQueue int64
	// ConsumeConcurrentlyMaxSpan pauses a concurrent queue's pulls while its cached offsets
	// span more than this. Default 2000.
	ConsumeConcurrentlyMaxSpan int64
	// FlowControlDelay is the longest a PushConsumer's pull held back by flow control waits
	// before it checks again. It goes on sooner, as soon as the queue's cache holds at most
	// half of PullThresholdForQueue messages and half of PullThresholdSizeForQueue bytes and,
	// in concurrent consumption, spans at most half of ConsumeConcurrentlyMaxSpan. Default
	// 50 ms. A PullConsumer does not use it: its held-back pulls go on as soon as Poll makes
	// room.
	FlowControlDelay time.Duration
	// SuspendedDelay is the retry delay of a pull while the consumer is suspended. Default 1 s.
	SuspendedDelay time.Duration
	// PullErrorDelay is the retry delay after a failed pull. Default 3 s.
	PullErrorDelay time.Duration
	// BrokerSuspend is how long the broker holds a pull that finds nothing. Default 15 s.
	BrokerSuspend time.Duration
	// NoStreamPulls makes a PushConsumer over a network client send a pull for every answer.
	// By default it asks an EdgeMQ broker to stream each queue's pull: to answer it again
	// as messages arrive, within what the queue may still take in before flow control
	// would pause it, so that a message stored while an answer is on its way finds the pull
	// parked rather than a round trip away. Apache RocketMQ's broker, and the in-process
	// one, answer each pull once either way; orderly consumption never streams.
	NoStreamPulls bool
	// OffsetIllegalDelay: after OFFSET_ILLEGAL the queue is removed this long later. Default 10 s.
	OffsetIllegalDelay time.Duration
	// PullExpiry restarts a queue stuck in a pull, one lost on a dead connection, say. A
	// PushConsumer's next rebalance drops the cache of a queue whose pull loop has not run
	// for this long and starts the queue again from its stored offset; a PullConsumer
	// restarts a queue whose pull has been in flight this long from its polled position (time
	// paused or waiting for Poll to make room does not count), and requires it to exceed
	// BrokerSuspend. Default 120 s.
	PullExpiry time.Duration

	// ConsumeGoroutinesMin and Max size the concurrent worker pool. Defaults 20 and 64.
	// A pull's listener batches are shared among up to ConsumeGoroutinesMin workers while
	// listener calls take 50 µs or more; while they are faster, among as many workers as the
	// process has processors (GOMAXPROCS, at least 2), since waking a worker would cost more
	// than the calls it takes over, and a call that turns slow brings the other workers in.
	ConsumeGoroutinesMin int
	ConsumeGoroutinesMax int
	// ConsumeMessageBatchMaxSize is the most messages per listener call: 1..1024, default 1.
	ConsumeMessageBatchMaxSize int
	// SubmitRetryDelay retries a batch the worker pool refused. Default 5 s.
	SubmitRetryDelay time.Duration
	// SendBackRetryDelay consumes failed messages locally again after this when sending them
	// back failed. Default 5 s.
	SendBackRetryDelay time.Duration
	// ConsumeTimeout: messages consuming longer are sent back. Default 15 min.
	ConsumeTimeout time.Duration
	// ExpiredCheckInterval is how often consume timeouts are checked. Default 15 min.
	ExpiredCheckInterval time.Duration
	// MaxExpiredPerQueue bounds the expired messages sent back per queue per check. Default 16.
	MaxExpiredPerQueue int
	// MaxReconsumeTimes sends a message to the DLQ after this many reconsumes, in both
	// concurrent and orderly consumption: a message that always fails is delivered
	// MaxReconsumeTimes+1 times. Default 16; -1 also means 16 (RocketMQ's Go client's
	// default). (RocketMQ's orderly default is unlimited, which lets one poison message block
	// its queue forever.)
	MaxReconsumeTimes int32

	// LockInterval is how often an orderly consumer locks its queues at the broker. Default 20 s.
	LockInterval time.Duration
	// LockExpiry: an orderly queue is consumed only while its lock is younger. Default 30 s.
	LockExpiry time.Duration
	// MaxTimeConsumeContinuously makes an orderly consume run yield. Default 60 s.
	MaxTimeConsumeContinuously time.Duration
	// SuspendCurrentQueueTime is the pause of SUSPEND_CURRENT_QUEUE_A_MOMENT. Default 1 s.
	SuspendCurrentQueueTime time.Duration

	// RebalanceInterval is how often queues are reassigned. Default 20 s.
	RebalanceInterval time.Duration
	// Strategy assigns queues to members. Default AllocateAveragely.
	Strategy AllocateStrategy
	// HeartbeatInterval is how often the consumer heartbeats. Default 30 s.
	HeartbeatInterval time.Duration
	// PersistInterval is how often offsets are sent to the broker (clustering) or written to
	// disk (broadcasting). Default 5 s.
	PersistInterval time.Duration
	// CallTimeout bounds each call the consumer makes to the broker on its own (heartbeats,
	// rebalance queries, offset commits, locks, send-backs); pulls are bounded by
	// BrokerSuspend at the broker, and by PullExpiry. Default 3 s.
	CallTimeout time.Duration
	// OffsetDir holds broadcasting offsets. Default $HOME/.edgemq/offsets.
	OffsetDir string

	// BeforeConsume and AfterConsume hooks run around each listener call.
	BeforeConsume []Hook
	AfterConsume  []Hook
	// Logger receives the consumer's reports. Default: discard.
	Logger *slog.Logger
}

// DefaultOptions holds the defaults zero fields take.
var DefaultOptions = Options{
	PullBatchSize:              32,
	PullThresholdForQueue:      1000,
	PullThresholdSizeForQueue:  100 << 20,
	ConsumeConcurrentlyMaxSpan: 2000,
	FlowControlDelay:           50 * time.Millisecond,
	SuspendedDelay:             time.Second,
	PullErrorDelay:             3 * time.Second,
	BrokerSuspend:              15 * time.Second,
	OffsetIllegalDelay:         10 * time.Second,
	PullExpiry:                 120 * time.Second,
	ConsumeGoroutinesMin:       20,
	ConsumeGoroutinesMax:       64,
	ConsumeMessageBatchMaxSize: 1,
	SubmitRetryDelay:           5 * time.Second,
	SendBackRetryDelay:         5 * time.Second,
	ConsumeTimeout:             15 * time.Minute,
	ExpiredCheckInterval:       15 * time.Minute,
	MaxExpiredPerQueue:         16,
	MaxReconsumeTimes:          16,
	LockInterval:               20 * time.Second,
	LockExpiry:                 30 * time.Second,
	MaxTimeConsumeContinuously: 60 * time.Second,
	SuspendCurrentQueueTime:    time.Second,
	RebalanceInterval:          20 * time.Second,
	HeartbeatInterval:          30 * time.Second,
	PersistInterval:            5 * time.Second,
	CallTimeout:                3 * time.Second,
}

// clientSeq numbers the default client ids of the process's clustering consumers.
var clientSeq atomic.Int64

// defaultClientID returns the client id of a consumer that was given none: unique to it in
// clustering, stable across runs in broadcasting (see Options.ClientID).
func defaultClientID(model mq.MessageModel) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	if model == mq.Broadcasting {
		return host + "@DEFAULT"
	}
	return fmt.Sprintf("%s@%d#%d", host, os.Getpid(), clientSeq.Add(1)-1)
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	d := DefaultOptions
	def := func(v *time.Duration, x time.Duration) {
		if *v == 0 {
			*v = x
		}
	}
	defInt := func(v *int, x int) {
		if *v == 0 {
			*v = x
		}
	}
	if r.Group == "" {
		return r, fmt.Errorf("%w: Group is required", ErrInvalidOptions)
	}
	if err := mq.ValidateGroup(r.Group); err != nil {
		return r, fmt.Errorf("%w: Group: %v", ErrInvalidOptions, err)
	}
	if r.ClientID == "" {
		r.ClientID = defaultClientID(r.Model)
	}
	defInt(&r.PullBatchSize, d.PullBatchSize)
	defInt(&r.PullThresholdForQueue, d.PullThresholdForQueue)
	if r.PullThresholdSizeForQueue == 0 {
		r.PullThresholdSizeForQueue = d.PullThresholdSizeForQueue
	}
	if r.ConsumeConcurrentlyMaxSpan == 0 {
		r.ConsumeConcurrentlyMaxSpan = d.ConsumeConcurrentlyMaxSpan
	}
	def(&r.FlowControlDelay, d.FlowControlDelay)
	def(&r.SuspendedDelay, d.SuspendedDelay)
	def(&r.PullErrorDelay, d.PullErrorDelay)
	def(&r.BrokerSuspend, d.BrokerSuspend)
	def(&r.OffsetIllegalDelay, d.OffsetIllegalDelay)
	def(&r.PullExpiry, d.PullExpiry)
	defInt(&r.ConsumeGoroutinesMin, d.ConsumeGoroutinesMin)
	defInt(&r.ConsumeGoroutinesMax, d.ConsumeGoroutinesMax)
	defInt(&r.ConsumeMessageBatchMaxSize, d.ConsumeMessageBatchMaxSize)
	def(&r.SubmitRetryDelay, d.SubmitRetryDelay)
	def(&r.SendBackRetryDelay, d.SendBackRetryDelay)
	def(&r.ConsumeTimeout, d.ConsumeTimeout)
	def(&r.ExpiredCheckInterval, d.ExpiredCheckInterval)
	defInt(&r.MaxExpiredPerQueue, d.MaxExpiredPerQueue)
	if r.MaxReconsumeTimes == 0 || r.MaxReconsumeTimes == -1 {
		r.MaxReconsumeTimes = d.MaxReconsumeTimes
	}
	def(&r.LockInterval, d.LockInterval)
	def(&r.LockExpiry, d.LockExpiry)
	def(&r.MaxTimeConsumeContinuously, d.MaxTimeConsumeContinuously)
	def(&r.SuspendCurrentQueueTime, d.SuspendCurrentQueueTime)
	def(&r.RebalanceInterval, d.RebalanceInterval)
	def(&r.HeartbeatInterval, d.HeartbeatInterval)
	def(&r.PersistInterval, d.PersistInterval)
	def(&r.CallTimeout, d.CallTimeout)
	if r.Strategy == nil {
		r.Strategy = AllocateAveragely{}
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.OffsetDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		r.OffsetDir = filepath.Join(home, ".edgemq", "offsets")
	}
	if r.ConsumeTimestamp.IsZero() {
		r.ConsumeTimestamp = time.Now().Add(-30 * time.Minute)
	}
	switch {
	case r.PullBatchSize < 1 || r.PullBatchSize > 1024:
		return r, fmt.Errorf("%w: PullBatchSize %d not in 1..1024", ErrInvalidOptions, r.PullBatchSize)
	case r.ConsumeMessageBatchMaxSize < 1 || r.ConsumeMessageBatchMaxSize > 1024:
		return r, fmt.Errorf("%w: ConsumeMessageBatchMaxSize %d not in 1..1024", ErrInvalidOptions, r.ConsumeMessageBatchMaxSize)
	case r.ConsumeGoroutinesMin < 1 || r.ConsumeGoroutinesMax < r.ConsumeGoroutinesMin:
		return r, fmt.Errorf("%w: ConsumeGoroutinesMin %d / Max %d", ErrInvalidOptions, r.ConsumeGoroutinesMin, r.ConsumeGoroutinesMax)
	case r.PullThresholdForQueue < 1 || r.PullThresholdSizeForQueue < 1 || r.ConsumeConcurrentlyMaxSpan < 1 || r.MaxExpiredPerQueue < 1 || r.MaxReconsumeTimes < 1:
		return r, fmt.Errorf("%w: thresholds, spans and counts must be positive", ErrInvalidOptions)
	case r.PullInterval < 0:
		return r, fmt.Errorf("%w: negative PullInterval", ErrInvalidOptions)
	case slices.ContainsFunc([]time.Duration{r.FlowControlDelay, r.SuspendedDelay, r.PullErrorDelay, r.BrokerSuspend,
		r.OffsetIllegalDelay, r.SubmitRetryDelay, r.SendBackRetryDelay, r.ConsumeTimeout, r.ExpiredCheckInterval,
		r.LockInterval, r.LockExpiry, r.MaxTimeConsumeContinuously, r.SuspendCurrentQueueTime, r.RebalanceInterval,
		r.HeartbeatInterval, r.PersistInterval, r.CallTimeout}, func(d time.Duration) bool { return d < 0 }):
		return r, fmt.Errorf("%w: negative delay or interval", ErrInvalidOptions)
	case r.PullExpiry <= r.BrokerSuspend:
		// Else every idle long poll would count as a lost pull.
		return r, fmt.Errorf("%w: PullExpiry %v must exceed BrokerSuspend %v", ErrInvalidOptions, r.PullExpiry, r.BrokerSuspend)
	case r.Model != mq.Clustering && r.Model != mq.Broadcasting:
		return r, fmt.Errorf("%w: Model %d", ErrInvalidOptions, r.Model)
	case r.FromWhere < ConsumeFromLastOffset || r.FromWhere > ConsumeFromTimestamp:
		return r, fmt.Errorf("%w: FromWhere %d", ErrInvalidOptions, r.FromWhere)
	}
	return r, nil
}
