package consumer

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
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

	offsets offsetStore
	stats   *statsTable
	pool    *workerPool
	// callNs is a moving mean of a concurrent listener call's time, in ns (noteCalls);
	// fastTasks is how many tasks a pull's batches go to while calls are fast (submitChunks).
	callNs    atomic.Int64
	fastTasks int

	qmu    sync.Mutex // guards queues
	queues map[mq.MessageQueue]*queueState
	rbMu   sync.Mutex // serializes rebalances and offset resets

	resetMu sync.Mutex   // guards resets
	resets  []offsetMove // offset resets the broker sent, not yet applied

	paused atomic.Bool

	// consuming is twice the listener calls in flight, plus 1 once the consumer stops,
	// which refuses new ones (beginConsume): one atomic add a call, no lock.
	consuming atomic.Int64

	service pushService   // the service loop, made by Start
	idle    chan struct{} // a token when the calls in flight drop to 0 once stopping; buffered
	ctx     context.Context
	cancel  context.CancelFunc // ends pulls and listener contexts
	done    chan struct{}      // closed when every goroutine must end
	wg      sync.WaitGroup
	started time.Time
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
	pc := &PushConsumer{b: b, opts: o, subs: map[string]string{}, queues: map[mq.MessageQueue]*queueState{},
		done: make(chan struct{}), idle: make(chan struct{}, 1), stats: newStatsTable()}
	pc.ctx, pc.cancel = context.WithCancel(context.Background())
	return pc, nil
}

// Subscribe adds a subscription to topic with a TAG expression ("*", "A || B"; "" means
// "*"), whose messages go to l: a ConcurrentListener or an OrderlyListener. One consumer
// uses one kind for all its subscriptions (ErrMixedListeners otherwise). Call it before
// Start. Errors: ErrStarted, ErrShutdown; ErrInvalidOptions for an empty topic, a nil
// listener, or an expression that does not parse.
func (pc *PushConsumer) Subscribe(topic, expression string, l Listener) error {
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
	if _, err := mq.ParseTagFilter(expression); err != nil {
		return fmt.Errorf("%w: expression %q: %v", ErrInvalidOptions, expression, err)
	}
	switch l := l.(type) {
	case ConcurrentListener:
		if l == nil {
			return fmt.Errorf("%w: nil listener", ErrInvalidOptions)
		}
		if pc.orderly != nil {
			return ErrMixedListeners
		}
		pc.concurrent = l
	case OrderlyListener:
		if l == nil {
			return fmt.Errorf("%w: nil listener", ErrInvalidOptions)
		}
		if pc.concurrent != nil {
			return ErrMixedListeners
		}
		pc.orderly = l
	default: // nil
		return fmt.Errorf("%w: nil listener", ErrInvalidOptions)
	}
	pc.subs[topic] = expression
	return nil
}

// Start loads offsets, registers with the broker (a call bounded by Options.CallTimeout)
// and starts consuming.
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
	if pc.opts.Model == mq.Clustering {
		pc.subs[mq.RetryTopic(pc.opts.Group)] = "*"
		pc.offsets = newRemoteOffsetStore(pc.b, pc.opts.Group)
	} else {
		s, err := newLocalOffsetStore(pc.opts.OffsetDir, pc.opts.Group, pc.opts.ClientID)
		if err != nil {
			return err
		}
		s.lg = pc.opts.Logger
		pc.offsets = s
	}
	if err := pc.offsets.Load(); err != nil {
		return err
	}
	pc.service = pc.newService() // before the heartbeat, whose OnChange triggers its rebalance
	if err := pc.heartbeat(pc.ctx); err != nil {
		return err
	}
	pc.started = time.Now()
	pc.pool = newWorkerPool(pc.opts.ConsumeGoroutinesMin, pc.opts.ConsumeGoroutinesMax, &pc.wg, pc.done)
	pc.callNs.Store(int64(2 * slowCall)) // slow until calls are measured
	pc.fastTasks = max(2, runtime.GOMAXPROCS(0))
	pc.state = stateStarted
	pc.wg.Add(1)
	go func() {
		defer pc.wg.Done()
		pc.service.run(pc.done)
	}()
	return nil
}

func (pc *PushConsumer) isOrderly() bool { return pc.orderly != nil }

// lockQueues reports whether the consumer locks its queues at the broker: orderly in
// clustering.
func (pc *PushConsumer) lockQueues() bool { return pc.isOrderly() && pc.opts.Model == mq.Clustering }

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
// every goroutine. It returns ctx.Err() if ctx ended before the listeners returned; the
// broker calls it makes after that are bounded by Options.CallTimeout each.
func (pc *PushConsumer) Shutdown(ctx context.Context) error {
	if ctx == nil { // no deadline of the caller's: wait for listeners as long as they take
		ctx = context.Background()
	}
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

	pc.stopConsumes()
	// Stop pulls first so nothing new arrives, then wait for listeners in flight.
	for _, qs := range pc.snapshot() {
		qs.cancel()
	}
	waitErr := pc.waitConsumes(ctx)
	pc.cancel()
	close(pc.done)
	pc.wg.Wait()

	queues := pc.assigned()
	cctx, cancel := pc.opts.callCtx(context.Background())
	defer cancel()
	err := pc.offsets.Persist(cctx, queues)
	if pc.lockQueues() && len(queues) > 0 {
		if uerr := pc.b.UnlockQueues(cctx, pc.opts.Group, pc.opts.ClientID, queues); uerr != nil && err == nil {
			err = uerr
		}
	}
	if uerr := pc.b.Unregister(cctx, pc.opts.ClientID, pc.opts.Group); uerr != nil && err == nil {
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
	pc.stopConsumes()
	pc.cancel()
	close(pc.done)
	pc.wg.Wait()
}

// stopConsumes makes beginConsume refuse every later listener call.
func (pc *PushConsumer) stopConsumes() { pc.consuming.Or(1) }

// waitConsumes waits until no listener call is in flight, or ctx ends; after stopConsumes.
func (pc *PushConsumer) waitConsumes(ctx context.Context) error {
	if pc.consuming.Load() == 1 {
		return nil
	}
	select {
	case <-pc.idle: // the last call in flight ended (endConsume)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginConsume reserves a listener call; false once stopping.
func (pc *PushConsumer) beginConsume() bool {
	if pc.consuming.Add(2)&1 != 0 {
		pc.endConsume()
		return false
	}
	return true
}

// endConsume ends a listener call that beginConsume reserved. The call that leaves none in
// flight once stopping wakes waitConsumes (a call refused meanwhile may too, harmlessly: it
// also leaves none).
func (pc *PushConsumer) endConsume() {
	if pc.consuming.Add(-2) == 1 {
		select {
		case pc.idle <- struct{}{}:
		default:
		}
	}
}

// sleep waits d; false if stop (or the consumer's end) comes first.
func (pc *PushConsumer) sleep(d time.Duration, stop <-chan struct{}) bool {
	return sleep(d, stop, pc.done)
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
func (pc *PushConsumer) heartbeat(ctx context.Context) error {
	ctx, cancel := pc.opts.callCtx(ctx)
	defer cancel()
	hb := heartbeatOf(&pc.opts, pc.subs, mq.ConsumePassively, func(string) { pc.rebalanceNow() })
	hb.OnReset = pc.onReset
	return pc.b.Heartbeat(ctx, hb)
}

// rebalanceNow makes the service loop rebalance at once: the broker said the group's
// members changed.
func (pc *PushConsumer) rebalanceNow() { pc.service.rebalance.trigger() }

// pushService is the PushConsumer's service loop, its rebalance task and its task that
// applies offset resets.
type pushService struct {
	*serviceLoop
	rebalance *task
	reset     *task
}

// newService builds the service loop: heartbeat every HeartbeatInterval, rebalance at once,
// then every RebalanceInterval and when the broker reports a membership change; persist
// offsets every PersistInterval; lock orderly queues every LockInterval; check consume
// timeouts every ExpiredCheckInterval.
func (pc *PushConsumer) newService() pushService {
	o := &pc.opts
	now := time.Now()
	l := newServiceLoop()
	l.every(now.Add(o.HeartbeatInterval), o.HeartbeatInterval, func() {
		pc.mu.Lock()
		err := pc.heartbeat(pc.ctx)
		pc.mu.Unlock()
		if err != nil && !quiet(pc.ctx, err) {
			o.Logger.Warn("consumer: heartbeat", "group", o.Group, "err", err)
		}
	})
	rb := l.every(now, o.RebalanceInterval, pc.rebalance)
	reset := l.add(time.Time{}, pc.applyResets)
	l.every(now.Add(o.PersistInterval), o.PersistInterval, func() {
		ctx, cancel := o.callCtx(pc.ctx)
		defer cancel()
		if err := pc.offsets.Persist(ctx, pc.assigned()); err != nil && !quiet(pc.ctx, err) {
			o.Logger.Warn("consumer: persist offsets", "group", o.Group, "err", err)
		}
	})
	if pc.lockQueues() {
		l.every(now.Add(o.LockInterval), o.LockInterval, pc.lockAll)
	}
	if !pc.isOrderly() {
		l.every(now.Add(o.ExpiredCheckInterval), o.ExpiredCheckInterval, pc.cleanExpired)
	}
	return pushService{serviceLoop: l, rebalance: rb, reset: reset}
}
