package edge

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// Options configures a Broker. A zero field takes its default; nil Options means all defaults.
// Open refuses a negative size, count or duration (wrapping mq.ErrInvalidArgument), except
// NewQueueWindow, where negative means never.
type Options struct {
	// Store configures the message store under the broker (segment size, flush policy,
	// retention, ...). nil means the store's defaults. Its Now (the broker's Now) and
	// OnArrival are set by the broker, and its MaxMessageSize raised to MaxMessageSize.
	Store *store.Options
	// Now is the broker's wall clock: store times (and so retention by age and the age of
	// a backlog), topics' creation times and the born time of delayed messages. Durations
	// (waits, heartbeat and lock lifetimes, health) run on the time package's own clock.
	// Default time.Now. A program simulating days offline gives a clock it advances.
	Now func() time.Time
	// Logger receives the broker's reports. Default: discard.
	Logger *slog.Logger
	// DefaultQueues is the read and write queue count of auto-created topics and of
	// CreateTopic calls that give none: 1..1024. Default 4.
	DefaultQueues int32
	// NoAutoCreateTopics makes Send to an unknown topic fail with ErrTopicNotExist instead of
	// creating it. Default false: topics are created on first send.
	NoAutoCreateTopics bool
	// MaxMessageSize is the largest body Send accepts, in bytes. Default 4 MiB. The store's
	// segments must hold two such messages with their properties (store.ErrSettings).
	MaxMessageSize int
	// CompressOver compresses (zstd) bodies larger than this many bytes before storing them;
	// Pull returns the original bytes. Default 0: no compression.
	CompressOver int
	// DefaultSuspend is how long a pull that finds nothing waits for a message when its
	// request gives no MaxWait. Default 15 s.
	DefaultSuspend time.Duration
	// MaxSuspend caps the wait of any pull. Default 30 s.
	MaxSuspend time.Duration
	// ShortPolling turns long polling off: an arrival wakes no parked pull, a pull waits at
	// most ShortPollingWait, and parked pulls are re-checked every ShortPollingWait instead
	// of HoldCheckInterval.
	ShortPolling bool
	// ShortPollingWait is the hold of a pull with ShortPolling. Default 1 s.
	ShortPollingWait time.Duration
	// HoldCheckInterval is how often parked pulls are re-checked against the queues
	// (RocketMQ's PullRequestHoldService sweep). Default 5 s.
	HoldCheckInterval time.Duration
	// OffsetPersistInterval is how often consumer offsets are written to the meta store.
	// Default 5 s. They are also written on Close.
	OffsetPersistInterval time.Duration
	// HeartbeatTimeout drops a group member not heard from for this long. Default 120 s.
	HeartbeatTimeout time.Duration
	// HeartbeatCheckInterval is how often members are checked for expiry. Default 10 s.
	HeartbeatCheckInterval time.Duration
	// LockLifetime is how long a queue lock lives unless renewed. Default 60 s.
	LockLifetime time.Duration
	// MaxReconsumeTimes is the reconsume count past which a failed message goes to its
	// group's dead-letter topic, when SendBack, or the message sent to a retry topic, gives
	// no maximum. Default 16.
	MaxReconsumeTimes int32
	// DelayLevels are the delays of levels 1..n, each positive; at most 64. Higher levels
	// are clamped to the last. Default
	// 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
	DelayLevels []time.Duration
	// TransactionTimeout is how old a transaction's half message must be before the broker
	// asks its producer group for the outcome it was not told. Default 6 s.
	TransactionTimeout time.Duration
	// TransactionCheckInterval is how long the broker waits between two checks of one
	// transaction. Default 30 s.
	TransactionCheckInterval time.Duration
	// TransactionCheckMax is how many times the broker asks about one transaction; after the
	// last check goes unanswered for TransactionCheckInterval, the half message is
	// discarded as rolled back (logged). Default 15.
	TransactionCheckMax int32
	// StoreHost is the address written into message ids (RocketMQ's offsetMsgId) and
	// routes. Default 127.0.0.1:10911.
	StoreHost netip.AddrPort
	// BrokerName names this broker in routes and message queues. Default "edgemq".
	BrokerName string
	// NewQueueWindow: a group with no stored offset on a queue whose first message (offset
	// 0) is still stored and was stored less than this long ago reads the queue from 0,
	// whatever its consumers' consume-from-where says, so that the first messages of a topic
	// created moments before its consumers started are not skipped (RocketMQ returns 0
	// while the queue's first message is still in memory). On a queue with older history a
	// new group starts where its consumers ask: with ConsumeFromLastOffset, at new
	// messages. Default 60 s; negative: never.
	NewQueueWindow time.Duration
	// RetentionHolds are forwarders (an uplink's up rules) whose unsent messages retention
	// keeps from the open on, before they run: for each, the messages of the topics it
	// matches from its stored cursors (ForwardCursors) on, every message of a matched queue
	// it has no cursor for, and every message stored after the open. A forwarder's hold
	// lasts until ReleaseRetentionHold(name), which it calls once its own HoldRetention
	// floor is in place; one that never starts holds until the broker closes. Default none.
	RetentionHolds []RetentionHold
}

// DefaultDelayLevels are RocketMQ's 18 delay levels.
var DefaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// DefaultOptions holds the defaults that zero fields take.
var DefaultOptions = Options{
	DefaultQueues:            4,
	MaxMessageSize:           4 << 20,
	DefaultSuspend:           15 * time.Second,
	MaxSuspend:               30 * time.Second,
	ShortPollingWait:         time.Second,
	HoldCheckInterval:        5 * time.Second,
	OffsetPersistInterval:    5 * time.Second,
	HeartbeatTimeout:         120 * time.Second,
	HeartbeatCheckInterval:   10 * time.Second,
	LockLifetime:             60 * time.Second,
	MaxReconsumeTimes:        16,
	DelayLevels:              DefaultDelayLevels,
	TransactionTimeout:       6 * time.Second,
	TransactionCheckInterval: 30 * time.Second,
	TransactionCheckMax:      15,
	StoreHost:                netip.MustParseAddrPort("127.0.0.1:10911"),
	BrokerName:               "edgemq",
	NewQueueWindow:           60 * time.Second,
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	d := DefaultOptions
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	setDefault(&r.DefaultQueues, d.DefaultQueues)
	setDefault(&r.MaxMessageSize, d.MaxMessageSize)
	setDefault(&r.DefaultSuspend, d.DefaultSuspend)
	setDefault(&r.MaxSuspend, d.MaxSuspend)
	setDefault(&r.ShortPollingWait, d.ShortPollingWait)
	setDefault(&r.HoldCheckInterval, d.HoldCheckInterval)
	setDefault(&r.OffsetPersistInterval, d.OffsetPersistInterval)
	setDefault(&r.HeartbeatTimeout, d.HeartbeatTimeout)
	setDefault(&r.HeartbeatCheckInterval, d.HeartbeatCheckInterval)
	setDefault(&r.LockLifetime, d.LockLifetime)
	setDefault(&r.MaxReconsumeTimes, d.MaxReconsumeTimes)
	if len(r.DelayLevels) == 0 {
		r.DelayLevels = d.DelayLevels
	}
	setDefault(&r.TransactionTimeout, d.TransactionTimeout)
	setDefault(&r.TransactionCheckInterval, d.TransactionCheckInterval)
	setDefault(&r.TransactionCheckMax, d.TransactionCheckMax)
	if !r.StoreHost.IsValid() {
		r.StoreHost = d.StoreHost
	}
	setDefault(&r.BrokerName, d.BrokerName)
	setDefault(&r.NewQueueWindow, d.NewQueueWindow)
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxMessageSize", int64(r.MaxMessageSize)}, {"CompressOver", int64(r.CompressOver)},
		{"MaxReconsumeTimes", int64(r.MaxReconsumeTimes)},
		{"DefaultSuspend", int64(r.DefaultSuspend)}, {"MaxSuspend", int64(r.MaxSuspend)},
		{"ShortPollingWait", int64(r.ShortPollingWait)}, {"HoldCheckInterval", int64(r.HoldCheckInterval)},
		{"OffsetPersistInterval", int64(r.OffsetPersistInterval)}, {"HeartbeatTimeout", int64(r.HeartbeatTimeout)},
		{"HeartbeatCheckInterval", int64(r.HeartbeatCheckInterval)}, {"LockLifetime", int64(r.LockLifetime)},
		{"TransactionTimeout", int64(r.TransactionTimeout)}, {"TransactionCheckInterval", int64(r.TransactionCheckInterval)},
		{"TransactionCheckMax", int64(r.TransactionCheckMax)},
	} {
		if f.v < 0 {
			return r, fmt.Errorf("%w: negative %s", mq.ErrInvalidArgument, f.name)
		}
	}
	switch {
	case r.DefaultQueues < 0 || r.DefaultQueues > maxQueues:
		return r, fmt.Errorf("%w: DefaultQueues %d not in 1..%d", mq.ErrInvalidArgument, r.DefaultQueues, maxQueues)
	case mq.ValidateProducerGroup(r.BrokerName) != nil:
		return r, fmt.Errorf("%w: BrokerName %q must be 1 to 255 characters of A-Z a-z 0-9 _ - %% |", mq.ErrInvalidArgument, r.BrokerName)
	case len(r.DelayLevels) > 64:
		return r, fmt.Errorf("%w: %d delay levels, at most 64", mq.ErrInvalidArgument, len(r.DelayLevels))
	}
	for i, l := range r.DelayLevels {
		if l <= 0 {
			return r, fmt.Errorf("%w: delay level %d is %v", mq.ErrInvalidArgument, i+1, l)
		}
	}
	for i, h := range r.RetentionHolds {
		if h.Name == "" || h.Match == nil {
			return r, fmt.Errorf("%w: retention hold %d (%q) without a name or a Match", mq.ErrInvalidArgument, i+1, h.Name)
		}
	}
	r.RetentionHolds = slices.Clone(r.RetentionHolds)
	return r, nil
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Options returns the options the broker runs with: those given to Open with the defaults
// filled in (a copy: changing it changes nothing). A nil *Broker has zero Options.
func (b *Broker) Options() Options {
	if b == nil {
		return Options{}
	}
	o := b.opts
	o.DelayLevels = slices.Clone(o.DelayLevels)
	o.RetentionHolds = slices.Clone(o.RetentionHolds)
	if o.Store != nil {
		so := *o.Store
		o.Store = &so
	}
	return o
}
