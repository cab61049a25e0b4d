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
	// ErrNotAssigned is returned by Seek, SeekToBegin, SeekToEnd, Pause and Resume for a queue
	// not assigned to the consumer now (with Subscribe, a rebalance may have moved it to
	// another member).
	ErrNotAssigned = errors.New("consumer: queue not assigned")
	// ErrSeekOffset is returned by Seek for an offset outside the queue's [min, max] offsets.
	ErrSeekOffset = errors.New("consumer: seek offset out of range")
	// ErrNotSubscribed is returned by Unsubscribe for a topic the consumer does not
	// subscribe to (or no longer does; a consumer given queues by Assign subscribes to none).
	ErrNotSubscribed = errors.New("consumer: topic not subscribed")
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
// nothing polls on a timer while the buffer is full or the broker has nothing. Pause stops a
// queue's pulls, and drops its batches, until Resume.
//
// A pull that has not returned after Options.PullExpiry (one lost on a dead connection) is
// abandoned: the queue starts again from its position, as a PushConsumer restarts a queue
// whose pull loop has not run for that long. Time spent paused or waiting for Poll to make
// room is no pull, and does not count.
//
// Offsets: the position of a queue is the offset after the last message Poll returned from
// it (after messages the filter skipped, too). CommitSync commits the positions of every
// assigned queue; auto-commit (PullOptions.ManualCommit off) does so every PersistInterval,
// when a rebalance or Unsubscribe takes a queue away and at Shutdown. Offsets live at the
// broker in clustering and in a local file in broadcasting, as for a PushConsumer. Messages
// polled but not committed when a member stops or loses a queue are polled again by the next
// owner (at least once).
//
// There is no send-back: a PullConsumer does not subscribe to the group's retry topic
// (neither does RocketMQ's lite consumer). Subscribe or Assign edge.RetryTopic(group) to
// read what a PushConsumer of the group sent back; such messages come with their original
// topic restored.
//
// Of Options, these apply: Group, ClientID, Model, FromWhere, ConsumeTimestamp,
// PullBatchSize, PullInterval, PullThresholdForQueue, PullThresholdSizeForQueue,
// PullErrorDelay, BrokerSuspend, PullExpiry (which must exceed BrokerSuspend),
// RebalanceInterval, Strategy, HeartbeatInterval, PersistInterval, OffsetDir, Clock and
// Logger. The rest do not: ConsumeConcurrentlyMaxSpan, FlowControlDelay (a pull held back
// goes on when Poll makes room), SuspendedDelay (see Pause), OffsetIllegalDelay (an illegal
// offset is logged and the queue goes on from the broker's next offset), and the consume
// worker, send-back, consume timeout, reconsume, orderly and hook fields.
//
// Goroutines, started by Start and by the calls that (re)start a queue, and stopped by
// Shutdown, which waits for them:
//   - the service loop: heartbeat every HeartbeatInterval and at once after Unsubscribe,
//     rebalance every RebalanceInterval and on membership changes (Subscribe only),
//     auto-commit every PersistInterval, and the PullExpiry check when a pull may expire;
//   - one pull goroutine per assigned queue that is not paused, ending when the queue is
//     removed (by a rebalance or Unsubscribe), paused, sought, or restarted after PullExpiry.
type PullConsumer struct {
	b     Broker
	opts  Options
	popts PullOptions

	// mu guards everything down to spaceWait. Lock order: cmu, then mu, then the offset
	// store's locks. assign and offsets are fixed once Start has run, and read without mu
	// then.
	mu      sync.Mutex
	state   int
	subs    map[string]string // topic -> expression; Unsubscribe changes it after Start
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
	resub  chan struct{} // capacity 1: the subscriptions changed: heartbeat now
	ctx    context.Context
	cancel context.CancelFunc // ends every pull
	done   chan struct{}      // closed by Shutdown
	wg     sync.WaitGroup
}

// liteQueue is one assigned queue and, unless paused, its pull goroutine. Seek, Pause,
// Resume and the PullExpiry check replace it by a new one.
type liteQueue struct {
	mq     edge.MessageQueue
	expr   string
	from   int64           // the offset it starts at: its position until something is polled
	paused bool            // no pull goroutine until Resume; fixed
	ctx    context.Context // ends the pull goroutine; cancelled with PullConsumer.mu held
	cancel context.CancelFunc
	exited chan struct{} // closed when the pull goroutine has returned (or at once if paused)
	next   int64         // next pull offset; owned by the pull goroutine
	msgs   int           // messages of this queue in the buffer; PullConsumer.mu
	bytes  int64         // their body bytes; PullConsumer.mu
	// pullStart is when the pull in flight began on the consumer's clock, zero between
	// pulls; PullConsumer.mu.
	pullStart time.Time
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
		resub: make(chan struct{}, 1), done: make(chan struct{})}
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

// Unsubscribe ends the subscription to topic (RocketMQ's unsubscribe). Before Start it only
// forgets it. Once started, the topic's queues are taken away as a rebalance takes a queue
// away (pulls stopped, batches dropped, positions committed with auto-commit), the topic is
// rebalanced no more, and the service loop heartbeats at once with the subscriptions left,
// so that the broker tells the group's other members. Unsubscribing the last topic leaves
// the consumer a member of its group with nothing to poll.
//
// As in RocketMQ, the members of a group should subscribe to the same topics: the other
// members still count this one when they share topic's queues, so the queues that fall to
// it go unread until it leaves the group or they unsubscribe too.
//
// Errors: ErrShutdown; ErrNotSubscribed for a topic not subscribed (or after Assign).
func (lc *PullConsumer) Unsubscribe(topic string) error {
	lc.mu.Lock()
	if lc.state == stateShutdown {
		lc.mu.Unlock()
		return ErrShutdown
	}
	if _, ok := lc.subs[topic]; !ok {
		lc.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotSubscribed, topic)
	}
	delete(lc.subs, topic)
	started := lc.state == stateStarted
	lc.mu.Unlock()
	if started {
		lc.updateQueues(topic, nil)
		wake(lc.resub)
	}
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
		if err := lc.heartbeat(lc.subs); err != nil {
			return err
		}
	}
	lc.state = stateStarted
	for i, mq := range lc.assign {
		lc.startQueueLocked(mq, "*", starts[i], false)
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
		if err := lc.checkStartedLocked(); err != nil {
			lc.mu.Unlock()
			return nil, err
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
// dropped, and mq's position becomes offset, to be committed by the next commit. A paused
// queue stays paused, to start at offset on Resume. Errors: ErrNotStarted, ErrShutdown,
// ErrNotAssigned, ErrSeekOffset, and the broker's.
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
	if err := lc.checkAssignedLocked(mq); err != nil {
		return err
	}
	q := lc.queues[mq]
	lc.polled[mq] = offset
	lc.restartLocked(q, offset, q.paused)
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
	return lc.checkAssignedLocked(mq)
}

// checkAssignedLocked returns ErrNotStarted, ErrShutdown or ErrNotAssigned unless the
// consumer is started and mq assigned to it.
func (lc *PullConsumer) checkAssignedLocked(mq edge.MessageQueue) error {
	if err := lc.checkStartedLocked(); err != nil {
		return err
	}
	if _, ok := lc.queues[mq]; !ok {
		return fmt.Errorf("%w: %s queue %d", ErrNotAssigned, mq.Topic, mq.QueueID)
	}
	return nil
}

// checkStarted returns ErrNotStarted or ErrShutdown unless the consumer is started.
func (lc *PullConsumer) checkStarted() error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.checkStartedLocked()
}

func (lc *PullConsumer) checkStartedLocked() error {
	switch lc.state {
	case stateCreated:
		return ErrNotStarted
	case stateShutdown:
		return ErrShutdown
	}
	return nil
}

// Pause stops pulling mqs until Resume (RocketMQ's pause): their pull goroutines end, a
// pull in flight is abandoned, and batches of theirs not yet polled are dropped, so that
// no Poll begun after Pause returns gives a message of mqs until Resume, and no pull of
// them starts after it returns (it waits for their pull goroutines to end). A paused queue
// keeps its position (committed as usual) and stays paused across rebalances while it
// stays assigned; one a rebalance takes away and later brings back comes back unpaused.
// Pausing a paused queue does nothing. It is all or nothing: errors (ErrNotStarted,
// ErrShutdown, ErrNotAssigned naming the first queue not assigned) leave every queue as
// it was.
//
// RocketMQ keeps polling what was pulled before the pause ("fetch data in poll() will not
// stop immediately until the messages of the requested message queues drain"); here the
// batches are pulled again on Resume, which costs a re-read but makes Pause take effect at
// once and keeps a paused queue's batches from holding the shared buffer full.
func (lc *PullConsumer) Pause(mqs []edge.MessageQueue) error {
	return lc.setPaused(mqs, true)
}

// Resume starts pulling mqs again from their positions (the offset after the last message
// polled, or the one Seek set). Resuming a queue not paused does nothing. Errors as for
// Pause.
func (lc *PullConsumer) Resume(mqs []edge.MessageQueue) error {
	return lc.setPaused(mqs, false)
}

func (lc *PullConsumer) setPaused(mqs []edge.MessageQueue, paused bool) error {
	lc.mu.Lock()
	if err := lc.checkStartedLocked(); err != nil {
		lc.mu.Unlock()
		return err
	}
	for _, mq := range mqs {
		if err := lc.checkAssignedLocked(mq); err != nil {
			lc.mu.Unlock()
			return err
		}
	}
	var stopped []chan struct{}
	for _, mq := range mqs {
		if q := lc.queues[mq]; q.paused != paused {
			stopped = append(stopped, q.exited)
			lc.restartLocked(q, lc.positionLocked(q), paused)
		}
	}
	lc.mu.Unlock()
	// A paused queue's pull goroutine has returned when Pause does: no pull of it starts
	// later. (Its pull in flight ends with its cancelled context.)
	for _, ch := range stopped {
		<-ch
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
	if err := lc.checkStarted(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return lc.commit()
}

// Committed returns mq's committed offset, or -1 if there is none (RocketMQ's committed,
// which reads memory first): the offset this consumer last committed for mq, else the one
// the broker (clustering) or the local file (broadcasting) holds. A commit whose sending
// failed counts, as it is retried by the next commit. Like RocketMQ's, the broker answers
// 0 for a queue never committed that still holds its first message. mq need not be
// assigned. Errors: ErrNotStarted, ErrShutdown, the offset store's.
func (lc *PullConsumer) Committed(mq edge.MessageQueue) (int64, error) {
	if err := lc.checkStarted(); err != nil {
		return -1, err
	}
	return lc.offsets.Read(mq, ReadMemoryThenStore)
}

// OffsetForTimestamp returns the offset of mq's first message stored at or after t, or mq's
// max offset when none was (RocketMQ's offsetForTimestamp): Seek to it to poll from t on. mq
// need not be assigned. Errors: ErrNotStarted, ErrShutdown, and the broker's
// (edge.ErrTopicNotExist, edge.ErrInvalidQueue).
func (lc *PullConsumer) OffsetForTimestamp(mq edge.MessageQueue, t time.Time) (int64, error) {
	if err := lc.checkStarted(); err != nil {
		return -1, err
	}
	return lc.b.SearchOffset(mq.Topic, mq.QueueID, t)
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
	if lc.assign == nil { // subscribed, maybe to nothing now, but still a member
		errs = append(errs, lc.b.Unregister(lc.opts.ClientID, lc.opts.Group))
	}
	return errors.Join(errs...)
}

// startQueueLocked adds mq, to be pulled from offset, and starts its pull goroutine unless
// paused. The caller holds mu and has checked that the consumer is started.
func (lc *PullConsumer) startQueueLocked(mq edge.MessageQueue, expr string, offset int64, paused bool) {
	ctx, cancel := context.WithCancel(lc.ctx)
	q := &liteQueue{mq: mq, expr: expr, from: offset, paused: paused, ctx: ctx, cancel: cancel, next: offset, exited: make(chan struct{})}
	lc.queues[mq] = q
	if paused {
		close(q.exited)
		return
	}
	lc.wg.Add(1)
	go lc.pullLoop(q)
}

// restartLocked puts a new queue in q's place, to be pulled from offset once not paused:
// q's pull goroutine stops and its batches are dropped. The caller holds mu and has
// checked that the consumer is started and q still assigned.
func (lc *PullConsumer) restartLocked(q *liteQueue, offset int64, paused bool) {
	lc.dropLocked(q)
	lc.startQueueLocked(q.mq, q.expr, offset, paused)
}

// positionLocked returns q's position: the offset after the last message polled from it
// (or the one Seek set), else the offset q started at.
func (lc *PullConsumer) positionLocked(q *liteQueue) int64 {
	if off, ok := lc.polled[q.mq]; ok {
		return off
	}
	return q.from
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

// pullLoop pulls q until q is replaced or removed or the consumer stops (RocketMQ's
// PullTaskImpl).
func (lc *PullConsumer) pullLoop(q *liteQueue) {
	defer lc.wg.Done()
	defer close(q.exited)
	var delay time.Duration
	for lc.sleep(delay, q.ctx.Done()) && lc.waitSpace(q) {
		delay = lc.pullOnce(q)
	}
}

// sleep waits d on the consumer's clock; false if stop comes first.
func (lc *PullConsumer) sleep(d time.Duration, stop <-chan struct{}) bool {
	return clockSleep(lc.opts.Clock, d, stop, nil)
}

// waitSpace waits until the buffer has room for q's next batch (flow control), then marks
// the start of the pull; false if q ends first.
func (lc *PullConsumer) waitSpace(q *liteQueue) bool {
	o := &lc.opts
	for {
		lc.mu.Lock()
		if lc.bufMsgs <= lc.popts.PullThresholdForAll && q.msgs <= o.PullThresholdForQueue && q.bytes <= o.PullThresholdSizeForQueue {
			q.pullStart = o.Clock.Now()
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
	lc.mu.Lock()
	q.pullStart = time.Time{}
	lc.mu.Unlock()
	if err != nil {
		if q.ctx.Err() != nil {
			return 0 // q ended: no delay, the loop ends at once
		}
		o.Logger.Warn("consumer: pull", "queue", q.mq, "offset", q.next, "err", err)
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

// heartbeat registers the consumer with subs, its subscriptions, with the broker. After
// Start only the service loop calls it, so that heartbeats cannot overtake one another.
func (lc *PullConsumer) heartbeat(subs map[string]string) error {
	return lc.b.Heartbeat(heartbeatOf(&lc.opts, subs, edge.ConsumeActively, func(string) { wake(lc.kick) }))
}

// subscriptions returns a copy of the subscriptions.
func (lc *PullConsumer) subscriptions() map[string]string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return maps.Clone(lc.subs)
}

// serviceLoop runs the periodic tasks.
func (lc *PullConsumer) serviceLoop() {
	defer lc.wg.Done()
	o := &lc.opts
	now := o.Clock.Now()
	due := serviceTimes{hb: now.Add(o.HeartbeatInterval), rb: now, commit: now.Add(o.PersistInterval), expiry: now.Add(o.PullExpiry)}
	for {
		next := lc.runDue(&due)
		t := edge.NewTimerAt(o.Clock, next)
		select {
		case <-t.C():
		case <-lc.kick:
			due.rb = o.Clock.Now()
		case <-lc.resub:
			due.hb = o.Clock.Now()
		case <-lc.done:
		}
		t.Stop()
		select {
		case <-lc.done:
			return
		default:
		}
	}
}

// serviceTimes are when the service loop's tasks are due next.
type serviceTimes struct{ hb, rb, commit, expiry time.Time }

// runDue runs the tasks that are due and returns when the next one is: heartbeat and
// rebalance when subscribed, auto-commit, and the PullExpiry check.
func (lc *PullConsumer) runDue(due *serviceTimes) time.Time {
	o := &lc.opts
	now := o.Clock.Now()
	var next []time.Time
	if lc.assign == nil {
		if !now.Before(due.hb) {
			if err := lc.heartbeat(lc.subscriptions()); err != nil {
				o.Logger.Warn("consumer: heartbeat", "group", o.Group, "err", err)
			}
			due.hb = now.Add(o.HeartbeatInterval)
		}
		if !now.Before(due.rb) {
			lc.rebalance()
			due.rb = now.Add(o.RebalanceInterval)
		}
		next = append(next, due.hb, due.rb)
	}
	if !lc.popts.ManualCommit {
		if !now.Before(due.commit) {
			if err := lc.commit(); err != nil {
				o.Logger.Warn("consumer: commit offsets", "group", o.Group, "err", err)
			}
			due.commit = now.Add(o.PersistInterval)
		}
		next = append(next, due.commit)
	}
	if !now.Before(due.expiry) {
		due.expiry = lc.restartExpired()
	}
	return slices.MinFunc(append(next, due.expiry), time.Time.Compare)
}

// restartExpired restarts from its position, as Seek would, every queue whose pull has been
// in flight for PullExpiry (a pull lost on a dead connection; the PushConsumer restarts
// such a queue at its next rebalance). It returns when the next pull in flight may expire.
func (lc *PullConsumer) restartExpired() time.Time {
	o := &lc.opts
	now := o.Clock.Now()
	next := now.Add(o.PullExpiry)
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.state != stateStarted {
		return next
	}
	for _, q := range slices.Collect(maps.Values(lc.queues)) {
		if q.pullStart.IsZero() {
			continue // paused, waiting for room, or between pulls
		}
		if exp := q.pullStart.Add(o.PullExpiry); now.Before(exp) {
			if exp.Before(next) {
				next = exp
			}
			continue
		}
		o.Logger.Warn("consumer: pull in flight too long: restarting the queue", "queue", q.mq, "expiry", o.PullExpiry)
		lc.restartLocked(q, lc.positionLocked(q), false)
	}
	return next
}

// rebalance reassigns the queues of every subscribed topic, as the PushConsumer does.
func (lc *PullConsumer) rebalance() {
	o := &lc.opts
	for _, topic := range slices.Sorted(maps.Keys(lc.subscriptions())) {
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
		lc.updateQueues(topic, mine)
	}
}

// updateQueues makes mine the assigned queues of topic. A removed queue has its position
// committed (with auto-commit) and its batches dropped; a new one starts from its committed
// offset, else from Options.FromWhere, unless topic is no longer subscribed by then.
func (lc *PullConsumer) updateQueues(topic string, mine []edge.MessageQueue) {
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
		// Checked under mu, as Unsubscribe deletes topic under mu before removing its queues.
		if expr, ok := lc.subs[topic]; ok && lc.state == stateStarted && lc.queues[mq] == nil {
			lc.startQueueLocked(mq, expr, off, false)
		}
		lc.mu.Unlock()
	}
}

// removeQueue takes q's queue away (whichever liteQueue has replaced q since): its pull
// stops, its batches are dropped, and its position is committed with auto-commit.
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
