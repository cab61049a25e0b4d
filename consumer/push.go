package consumer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// PushConsumer is RocketMQ's DefaultMQPushConsumer: it pulls its assigned queues and pushes
// the messages to a listener, concurrently or in queue order.
//
// Goroutines, all started by Start and stopped by Shutdown (which waits for them):
//   - the service loop: heartbeat every HeartbeatInterval, rebalance every RebalanceInterval
//     and at once when the broker reports a membership change, persist offsets every
//     PersistInterval, lock orderly queues every LockInterval, check consume timeouts;
//   - one pull loop per assigned queue, ending when the queue is removed;
//   - the consume worker pool (ConsumeGoroutinesMin..Max);
//   - short-lived timer goroutines for delayed work (retries of refused submits, local
//     reconsumes, orderly retries, OFFSET_ILLEGAL removal), each ending on its timer or at stop.
type PushConsumer struct {
	b    Broker
	opts Options

	mu         sync.Mutex // guards state, subs and the listeners until Start
	state      int
	subs       map[string]string // topic -> expression
	concurrent ConcurrentListener
	orderly    OrderlyListener

	offsets OffsetStore
	stats   *statsTable
	pool    *workerPool

	qmu    sync.Mutex // guards queues
	queues map[edge.MessageQueue]*queueState
	rbMu   sync.Mutex // serializes rebalances

	paused atomic.Bool

	// consuming counts listener calls in flight; stopping refuses new ones.
	cmu       sync.Mutex
	consuming int
	stopping  bool

	kick       chan struct{} // capacity 1: rebalance now
	ctx        context.Context
	cancel     context.CancelFunc // ends pulls and listener contexts
	done       chan struct{}      // closed when every goroutine must end
	wg         sync.WaitGroup
	started    time.Time
	unlockOnce sync.Once
}

const (
	stateCreated = iota
	stateStarted
	stateShutdown
)

// NewPushConsumer returns a consumer of opts.Group reading from b. Subscribe, then Start.
func NewPushConsumer(b Broker, opts *Options) (*PushConsumer, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	pc := &PushConsumer{b: b, opts: o, subs: map[string]string{}, queues: map[edge.MessageQueue]*queueState{},
		kick: make(chan struct{}, 1), done: make(chan struct{}), stats: newStatsTable()}
	pc.ctx, pc.cancel = context.WithCancel(context.Background())
	return pc, nil
}

// Subscribe adds a subscription to topic with a TAG expression ("*", "A || B"). listener is
// a ConcurrentListener or an OrderlyListener; one consumer uses one kind for all its
// subscriptions (ErrMixedListeners otherwise). Call it before Start.
func (pc *PushConsumer) Subscribe(topic, expression string, listener any) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch pc.state {
	case stateStarted:
		return ErrStarted
	case stateShutdown:
		return ErrShutdown
	}
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalidOptions)
	}
	if expression == "" {
		expression = "*"
	}
	switch l := listener.(type) {
	case ConcurrentListener:
		if pc.orderly != nil {
			return ErrMixedListeners
		}
		pc.concurrent = l
	case func(context.Context, []*Message, *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error):
		if pc.orderly != nil {
			return ErrMixedListeners
		}
		pc.concurrent = l
	case OrderlyListener:
		if pc.concurrent != nil {
			return ErrMixedListeners
		}
		pc.orderly = l
	case func(context.Context, []*Message, *OrderlyContext) (ConsumeOrderlyStatus, error):
		if pc.concurrent != nil {
			return ErrMixedListeners
		}
		pc.orderly = l
	default:
		return fmt.Errorf("%w: listener %T is neither a ConcurrentListener nor an OrderlyListener", ErrInvalidOptions, listener)
	}
	pc.subs[topic] = expression
	return nil
}

// Start loads offsets, registers with the broker and starts consuming.
func (pc *PushConsumer) Start() error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch pc.state {
	case stateStarted:
		return ErrStarted
	case stateShutdown:
		return ErrShutdown
	}
	if len(pc.subs) == 0 {
		return fmt.Errorf("%w: no subscription", ErrInvalidOptions)
	}
	if pc.opts.Model == edge.Clustering {
		pc.subs[edge.RetryTopic(pc.opts.Group)] = "*"
		pc.offsets = newRemoteOffsetStore(pc.b, pc.opts.Group)
	} else {
		s, err := newLocalOffsetStore(pc.opts.OffsetDir, pc.opts.Group, pc.opts.ClientID)
		if err != nil {
			return err
		}
		pc.offsets = s
	}
	if err := pc.offsets.Load(); err != nil {
		return err
	}
	if err := pc.heartbeat(); err != nil {
		return err
	}
	pc.started = pc.opts.Clock.Now()
	pc.pool = newWorkerPool(pc.opts.ConsumeGoroutinesMin, pc.opts.ConsumeGoroutinesMax, &pc.wg, pc.done)
	pc.state = stateStarted
	pc.wg.Add(1)
	go pc.serviceLoop()
	return nil
}

func (pc *PushConsumer) isOrderly() bool { return pc.orderly != nil }

// subscriptions returns a copy of the subscriptions (fixed after Start).
func (pc *PushConsumer) subscriptions() map[string]string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return maps.Clone(pc.subs)
}

// Suspend pauses pulling (queues are retried every SuspendedDelay) until Resume.
func (pc *PushConsumer) Suspend() { pc.paused.Store(true) }

// Resume ends Suspend.
func (pc *PushConsumer) Resume() { pc.paused.Store(false) }

// Shutdown stops pulling, waits for listener calls in flight until ctx ends (then cancels
// their contexts), persists offsets, unlocks orderly queues, leaves the group and waits for
// every goroutine. It returns ctx.Err() if ctx ended before the listeners returned.
func (pc *PushConsumer) Shutdown(ctx context.Context) error {
	pc.mu.Lock()
	if pc.state != stateStarted {
		st := pc.state
		pc.state = stateShutdown
		pc.mu.Unlock()
		if st == stateShutdown {
			return ErrShutdown
		}
		return nil
	}
	pc.state = stateShutdown
	pc.mu.Unlock()

	pc.cmu.Lock()
	pc.stopping = true
	pc.cmu.Unlock()
	// Stop pulls first so nothing new arrives, then wait for listeners in flight.
	for _, qs := range pc.snapshot() {
		qs.cancel()
	}
	waitErr := pc.waitConsumes(ctx)
	pc.cancel()
	close(pc.done)
	pc.wg.Wait()

	mqs := pc.assigned()
	err := pc.offsets.Persist(mqs)
	if pc.isOrderly() && pc.opts.Model == edge.Clustering && len(mqs) > 0 {
		if uerr := pc.b.UnlockQueues(pc.opts.Group, pc.opts.ClientID, mqs); uerr != nil && err == nil {
			err = uerr
		}
	}
	if uerr := pc.b.Unregister(pc.opts.ClientID, pc.opts.Group); uerr != nil && err == nil {
		err = uerr
	}
	if waitErr != nil {
		return waitErr
	}
	return err
}

// crash stops every goroutine without persisting offsets, unlocking queues or leaving the
// group: what a killed process leaves behind, for tests.
func (pc *PushConsumer) crash() {
	pc.mu.Lock()
	started := pc.state == stateStarted
	pc.state = stateShutdown
	pc.mu.Unlock()
	if !started {
		return
	}
	pc.cmu.Lock()
	pc.stopping = true
	pc.cmu.Unlock()
	pc.cancel()
	close(pc.done)
	pc.wg.Wait()
}

// waitConsumes waits until no listener call is in flight, or ctx ends.
func (pc *PushConsumer) waitConsumes(ctx context.Context) error {
	for {
		pc.cmu.Lock()
		n := pc.consuming
		pc.cmu.Unlock()
		if n == 0 {
			return nil
		}
		t := time.NewTimer(2 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// beginConsume reserves a listener call; false once stopping.
func (pc *PushConsumer) beginConsume() bool {
	pc.cmu.Lock()
	defer pc.cmu.Unlock()
	if pc.stopping {
		return false
	}
	pc.consuming++
	return true
}

func (pc *PushConsumer) endConsume() {
	pc.cmu.Lock()
	pc.consuming--
	pc.cmu.Unlock()
}

// sleep waits d on the consumer's clock; false if stop (or the consumer's end) comes first.
func (pc *PushConsumer) sleep(d time.Duration, stop <-chan struct{}) bool {
	return clockSleep(pc.opts.Clock, d, stop, pc.done)
}

// clockSleep waits d on c; false if stop or done (either may be nil) comes first.
func clockSleep(c edge.Clock, d time.Duration, stop, done <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-done:
			return false
		default:
			return true
		}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-stop:
		return false
	case <-done:
		return false
	}
}

// after runs fn in a new goroutine d from now, unless the consumer stops first.
func (pc *PushConsumer) after(d time.Duration, fn func()) {
	select {
	case <-pc.done:
		return
	default:
	}
	pc.wg.Add(1)
	go func() {
		defer pc.wg.Done()
		if pc.sleep(d, nil) {
			fn()
		}
	}()
}

// heartbeat registers the consumer and its subscriptions with the broker.
func (pc *PushConsumer) heartbeat() error {
	return pc.b.Heartbeat(heartbeatOf(&pc.opts, pc.subs, edge.ConsumePassively, func(string) { pc.kickRebalance() }))
}

// heartbeatOf builds a consumer's heartbeat: its group, model, consume type, where it starts,
// and its subscriptions (topic -> expression) in topic order.
func heartbeatOf(o *Options, subs map[string]string, ct edge.ConsumeType, onChange func(string)) edge.Heartbeat {
	list := make([]edge.Subscription, 0, len(subs))
	for _, t := range slices.Sorted(maps.Keys(subs)) {
		list = append(list, edge.Subscription{Topic: t, Expression: subs[t]})
	}
	from := [...]string{"CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"}[o.FromWhere]
	return edge.Heartbeat{
		ClientID: o.ClientID,
		Consumers: []edge.ConsumerData{{Group: o.Group, Model: o.Model, ConsumeType: ct,
			FromWhere: from, Subscriptions: list}},
		OnChange: onChange,
	}
}

func (pc *PushConsumer) kickRebalance() {
	select {
	case pc.kick <- struct{}{}:
	default:
	}
}

// serviceLoop runs the periodic tasks; it owns no state of its own.
func (pc *PushConsumer) serviceLoop() {
	defer pc.wg.Done()
	o := &pc.opts
	now := o.Clock.Now()
	nextHB := now.Add(o.HeartbeatInterval)
	nextRB := now
	nextPersist := now.Add(o.PersistInterval)
	nextLock := now.Add(o.LockInterval)
	nextExpired := now.Add(o.ExpiredCheckInterval)
	for {
		now = o.Clock.Now()
		if !now.Before(nextHB) {
			pc.mu.Lock()
			err := pc.heartbeat()
			pc.mu.Unlock()
			if err != nil {
				o.Logger.Warn("consumer: heartbeat", "group", o.Group, "err", err)
			}
			nextHB = now.Add(o.HeartbeatInterval)
		}
		if !now.Before(nextRB) {
			pc.rebalance()
			nextRB = now.Add(o.RebalanceInterval)
		}
		if !now.Before(nextPersist) {
			if err := pc.offsets.Persist(pc.assigned()); err != nil {
				o.Logger.Warn("consumer: persist offsets", "group", o.Group, "err", err)
			}
			nextPersist = now.Add(o.PersistInterval)
		}
		if !now.Before(nextLock) {
			if pc.isOrderly() && o.Model == edge.Clustering {
				pc.lockAll()
			}
			nextLock = now.Add(o.LockInterval)
		}
		if !now.Before(nextExpired) {
			if !pc.isOrderly() {
				pc.cleanExpired()
			}
			nextExpired = now.Add(o.ExpiredCheckInterval)
		}
		next := slices.MinFunc([]time.Time{nextHB, nextRB, nextPersist, nextLock, nextExpired}, func(a, b time.Time) int { return a.Compare(b) })
		t := edge.NewTimerAt(o.Clock, next)
		select {
		case <-t.C():
		case <-pc.kick:
			t.Stop()
			nextRB = o.Clock.Now()
		case <-pc.done:
			t.Stop()
			return
		}
	}
}
