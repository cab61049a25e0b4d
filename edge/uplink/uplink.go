package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
)

// Uplink forwards a broker's topics upstream by its rules. Its methods are safe for
// concurrent use.
//
// Goroutines, all stopped and waited for by Close: the scanner, which matches topics to the
// rules at Start and every Options.ScanInterval and starts forwarders; one forwarder per
// (up rule, local queue); per down rule, one that dials, joins the group and rebalances its
// queues every ScanInterval and when the group's members change, and one mirror per
// upstream queue it holds (ending when a rebalance takes the queue away); and the remoting
// clients' own.
type Uplink struct {
	b       *edge.Broker
	now     func() time.Time // the broker's clock (edge.Options.Now)
	opts    Options
	lg      *slog.Logger
	rules   []*rule
	downs   []*down
	gate    *gate
	bucket  *bucket      // Options.RateLimit, shared by every rule; nil: none
	scanPos atomic.Int64 // the broker's write position when the last scan began
	release func()       // ends the retention hold

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// rule is an up rule at work.
type rule struct {
	u      *Uplink
	cfg    UpRule
	group  string  // the group name its local reads carry
	bucket *bucket // UpRule.RateLimit; nil: none
	pace   *pacer  // its upstream's, shared with the other rules there; nil: none
	capped bool    // pace caps its batches
	c      counters
	noZstd atomic.Bool // the upstream answered SEND_BATCH_ZSTD not supported: plain batches

	dmu    sync.Mutex // one dial at a time; taken before mu
	mu     sync.Mutex // guards client, prod, queues, cursor and lastEr; a leaf
	client *remoting.Client
	prod   *producer.Producer
	queues map[mq.MessageQueue]*queueFwd
	cursor map[mq.MessageQueue]int64 // stored cursors of queues with no forwarder yet
	lastEr string
	lastAt time.Time
}

// counters are a rule's totals.
type counters struct {
	forwarded, forwardedBytes, batches, failures, resent, lost, rejected atomic.Int64
}

// Start checks opts and starts forwarding b's topics by its rules. A rule that cannot work
// is an error wrapping ErrInvalidRule; an upstream that cannot be reached is not (the
// rule backs off and retries). Close the Uplink before b.
func Start(b *edge.Broker, opts *Options) (*Uplink, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", mq.ErrInvalidArgument)
	}
	o, err := opts.withDefaults(b.Options().BrokerName)
	if err != nil {
		return nil, err
	}
	u := &Uplink{b: b, now: b.Options().Now, opts: o, lg: o.Logger.With("component", "uplink"), gate: newGate(), bucket: newBucket(o.RateLimit)}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.scanPos.Store(0) // hold everything until the first scan
	paces, capped := pacersFor(o.Up, o.PaceDelay)
	for i, cfg := range o.Up {
		r := &rule{u: u, cfg: cfg, group: "UPLINK_" + cfg.Name, bucket: newBucket(cfg.RateLimit),
			pace: paces[i], capped: capped[i],
			queues: map[mq.MessageQueue]*queueFwd{}, cursor: map[mq.MessageQueue]int64{}}
		cs, err := b.ForwardCursors(cfg.Name)
		if err != nil {
			u.cancel()
			return nil, fmt.Errorf("uplink: rule %s: cursors: %w", cfg.Name, err)
		}
		for _, c := range cs {
			r.cursor[mq.MessageQueue{Topic: c.Topic, QueueID: c.QueueID}] = c.Offset
		}
		u.rules = append(u.rules, r)
	}
	if u.release, err = b.HoldRetention(u.floor); err != nil {
		u.cancel()
		return nil, err
	}
	for _, cfg := range o.Up { // the broker held them from its open (Options.RetentionHolds)
		b.ReleaseRetentionHold(cfg.Name)
	}
	u.wg.Add(1)
	go u.scanLoop()
	for _, cfg := range o.Down {
		d := &down{u: u, cfg: cfg, clientID: downClientID(o.Gateway, cfg.Name), kick: make(chan struct{}, 1),
			queues: map[mq.MessageQueue]*downQueue{}}
		u.downs = append(u.downs, d)
		u.wg.Add(1)
		go d.run()
	}
	return u, nil
}

// Close stops forwarding: it stops the forwarders (a batch in flight is abandoned; its
// cursor has not moved, so it is sent again next time), closes the upstream connections and
// lets retention go. It returns ErrClosed after the first call.
func (u *Uplink) Close() error {
	if u == nil {
		return ErrClosed
	}
	if !u.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	u.cancel()
	u.wg.Wait()
	var errs []error
	for _, r := range u.rules {
		r.mu.Lock()
		if r.prod != nil {
			errs = append(errs, r.prod.Close())
		}
		if r.client != nil {
			if err := r.client.Close(); err != nil && !errors.Is(err, remoting.ErrClientClosed) {
				errs = append(errs, err)
			}
		}
		r.mu.Unlock()
	}
	for _, d := range u.downs {
		d.mu.Lock()
		if d.client != nil {
			if err := d.client.Close(); err != nil && !errors.Is(err, remoting.ErrClientClosed) {
				errs = append(errs, err)
			}
		}
		d.mu.Unlock()
	}
	u.release()
	return errors.Join(errs...)
}

// scanLoop matches topics to rules now and every ScanInterval.
func (u *Uplink) scanLoop() {
	defer u.wg.Done()
	t := time.NewTicker(u.opts.ScanInterval)
	defer t.Stop()
	for {
		u.scan()
		select {
		case <-u.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scan starts a forwarder for every queue of every topic a rule matches that has none.
func (u *Uplink) scan() {
	pos := u.b.WritePos()
	topics := u.b.Topics()
	for _, r := range u.rules {
		for _, tc := range topics {
			if mq.IsSystemTopic(tc.Name) || !r.cfg.matches(tc.Name) {
				continue
			}
			up := r.cfg.upstreamTopic(u.opts.Gateway, tc.Name)
			if err := mq.ValidateTopic(up); err != nil {
				r.fail(fmt.Errorf("local topic %s: upstream topic: %w", tc.Name, err))
				continue
			}
			for q := range tc.ReadQueues {
				r.start(tc.Name, up, q)
			}
		}
	}
	// Messages of topics and queues created from here on are at or past pos.
	u.scanPos.Store(pos)
}

// start starts the forwarder of one local queue, unless it runs.
func (r *rule) start(topic, up string, q int32) {
	key := mq.MessageQueue{Topic: topic, QueueID: q}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queues[key] != nil || r.u.ctx.Err() != nil {
		return
	}
	f := &queueFwd{r: r, queue: mq.MessageQueue{Topic: topic, BrokerName: r.u.b.Options().BrokerName, QueueID: q}, up: up,
		bo: backoff{min: r.u.opts.BackoffMin, max: r.u.opts.BackoffMax}}
	if c, ok := r.cursor[key]; ok {
		f.cursor.Store(c)
		f.stored = true
	} else if min, err := r.u.b.MinOffset(r.u.ctx, f.queue); err == nil {
		// A new queue, or a queue new to the rule: from its first stored message, a cursor
		// run stores first, so that messages deleted before they are forwarded from here on
		// count as lost (a gateway offline since the rule began loses them too).
		f.cursor.Store(min)
		f.storeFirst = true
	}
	r.queues[key] = f
	r.u.wg.Add(1)
	go f.run()
}

// floor is the retention floor of the RejectNew rules: the lowest position a forwarder has
// not sent on, and the position where the last scan began (topics found later start past
// it).
func (u *Uplink) floor() int64 {
	low := int64(math.MaxInt64)
	for _, r := range u.rules {
		if r.cfg.Overflow != RejectNew {
			continue
		}
		low = min(low, u.scanPos.Load())
		r.mu.Lock()
		for _, f := range r.queues {
			low = min(low, f.floor.Load())
		}
		r.mu.Unlock()
	}
	return low
}

// conn returns the rule's producer, dialing the upstream if it has none.
func (r *rule) conn(ctx context.Context) (*producer.Producer, error) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	r.mu.Lock()
	p := r.prod
	r.mu.Unlock()
	if p != nil {
		return p, nil
	}
	over := -1
	if r.cfg.Compress {
		over = r.cfg.CompressOver
	}
	ctx, cancel := context.WithTimeout(ctx, r.u.opts.SendTimeout)
	defer cancel()
	c, err := remoting.Dial(ctx, r.cfg.Upstream.Addrs, &remoting.Options{CompressOver: over,
		ProducerGroup: "EDGEMQ_UPLINK_" + r.cfg.Name, Logger: r.u.lg, RequestTimeout: r.u.opts.SendTimeout,
		Credentials:    r.cfg.Upstream.credentials(),
		MaxMessageSize: 64 << 20})
	if err != nil {
		return nil, err
	}
	p, err = producer.New(c, &producer.Options{RetryTimes: -1, SendTimeout: r.u.opts.SendTimeout,
		MaxMessageSize: 64 << 20, Logger: r.u.lg})
	if err != nil {
		c.Close()
		return nil, err
	}
	r.mu.Lock()
	r.client, r.prod = c, p
	r.mu.Unlock()
	r.u.lg.Info("uplink connected", "rule", r.cfg.Name, "upstream", r.cfg.Upstream.Addrs)
	return p, nil
}

// fail records err as the rule's last error.
func (r *rule) fail(err error) {
	r.c.failures.Add(1)
	r.mu.Lock()
	r.lastEr, r.lastAt = err.Error(), r.u.now()
	r.mu.Unlock()
}
