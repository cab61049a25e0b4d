package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store"
)

// Errors of the PullConsumer. (They sit here rather than in types.go because this file owns
// the PullConsumer.)
var (
	// ErrSubscribeAndAssign is returned by Subscribe on a consumer given queues by Assign, and
	// by Assign on a subscribed consumer: one PullConsumer does one or the other.
	ErrSubscribeAndAssign = errors.New("consumer: Subscribe and Assign are mutually exclusive")
	// ErrNotAssigned is returned by Seek, SeekToBegin and SeekToEnd for a queue not assigned
	// to the consumer now (with Subscribe, a rebalance may have moved it to another member).
	ErrNotAssigned = errors.New("consumer: queue not assigned")
	// ErrSeekOffset is returned by Seek for an offset outside the queue's [min, max] offsets.
	ErrSeekOffset = errors.New("consumer: seek offset out of range")
)

// PullOptions holds what only a PullConsumer has; Options holds the rest. A zero field takes
// its default; nil means DefaultPullOptions.
type PullOptions struct {
	// ManualCommit turns auto-commit off: offsets move only with CommitSync, and Shutdown
	// does not commit what was polled since. Default false: the positions of polled messages
	// are committed every Options.PersistInterval, when a rebalance moves a queue away, and at
	// Shutdown (RocketMQ's autoCommit, default true; the field is inverted so that its zero
	// value is the default).
	ManualCommit bool
	// PullThresholdForAll pauses the pulls of every queue while more messages than this wait
	// in the buffer for Poll. Default 1000 (RocketMQ's lite consumer: 10000; an edge gateway
	// has less memory).
	PullThresholdForAll int
}

// DefaultPullOptions holds the defaults zero PullOptions fields take.
var DefaultPullOptions = PullOptions{PullThresholdForAll: 1000}

// PullConsumer is RocketMQ's DefaultLitePullConsumer: the application asks for messages with
// Poll instead of receiving them in a listener. It either subscribes to topics, whose queues
// are then shared among the group's members by rebalancing as for a PushConsumer, or is
// assigned fixed queues, with no rebalance and no group membership (Assign); not both.
//
//	lc, err := consumer.NewPullConsumer(b, &consumer.Options{Group: "billing"}, nil)
//	err = lc.Subscribe("Orders", "new || paid")
//	err = lc.Start()
//	defer lc.Shutdown(ctx)
//	for {
//		msgs, err := lc.Poll(ctx)
//		...
//	}
//
// Each assigned queue has a pull goroutine that long-polls the broker (Options.BrokerSuspend)
// and appends what it finds, a batch of up to Options.PullBatchSize messages, to one buffer
// shared by all queues (RocketMQ's consumeRequestCache); Poll takes the oldest batch. A queue
// stops pulling while the buffer holds more than PullOptions.PullThresholdForAll messages,
// or the queue's own batches more than Options.PullThresholdForQueue messages or
// Options.PullThresholdSizeForQueue body bytes, and resumes as soon as Poll takes a batch:
// nothing polls on a timer while the buffer is full or the broker has nothing.
//
// Offsets: the position of a queue is the offset after the last message Poll returned from
// it (after messages the filter skipped, too). CommitSync commits the positions of every
// assigned queue; auto-commit (PullOptions.ManualCommit off) does so every PersistInterval,
// when a rebalance takes a queue away and at Shutdown. Offsets live at the broker in
// clustering and in a local file in broadcasting, as for a PushConsumer. Messages polled but
// not committed when a member stops or loses a queue are polled again by the next owner (at
// least once).
//
// There is no send-back: a PullConsumer does not subscribe to the group's retry topic
// (neither does RocketMQ's lite consumer). Subscribe or Assign edge.RetryTopic(group) to
// read what a PushConsumer of the group sent back; such messages come with their original
// topic restored.
//
// Of Options, the consume worker, send-back, consume timeout, orderly, hook and PullExpiry
// fields do not apply.
//
// Goroutines, started by Start, rebalances and Seek, and stopped by Shutdown, which waits
// for them:
//   - the service loop: heartbeat every HeartbeatInterval and rebalance every
//     RebalanceInterval and on membership changes (Subscribe only), auto-commit every
//     PersistInterval;
//   - one pull goroutine per assigned queue, ending when the queue is removed by a
//     rebalance or restarted by Seek.
type PullConsumer struct {
	b     Broker
	opts  Options
	popts PullOptions

	// mu guards everything down to spaceWait. Lock order: cmu, then mu, then the offset
	// store's locks. subs, assign and offsets are fixed once Start has run, and read
	// without mu then.
	mu      sync.Mutex
	state   int
	subs    map[string]string // topic -> expression
	assign  []edge.MessageQueue
	offsets OffsetStore
	queues  map[edge.MessageQueue]*liteQueue
	polled  map[edge.MessageQueue]int64 // offset after the last polled message, by queue
	buf     []*liteBatch                // pulled batches waiting for Poll, oldest first
	bufMsgs int                         // messages in buf
	// space is closed (and replaced) when the buffer shrinks while spaceWait: it wakes the
	// pull goroutines waiting for room.
	space     chan struct{}
	spaceWait bool

	cmu sync.Mutex // serializes commits with the removal of queues

	ready  chan struct{} // capacity 1: buf has batches
	kick   chan struct{} // capacity 1: rebalance now
	ctx    context.Context
	cancel context.CancelFunc // ends every pull
	done   chan struct{}      // closed by Shutdown
	wg     sync.WaitGroup
}

// liteQueue is one assigned queue and its pull goroutine. Seek replaces it by a new one.
type liteQueue struct {
	mq     edge.MessageQueue
	expr   string
	ctx    context.Context // ends the pull goroutine; cancelled with PullConsumer.mu held
	cancel context.CancelFunc
	next   int64 // next pull offset; owned by the pull goroutine
	msgs   int   // messages of this queue in the buffer; PullConsumer.mu
	bytes  int64 // their body bytes; PullConsumer.mu
}

// liteBatch is the result of one pull, waiting for Poll.
type liteBatch struct {
	q     *liteQueue
	msgs  []*Message
	bytes int64
	next  int64 // the pull's NextBeginOffset: the queue's position once the batch is polled
}

// NewPullConsumer returns a pull consumer of opts.Group reading from b. popts may be nil.
// Subscribe or Assign, then Start.
func NewPullConsumer(b Broker, opts *Options, popts *PullOptions) (*PullConsumer, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := DefaultPullOptions
	if popts != nil {
		p = *popts
		if p.PullThresholdForAll == 0 {
			p.PullThresholdForAll = DefaultPullOptions.PullThresholdForAll
		}
	}
	if p.PullThresholdForAll < 1 {
		return nil, fmt.Errorf("%w: PullThresholdForAll %d must be positive", ErrInvalidOptions, p.PullThresholdForAll)
	}
	lc := &PullConsumer{b: b, opts: o, popts: p, subs: map[string]string{},
		queues: map[edge.MessageQueue]*liteQueue{}, polled: map[edge.MessageQueue]int64{},
		space: make(chan struct{}), ready: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		done: make(chan struct{})}
	lc.ctx, lc.cancel = context.WithCancel(context.Background())
	return lc, nil
}

// Subscribe adds a subscription to topic with a TAG expression ("*", "A || B"; "" means
// "*"). The topic's queues are shared with the group's other subscribed members. Call it
// before Start. Errors: ErrSubscribeAndAssign after Assign; ErrInvalidOptions for an empty
// topic or an expression that does not parse; edge.ErrTopicNotExist (wrapped) for a topic
// the broker does not have.
func (lc *PullConsumer) Subscribe(topic, expression string) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err := lc.checkCreatedLocked(); err != nil {
		return err
	}
	if lc.assign != nil {
		return ErrSubscribeAndAssign
	}
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalidOptions)
	}
	if expression == "" {
		expression = "*"
	}
	if _, err := store.ParseTagFilter(expression); err != nil {
		return fmt.Errorf("%w: expression %q: %v", ErrInvalidOptions, expression, err)
	}
	if _, ok := lc.b.Topic(topic); !ok {
		return fmt.Errorf("%w: %q", edge.ErrTopicNotExist, topic)
	}
	lc.subs[topic] = expression
	return nil
}

// Assign makes mqs the consumer's queues, replacing an earlier Assign. They are read in
// full (no filter), with no rebalance and no heartbeat: the group only names the offsets.
// Call it before Start. Errors: ErrSubscribeAndAssign after Subscribe; ErrInvalidOptions for
// no queues; edge.ErrTopicNotExist or edge.ErrInvalidQueue (wrapped) for a queue the broker
// does not have.
func (lc *PullConsumer) Assign(mqs []edge.MessageQueue) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err := lc.checkCreatedLocked(); err != nil {
		return err
	}
	if len(lc.subs) > 0 {
		return ErrSubscribeAndAssign
	}
	if len(mqs) == 0 {
		return fmt.Errorf("%w: no queues to assign", ErrInvalidOptions)
	}
	for _, mq := range mqs {
		cfg, ok := lc.b.Topic(mq.Topic)
		if !ok {
			return fmt.Errorf("%w: %q", edge.ErrTopicNotExist, mq.Topic)
		}
		if mq.QueueID < 0 || mq.QueueID >= cfg.ReadQueues {
			return fmt.Errorf("%w: queue %d of topic %q, which has %d read queues", edge.ErrInvalidQueue, mq.QueueID, mq.Topic, cfg.ReadQueues)
		}
	}
	q := slices.Clone(mqs)
	slices.SortFunc(q, compareQueues)
	lc.assign = slices.Compact(q)
	return nil
}

func (lc *PullConsumer) checkCreatedLocked() error {
	switch lc.state {
	case stateStarted:
		return ErrStarted
	case stateShutdown:
		return ErrShutdown
	}
	return nil
}

// Start opens the offset store and starts pulling: at once the assigned queues (whose start
// offsets it reads first, failing if it cannot), or, when subscribed, the queues the first
// rebalance gives this member, right after it registers with the broker (as a
// CONSUME_ACTIVELY member).
func (lc *PullConsumer) Start() error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err := lc.checkCreatedLocked(); err != nil {
		return err
	}
	if len(lc.subs) == 0 && lc.assign == nil {
		return fmt.Errorf("%w: no subscription and no assigned queue", ErrInvalidOptions)
	}
	o := &lc.opts
	if o.Model == edge.Clustering {
		lc.offsets = newRemoteOffsetStore(lc.b, o.Group)
	} else {
		s, err := newLocalOffsetStore(o.OffsetDir, o.Group, o.ClientID)
		if err != nil {
			return err
		}
		s.lg = o.Logger
		lc.offsets = s
	}
	if err := lc.offsets.Load(); err != nil {
		return err
	}
	starts := make([]int64, len(lc.assign))
	for i, mq := range lc.assign {
		off, err := startOffset(lc.b, lc.offsets, o, mq)
		if err != nil {
			return fmt.Errorf("consumer: start offset of %s queue %d: %w", mq.Topic, mq.QueueID, err)
		}
		starts[i] = off
	}
	if len(lc.subs) > 0 {
		if err := lc.heartbeat(); err != nil {
			return err
		}
	}
	lc.state = stateStarted
	for i, mq := range lc.assign {
		lc.startQueueLocked(mq, "*", starts[i])
	}
	lc.wg.Add(1)
	go lc.serviceLoop()
	return nil
}

// Poll returns the oldest pulled batch, up to Options.PullBatchSize messages of one queue in
// queue order, waiting until there is one or ctx ends (then nil, ctx.Err()). It may be
// called from several goroutines, each getting other batches. Errors: ErrNotStarted,
// ErrShutdown (also when Shutdown ends the wait).
func (lc *PullConsumer) Poll(ctx context.Context) ([]*Message, error) {
	for {
		lc.mu.Lock()
		switch lc.state {
		case stateCreated:
			lc.mu.Unlock()
			return nil, ErrNotStarted
		case stateShutdown:
			lc.mu.Unlock()
			return nil, ErrShutdown
		}
		for len(lc.buf) > 0 {
			bt := lc.buf[0]
			lc.buf[0] = nil
			lc.buf = lc.buf[1:]
			lc.unbufferLocked(bt)
			if lc.queues[bt.q.mq] != bt.q { // removed or sought meanwhile (never kept in buf)
				continue
			}
			lc.polled[bt.q.mq] = bt.next
			if len(lc.buf) > 0 {
				wake(lc.ready) // for another Poll: each wakes the next
			}
			lc.mu.Unlock()
			return bt.msgs, nil
		}
		lc.mu.Unlock()
		select {
		case <-lc.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-lc.done:
			return nil, ErrShutdown
		}
	}
}

// unbufferLocked accounts for bt leaving the buffer and wakes pulls waiting for room.
func (lc *PullConsumer) unbufferLocked(bt *liteBatch) {
	n := len(bt.msgs)
	bt.q.msgs -= n
	bt.q.bytes -= bt.bytes
	lc.bufMsgs -= n
	if lc.spaceWait {
		close(lc.space)
		lc.space = make(chan struct{})
		lc.spaceWait = false
	}
}

// wake sends on a capacity-1 signal channel without blocking.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Seek makes mq's next polled message the one at offset, which must lie in the queue's
// [min, max] offsets (max: the next message to arrive). Batches of mq already pulled are
// dropped, and mq's position becomes offset, to be committed by the next commit. Errors:
// ErrNotStarted, ErrShutdown, ErrNotAssigned, ErrSeekOffset, and the broker's.
func (lc *PullConsumer) Seek(mq edge.MessageQueue, offset int64) error {
	if err := lc.checkAssigned(mq); err != nil {
		return err
	}
	lo, err := lc.b.MinOffset(mq.Topic, mq.QueueID)
	if err != nil {
		return err
	}
	hi, err := lc.b.MaxOffset(mq.Topic, mq.QueueID)
	if err != nil {
		return err
	}
	if offset < lo || offset > hi {
		return fmt.Errorf("%w: offset %d of %s queue %d not in [%d, %d]", ErrSeekOffset, offset, mq.Topic, mq.QueueID, lo, hi)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.state != stateStarted {
		return ErrShutdown
	}
	q, ok := lc.queues[mq]
	if !ok {
		return fmt.Errorf("%w: %s queue %d", ErrNotAssigned, mq.Topic, mq.QueueID)
	}
	lc.dropLocked(q)
	lc.polled[mq] = offset
	lc.startQueueLocked(mq, q.expr, offset)
	return nil
}

// SeekToBegin seeks mq to its first stored message.
func (lc *PullConsumer) SeekToBegin(mq edge.MessageQueue) error {
	if err := lc.checkAssigned(mq); err != nil {
		return err
	}
	off, err := lc.b.MinOffset(mq.Topic, mq.QueueID)
	if err != nil {
		return err
	}
	return lc.Seek(mq, off)
}

// SeekToEnd seeks mq past its last message: only messages sent from now on are polled.
func (lc *PullConsumer) SeekToEnd(mq edge.MessageQueue) error {
	if err := lc.checkAssigned(mq); err != nil {
		return err
	}
	off, err := lc.b.MaxOffset(mq.Topic, mq.QueueID)
	if err != nil {
		return err
	}
	return lc.Seek(mq, off)
}

func (lc *PullConsumer) checkAssigned(mq edge.MessageQueue) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	switch lc.state {
	case stateCreated:
		return ErrNotStarted
	case stateShutdown:
		return ErrShutdown
	}
	if _, ok := lc.queues[mq]; !ok {
		return fmt.Errorf("%w: %s queue %d", ErrNotAssigned, mq.Topic, mq.QueueID)
	}
	return nil
}

// Assignment returns the queues assigned now, sorted.
func (lc *PullConsumer) Assignment() []edge.MessageQueue {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.state == stateShutdown {
		return nil
	}
	return slices.SortedFunc(maps.Keys(lc.queues), compareQueues)
}

// CommitSync commits, for every assigned queue, the offset after the last message Poll
// returned from it (or the position Seek set), and returns when the offset store has them:
// the broker in clustering, the local file in broadcasting. ctx is checked before the
// commits (Broker.CommitOffset takes none). Errors: ErrNotStarted, ErrShutdown, ctx.Err(),
// the offset store's.
func (lc *PullConsumer) CommitSync(ctx context.Context) error {
	lc.mu.Lock()
	st := lc.state
	lc.mu.Unlock()
	switch st {
	case stateCreated:
		return ErrNotStarted
	case stateShutdown:
		return ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return lc.commit()
}

// commit copies the polled positions into the offset store and persists them.
func (lc *PullConsumer) commit() error {
	lc.cmu.Lock()
	defer lc.cmu.Unlock()
	lc.mu.Lock()
	mqs := make([]edge.MessageQueue, 0, len(lc.polled))
	for mq, off := range lc.polled {
		lc.offsets.Update(mq, off, false) // Seek may move a position back
		mqs = append(mqs, mq)
	}
	lc.mu.Unlock()
	slices.SortFunc(mqs, compareQueues)
	return lc.offsets.Persist(mqs)
}

// Shutdown stops every pull and waits for every goroutine, commits the polled positions
// (with auto-commit; with ManualCommit it only retries commits that failed) and leaves the
// group (when subscribed). Batches pulled but not polled are dropped. Polls waiting return
// ErrShutdown. A consumer never started just becomes shut down; a second Shutdown returns
// ErrShutdown. ctx is not used: nothing Shutdown waits for can hang, since a pull ends when
// its context is cancelled (a Broker must honour it); it keeps the PushConsumer's signature.
func (lc *PullConsumer) Shutdown(_ context.Context) error {
	lc.mu.Lock()
	st := lc.state
	lc.state = stateShutdown
	lc.mu.Unlock()
	switch st {
	case stateShutdown:
		return ErrShutdown
	case stateCreated:
		return nil
	}
	lc.cancel()
	close(lc.done)
	lc.wg.Wait()

	var errs []error
	if !lc.popts.ManualCommit {
		errs = append(errs, lc.commit())
	} else {
		lc.mu.Lock()
		mqs := slices.SortedFunc(maps.Keys(lc.queues), compareQueues)
		lc.mu.Unlock()
		errs = append(errs, lc.offsets.Persist(mqs))
	}
	if len(lc.subs) > 0 {
		errs = append(errs, lc.b.Unregister(lc.opts.ClientID, lc.opts.Group))
	}
	return errors.Join(errs...)
}

// startQueueLocked adds mq, to be pulled from offset, and starts its pull goroutine. The
// caller holds mu and has checked that the consumer is started.
func (lc *PullConsumer) startQueueLocked(mq edge.MessageQueue, expr string, offset int64) {
	ctx, cancel := context.WithCancel(lc.ctx)
	q := &liteQueue{mq: mq, expr: expr, ctx: ctx, cancel: cancel, next: offset}
	lc.queues[mq] = q
	lc.wg.Add(1)
	go lc.pullLoop(q)
}

// dropLocked stops q's pull goroutine and drops its batches; the caller holds mu.
func (lc *PullConsumer) dropLocked(q *liteQueue) {
	q.cancel()
	if lc.queues[q.mq] == q {
		delete(lc.queues, q.mq)
	}
	kept := lc.buf[:0]
	for _, bt := range lc.buf {
		if bt.q == q {
			lc.unbufferLocked(bt)
			continue
		}
		kept = append(kept, bt)
	}
	clear(lc.buf[len(kept):])
	lc.buf = kept
}

// pullLoop pulls q until it is removed, sought or the consumer stops (RocketMQ's
// PullTaskImpl).
func (lc *PullConsumer) pullLoop(q *liteQueue) {
	defer lc.wg.Done()
	var delay time.Duration
	for lc.sleep(delay, q.ctx.Done()) && lc.waitSpace(q) {
		delay = lc.pullOnce(q)
	}
}

// sleep waits d on the consumer's clock; false if stop comes first.
func (lc *PullConsumer) sleep(d time.Duration, stop <-chan struct{}) bool {
	return clockSleep(lc.opts.Clock, d, stop, nil)
}

// waitSpace waits until the buffer has room for q's next batch (flow control); false if q
// ends first.
func (lc *PullConsumer) waitSpace(q *liteQueue) bool {
	o := &lc.opts
	for {
		lc.mu.Lock()
		if lc.bufMsgs <= lc.popts.PullThresholdForAll && q.msgs <= o.PullThresholdForQueue && q.bytes <= o.PullThresholdSizeForQueue {
			lc.mu.Unlock()
			return true
		}
		space := lc.space
		lc.spaceWait = true
		lc.mu.Unlock()
		select {
		case <-space:
		case <-q.ctx.Done():
			return false
		}
	}
}

// pullOnce pulls q once, long polling, and returns the delay before the next pull.
func (lc *PullConsumer) pullOnce(q *liteQueue) time.Duration {
	o := &lc.opts
	res, err := lc.b.Pull(q.ctx, edge.PullRequest{
		Group: o.Group, Topic: q.mq.Topic, QueueID: q.mq.QueueID, Offset: q.next,
		MaxMsgs: o.PullBatchSize, Filter: q.expr, Suspend: true, MaxWait: o.BrokerSuspend,
	})
	if err != nil {
		if q.ctx.Err() == nil {
			o.Logger.Warn("consumer: pull", "queue", q.mq, "offset", q.next, "err", err)
		}
		return o.PullErrorDelay
	}
	if res.Status == edge.PullFound && len(res.Messages) > 0 {
		bt := &liteBatch{q: q, msgs: make([]*Message, len(res.Messages)), next: res.NextBeginOffset}
		retry := edge.RetryTopic(o.Group)
		for i := range res.Messages {
			m := &res.Messages[i]
			if m.Topic == retry {
				if t := m.Properties[edge.PropertyRetryTopic]; t != "" {
					m.Topic = t // as the PushConsumer does (RocketMQ's resetRetryAndNamespace)
				}
			}
			bt.msgs[i] = m
			bt.bytes += bodySize(m)
		}
		lc.mu.Lock()
		if q.ctx.Err() == nil { // not removed or sought while pulling
			lc.buf = append(lc.buf, bt)
			q.msgs += len(bt.msgs)
			q.bytes += bt.bytes
			lc.bufMsgs += len(bt.msgs)
			wake(lc.ready)
		}
		lc.mu.Unlock()
		q.next = res.NextBeginOffset
		return o.PullInterval
	}
	if res.Status == edge.PullOffsetIllegal {
		o.Logger.Warn("consumer: offset illegal", "queue", q.mq, "offset", q.next, "next", res.NextBeginOffset)
	}
	// Nothing new, nothing matching, or an illegal offset: go on from NextBeginOffset. With
	// nothing of q waiting for Poll, that is also its position, so that a filter that skips
	// everything, or a queue whose messages were deleted, does not hold its offset back
	// (RocketMQ's correctTagsOffset).
	q.next = res.NextBeginOffset
	lc.mu.Lock()
	if q.ctx.Err() == nil && q.msgs == 0 {
		lc.polled[q.mq] = q.next
	}
	lc.mu.Unlock()
	return 0
}

// heartbeat registers the consumer and its subscriptions with the broker. subs is fixed
// once Start has begun.
func (lc *PullConsumer) heartbeat() error {
	return lc.b.Heartbeat(heartbeatOf(&lc.opts, lc.subs, edge.ConsumeActively, func(string) { wake(lc.kick) }))
}

// serviceLoop runs the periodic tasks.
func (lc *PullConsumer) serviceLoop() {
	defer lc.wg.Done()
	o := &lc.opts
	subscribed := len(lc.subs) > 0
	auto := !lc.popts.ManualCommit
	now := o.Clock.Now()
	nextHB, nextRB, nextCommit := now.Add(o.HeartbeatInterval), now, now.Add(o.PersistInterval)
	for {
		now = o.Clock.Now()
		var next []time.Time
		if subscribed {
			if !now.Before(nextHB) {
				if err := lc.heartbeat(); err != nil {
					o.Logger.Warn("consumer: heartbeat", "group", o.Group, "err", err)
				}
				nextHB = now.Add(o.HeartbeatInterval)
			}
			if !now.Before(nextRB) {
				lc.rebalance()
				nextRB = now.Add(o.RebalanceInterval)
			}
			next = append(next, nextHB, nextRB)
		}
		if auto {
			if !now.Before(nextCommit) {
				if err := lc.commit(); err != nil {
					o.Logger.Warn("consumer: commit offsets", "group", o.Group, "err", err)
				}
				nextCommit = now.Add(o.PersistInterval)
			}
			next = append(next, nextCommit)
		}
		var t edge.Timer
		var tc <-chan time.Time // nil, never ready, when there is nothing to time
		if len(next) > 0 {
			t = o.Clock.NewTimer(slices.MinFunc(next, time.Time.Compare).Sub(now))
			tc = t.C()
		}
		select {
		case <-tc:
		case <-lc.kick:
			nextRB = o.Clock.Now()
		case <-lc.done:
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-lc.done:
			return
		default:
		}
	}
}

// rebalance reassigns the queues of every subscribed topic, as the PushConsumer does.
func (lc *PullConsumer) rebalance() {
	o := &lc.opts
	for _, topic := range slices.Sorted(maps.Keys(lc.subs)) {
		cfg, ok := lc.b.Topic(topic)
		if !ok {
			continue
		}
		mine := make([]edge.MessageQueue, 0, cfg.ReadQueues)
		for q := int32(0); q < cfg.ReadQueues; q++ {
			mine = append(mine, edge.MessageQueue{Topic: topic, QueueID: q})
		}
		if o.Model == edge.Clustering {
			cids, err := lc.b.ConsumerIDs(o.Group)
			if err != nil || len(cids) == 0 || len(mine) == 0 {
				if err != nil {
					o.Logger.Warn("consumer: rebalance: consumer ids", "group", o.Group, "err", err)
				}
				continue
			}
			if mine, err = o.Strategy.Allocate(o.Group, o.ClientID, mine, cids); err != nil {
				o.Logger.Warn("consumer: rebalance: allocate", "group", o.Group, "topic", topic, "err", err)
				continue
			}
		}
		lc.updateQueues(topic, lc.subs[topic], mine)
	}
}

// updateQueues makes mine the assigned queues of topic. A removed queue has its position
// committed (with auto-commit) and its batches dropped; a new one starts from its committed
// offset, else from Options.FromWhere.
func (lc *PullConsumer) updateQueues(topic, expr string, mine []edge.MessageQueue) {
	want := map[edge.MessageQueue]bool{}
	for _, mq := range mine {
		want[mq] = true
	}
	lc.mu.Lock()
	var gone []*liteQueue
	for mq, q := range lc.queues {
		if mq.Topic == topic && !want[mq] {
			gone = append(gone, q)
		}
	}
	lc.mu.Unlock()
	for _, q := range gone {
		lc.removeQueue(q)
	}
	for _, mq := range mine {
		lc.mu.Lock()
		_, ok := lc.queues[mq]
		lc.mu.Unlock()
		if ok {
			continue
		}
		if lc.opts.Model == edge.Clustering {
			lc.offsets.Remove(mq) // a stale memory offset of an earlier assignment
		}
		off, err := startOffset(lc.b, lc.offsets, &lc.opts, mq)
		if err != nil {
			lc.opts.Logger.Warn("consumer: rebalance: start offset", "queue", mq, "err", err)
			continue
		}
		lc.mu.Lock()
		if lc.state == stateStarted && lc.queues[mq] == nil {
			lc.startQueueLocked(mq, expr, off)
		}
		lc.mu.Unlock()
	}
}

// removeQueue takes q's queue away (whichever liteQueue Seek has made of it since): its
// pull stops, its batches are dropped, and its position is committed with auto-commit.
// Then the offset store forgets it (clustering), so that no later commit of this member
// overwrites the next owner's.
func (lc *PullConsumer) removeQueue(q *liteQueue) {
	lc.cmu.Lock()
	defer lc.cmu.Unlock()
	lc.mu.Lock()
	cur := lc.queues[q.mq]
	if cur == nil {
		lc.mu.Unlock()
		return
	}
	lc.dropLocked(cur)
	pos, ok := lc.polled[q.mq]
	delete(lc.polled, q.mq)
	lc.mu.Unlock()
	if ok && !lc.popts.ManualCommit {
		lc.offsets.Update(q.mq, pos, false)
	}
	if err := lc.offsets.Persist([]edge.MessageQueue{q.mq}); err != nil {
		lc.opts.Logger.Warn("consumer: persist offset", "queue", q.mq, "err", err)
	}
	if lc.opts.Model == edge.Clustering {
		lc.offsets.Remove(q.mq)
	}
}
