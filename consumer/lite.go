package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
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
// (neither does RocketMQ's lite consumer). Subscribe or Assign mq.RetryTopic(group) to
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
	assign  []mq.MessageQueue
	offsets offsetStore
	queues  map[mq.MessageQueue]*liteQueue
	polled  map[mq.MessageQueue]int64 // offset after the last polled message, by queue
	buf     []*liteBatch              // pulled batches waiting for Poll, oldest first
	bufMsgs int                       // messages in buf
	// space is closed (and replaced) when the buffer shrinks while spaceWait: it wakes the
	// pull goroutines waiting for room.
	space     chan struct{}
	spaceWait bool

	cmu sync.Mutex // serializes commits with the removal of queues

	ready   chan struct{} // capacity 1: buf has batches
	service liteService   // the service loop, made by Start
	ctx     context.Context
	cancel  context.CancelFunc // ends every pull
	done    chan struct{}      // closed by Shutdown
	wg      sync.WaitGroup
}

// liteQueue is one assigned queue and, unless paused, its pull goroutine. Seek, Pause,
// Resume and the PullExpiry check replace it by a new one.
type liteQueue struct {
	queue  mq.MessageQueue
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
		queues: map[mq.MessageQueue]*liteQueue{}, polled: map[mq.MessageQueue]int64{},
		space: make(chan struct{}), ready: make(chan struct{}, 1),
		done: make(chan struct{})}
	lc.ctx, lc.cancel = context.WithCancel(context.Background())
	return lc, nil
}

// Subscribe adds a subscription to topic with a TAG expression ("*", "A || B"; "" means
// "*"). The topic's queues are shared with the group's other subscribed members. Call it
// before Start. Errors: ErrSubscribeAndAssign after Assign; ErrInvalidOptions for an empty
// topic or an expression that does not parse; mq.ErrTopicNotExist (wrapped) for a topic
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
	if _, err := mq.ParseTagFilter(expression); err != nil {
		return fmt.Errorf("%w: expression %q: %v", ErrInvalidOptions, expression, err)
	}
	if _, err := lc.route(topic); err != nil {
		return err
	}
	lc.subs[topic] = expression
	return nil
}

// route returns topic's route, asking the broker with Options.CallTimeout.
func (lc *PullConsumer) route(topic string) (mq.TopicRoute, error) {
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	r, err := lc.b.Route(ctx, topic)
	if err != nil {
		return r, fmt.Errorf("consumer: route of topic %q: %w", topic, err)
	}
	return r, nil
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
		lc.service.heartbeat.trigger()
	}
	return nil
}

// Assign makes mqs the consumer's queues, replacing an earlier Assign. They are read in
// full (no filter), with no rebalance and no heartbeat: the group only names the offsets.
// Call it before Start. Errors: ErrSubscribeAndAssign after Subscribe; ErrInvalidOptions for
// no queues; mq.ErrTopicNotExist or mq.ErrInvalidQueue (wrapped) for a queue the topic's
// route does not have. A queue may leave its BrokerName empty when its topic has one
// broker.
func (lc *PullConsumer) Assign(queues []mq.MessageQueue) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err := lc.checkCreatedLocked(); err != nil {
		return err
	}
	if len(lc.subs) > 0 {
		return ErrSubscribeAndAssign
	}
	if len(queues) == 0 {
		return fmt.Errorf("%w: no queues to assign", ErrInvalidOptions)
	}
	for _, queue := range queues {
		r, err := lc.route(queue.Topic)
		if err != nil {
			return err
		}
		if !routeHasQueue(&r, queue) {
			return fmt.Errorf("%w: %v is not a read queue of the topic's route", mq.ErrInvalidQueue, queue)
		}
	}
	q := slices.Clone(queues)
	slices.SortFunc(q, mq.CompareQueues)
	lc.assign = slices.Compact(q)
	return nil
}

// routeHasQueue reports whether queue is a read queue of route r; an empty broker name
// stands for the route's only broker.
func routeHasQueue(r *mq.TopicRoute, queue mq.MessageQueue) bool {
	all := r.ReadQueues()
	if queue.BrokerName == "" {
		if len(r.Queues) != 1 {
			return false
		}
		queue.BrokerName = r.Queues[0].BrokerName
	}
	return slices.Contains(all, queue)
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
	if o.Model == mq.Clustering {
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
	for i, queue := range lc.assign {
		off, err := startOffset(lc.ctx, lc.b, lc.offsets, o, queue)
		if err != nil {
			return fmt.Errorf("consumer: start offset of %s queue %d: %w", queue.Topic, queue.QueueID, err)
		}
		starts[i] = off
	}
	lc.service = lc.newService() // before the heartbeat, whose OnChange triggers its rebalance
	if len(lc.subs) > 0 {
		if err := lc.heartbeat(lc.subs); err != nil {
			return err
		}
	}
	lc.state = stateStarted
	for i, queue := range lc.assign {
		lc.startQueueLocked(queue, "*", starts[i], false)
	}
	lc.wg.Add(1)
	go func() {
		defer lc.wg.Done()
		lc.service.run(lc.done)
	}()
	return nil
}

// Poll returns the oldest pulled batch, up to Options.PullBatchSize messages of one queue in
// queue order, waiting until there is one or ctx ends (then nil, ctx.Err()). It may be
// called from several goroutines, each getting other batches. Errors: ErrNotStarted,
// ErrShutdown (also when Shutdown ends the wait), mq.ErrInvalidArgument for a nil ctx.
func (lc *PullConsumer) Poll(ctx context.Context) ([]*Message, error) {
	if ctx == nil {
		return nil, errNilContext
	}
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
			if lc.queues[bt.q.queue] != bt.q { // removed or sought meanwhile (never kept in buf)
				continue
			}
			lc.polled[bt.q.queue] = bt.next
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

// Seek makes queue's next polled message the one at offset, which must lie in the queue's
// [min, max] offsets (max: the next message to arrive). Batches of queue already pulled are
// dropped, and queue's position becomes offset, to be committed by the next commit. A paused
// queue stays paused, to start at offset on Resume. Errors: ErrNotStarted, ErrShutdown,
// ErrNotAssigned, ErrSeekOffset, and the broker's.
func (lc *PullConsumer) Seek(queue mq.MessageQueue, offset int64) error {
	if err := lc.checkAssigned(queue); err != nil {
		return err
	}
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	lo, err := lc.b.MinOffset(ctx, queue)
	if err != nil {
		return err
	}
	hi, err := lc.b.MaxOffset(ctx, queue)
	if err != nil {
		return err
	}
	if offset < lo || offset > hi {
		return fmt.Errorf("%w: offset %d of %s queue %d not in [%d, %d]", ErrSeekOffset, offset, queue.Topic, queue.QueueID, lo, hi)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err := lc.checkAssignedLocked(queue); err != nil {
		return err
	}
	q := lc.queues[queue]
	lc.polled[queue] = offset
	lc.restartLocked(q, offset, q.paused)
	return nil
}

// SeekToBegin seeks queue to its first stored message.
func (lc *PullConsumer) SeekToBegin(queue mq.MessageQueue) error {
	if err := lc.checkAssigned(queue); err != nil {
		return err
	}
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	off, err := lc.b.MinOffset(ctx, queue)
	if err != nil {
		return err
	}
	return lc.Seek(queue, off)
}

// SeekToEnd seeks queue past its last message: only messages sent from now on are polled.
func (lc *PullConsumer) SeekToEnd(queue mq.MessageQueue) error {
	if err := lc.checkAssigned(queue); err != nil {
		return err
	}
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	off, err := lc.b.MaxOffset(ctx, queue)
	if err != nil {
		return err
	}
	return lc.Seek(queue, off)
}

func (lc *PullConsumer) checkAssigned(queue mq.MessageQueue) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.checkAssignedLocked(queue)
}

// checkAssignedLocked returns ErrNotStarted, ErrShutdown or ErrNotAssigned unless the
// consumer is started and queue assigned to it.
func (lc *PullConsumer) checkAssignedLocked(queue mq.MessageQueue) error {
	if err := lc.checkStartedLocked(); err != nil {
		return err
	}
	if _, ok := lc.queues[queue]; !ok {
		return fmt.Errorf("%w: %s queue %d", ErrNotAssigned, queue.Topic, queue.QueueID)
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
func (lc *PullConsumer) Pause(mqs []mq.MessageQueue) error {
	return lc.setPaused(mqs, true)
}

// Resume starts pulling mqs again from their positions (the offset after the last message
// polled, or the one Seek set). Resuming a queue not paused does nothing. Errors as for
// Pause.
func (lc *PullConsumer) Resume(mqs []mq.MessageQueue) error {
	return lc.setPaused(mqs, false)
}

func (lc *PullConsumer) setPaused(mqs []mq.MessageQueue, paused bool) error {
	lc.mu.Lock()
	if err := lc.checkStartedLocked(); err != nil {
		lc.mu.Unlock()
		return err
	}
	for _, queue := range mqs {
		if err := lc.checkAssignedLocked(queue); err != nil {
			lc.mu.Unlock()
			return err
		}
	}
	var stopped []chan struct{}
	for _, queue := range mqs {
		if q := lc.queues[queue]; q.paused != paused {
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
func (lc *PullConsumer) Assignment() []mq.MessageQueue {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.state == stateShutdown {
		return nil
	}
	return slices.SortedFunc(maps.Keys(lc.queues), mq.CompareQueues)
}

// CommitSync commits, for every assigned queue, the offset after the last message Poll
// returned from it (or the position Seek set), and returns when the offset store has them:
// the broker in clustering, the local file in broadcasting. ctx bounds the calls to the
// broker. Errors: ErrNotStarted, ErrShutdown, ctx.Err(), the offset store's;
// mq.ErrInvalidArgument for a nil ctx.
func (lc *PullConsumer) CommitSync(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if err := lc.checkStarted(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return lc.commit(ctx)
}

// Committed returns queue's committed offset, or -1 if there is none (RocketMQ's committed,
// which reads memory first): the offset this consumer last committed for queue, else the one
// the broker (clustering) or the local file (broadcasting) holds. A commit whose sending
// failed counts, as it is retried by the next commit. Like RocketMQ's, the broker answers
// 0 for a queue never committed that still holds its first message. queue need not be
// assigned. Errors: ErrNotStarted, ErrShutdown, the offset store's.
func (lc *PullConsumer) Committed(queue mq.MessageQueue) (int64, error) {
	if err := lc.checkStarted(); err != nil {
		return -1, err
	}
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	return lc.offsets.Read(ctx, queue, readMemoryThenStore)
}

// OffsetForTimestamp returns the offset of queue's first message stored at or after t, or queue's
// max offset when none was (RocketMQ's offsetForTimestamp): Seek to it to poll from t on. queue
// need not be assigned. Errors: ErrNotStarted, ErrShutdown, and the broker's
// (mq.ErrTopicNotExist, mq.ErrInvalidQueue).
func (lc *PullConsumer) OffsetForTimestamp(queue mq.MessageQueue, t time.Time) (int64, error) {
	if err := lc.checkStarted(); err != nil {
		return -1, err
	}
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	return lc.b.SearchOffset(ctx, queue, t)
}

// commit copies the polled positions into the offset store and persists them; ctx bounds
// the calls to the broker.
func (lc *PullConsumer) commit(ctx context.Context) error {
	lc.cmu.Lock()
	defer lc.cmu.Unlock()
	lc.mu.Lock()
	queues := make([]mq.MessageQueue, 0, len(lc.polled))
	for queue, off := range lc.polled {
		lc.offsets.Update(queue, off, false) // Seek may move a position back
		queues = append(queues, queue)
	}
	lc.mu.Unlock()
	slices.SortFunc(queues, mq.CompareQueues)
	return lc.offsets.Persist(ctx, queues)
}

// Shutdown stops every pull and waits for every goroutine, commits the polled positions
// (with auto-commit; with ManualCommit it only retries commits that failed) and leaves the
// group (when subscribed). Batches pulled but not polled are dropped. Polls waiting return
// ErrShutdown. A consumer never started just becomes shut down; a second Shutdown returns
// ErrShutdown. Nothing Shutdown waits for can hang, since a pull ends when its context is
// cancelled (a Broker must honour it); ctx bounds the calls to the broker it makes
// afterwards, each of which Options.CallTimeout bounds too (a nil ctx: only that).
func (lc *PullConsumer) Shutdown(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
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

	ctx, cancel := lc.opts.callCtx(ctx)
	defer cancel()
	var errs []error
	if !lc.popts.ManualCommit {
		errs = append(errs, lc.commit(ctx))
	} else {
		lc.mu.Lock()
		queues := slices.SortedFunc(maps.Keys(lc.queues), mq.CompareQueues)
		lc.mu.Unlock()
		errs = append(errs, lc.offsets.Persist(ctx, queues))
	}
	if lc.assign == nil { // subscribed, maybe to nothing now, but still a member
		errs = append(errs, lc.b.Unregister(ctx, lc.opts.ClientID, lc.opts.Group))
	}
	return errors.Join(errs...)
}

// startQueueLocked adds queue, to be pulled from offset, and starts its pull goroutine unless
// paused. The caller holds mu and has checked that the consumer is started.
func (lc *PullConsumer) startQueueLocked(queue mq.MessageQueue, expr string, offset int64, paused bool) {
	ctx, cancel := context.WithCancel(lc.ctx)
	q := &liteQueue{queue: queue, expr: expr, from: offset, paused: paused, ctx: ctx, cancel: cancel, next: offset, exited: make(chan struct{})}
	lc.queues[queue] = q
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
	lc.startQueueLocked(q.queue, q.expr, offset, paused)
}

// positionLocked returns q's position: the offset after the last message polled from it
// (or the one Seek set), else the offset q started at.
func (lc *PullConsumer) positionLocked(q *liteQueue) int64 {
	if off, ok := lc.polled[q.queue]; ok {
		return off
	}
	return q.from
}

// dropLocked stops q's pull goroutine and drops its batches; the caller holds mu.
func (lc *PullConsumer) dropLocked(q *liteQueue) {
	q.cancel()
	if lc.queues[q.queue] == q {
		delete(lc.queues, q.queue)
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

// sleep waits d; false if stop comes first.
func (lc *PullConsumer) sleep(d time.Duration, stop <-chan struct{}) bool {
	return sleep(d, stop, nil)
}

// waitSpace waits until the buffer has room for q's next batch (flow control), then marks
// the start of the pull; false if q ends first.
func (lc *PullConsumer) waitSpace(q *liteQueue) bool {
	o := &lc.opts
	for {
		lc.mu.Lock()
		if lc.bufMsgs <= lc.popts.PullThresholdForAll && q.msgs <= o.PullThresholdForQueue && q.bytes <= o.PullThresholdSizeForQueue {
			q.pullStart = time.Now()
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
	res, err := lc.b.Pull(q.ctx, mq.PullRequest{
		Group: o.Group, Queue: q.queue, Offset: q.next,
		MaxMsgs: o.PullBatchSize, Filter: q.expr, Suspend: true, MaxWait: o.BrokerSuspend,
	})
	lc.mu.Lock()
	q.pullStart = time.Time{}
	lc.mu.Unlock()
	if err != nil {
		if q.ctx.Err() != nil {
			return 0 // q ended: no delay, the loop ends at once
		}
		o.Logger.Warn("consumer: pull", "queue", q.queue, "offset", q.next, "err", err)
		return o.PullErrorDelay
	}
	if res.Status == mq.PullFound && len(res.Messages) > 0 {
		bt := &liteBatch{q: q, msgs: delivered(res.Messages, o.Group), next: res.NextBeginOffset}
		for _, m := range bt.msgs {
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
	if res.Status == mq.PullOffsetIllegal {
		o.Logger.Warn("consumer: offset illegal", "queue", q.queue, "offset", q.next, "next", res.NextBeginOffset)
	}
	// Nothing new, nothing matching, or an illegal offset: go on from NextBeginOffset. With
	// nothing of q waiting for Poll, that is also its position, so that a filter that skips
	// everything, or a queue whose messages were deleted, does not hold its offset back
	// (RocketMQ's correctTagsOffset).
	q.next = res.NextBeginOffset
	lc.mu.Lock()
	if q.ctx.Err() == nil && q.msgs == 0 {
		lc.polled[q.queue] = q.next
	}
	lc.mu.Unlock()
	return 0
}

// heartbeat registers the consumer with subs, its subscriptions, with the broker. After
// Start only the service loop calls it, so that heartbeats cannot overtake one another.
func (lc *PullConsumer) heartbeat(subs map[string]string) error {
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	return lc.b.Heartbeat(ctx, heartbeatOf(&lc.opts, subs, mq.ConsumeActively, func(string) { lc.service.rebalance.trigger() }))
}

// subscriptions returns a copy of the subscriptions.
func (lc *PullConsumer) subscriptions() map[string]string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return maps.Clone(lc.subs)
}

// liteService is the PullConsumer's service loop and the tasks others trigger.
type liteService struct {
	*serviceLoop
	heartbeat, rebalance *task
}

// newService builds the service loop: when subscribed, heartbeat every HeartbeatInterval
// (and at once after Unsubscribe) and rebalance at once, then every RebalanceInterval and
// on membership changes; with auto-commit, commit every PersistInterval; and the PullExpiry
// check when a pull may expire.
func (lc *PullConsumer) newService() liteService {
	o := &lc.opts
	now := time.Now()
	l := newServiceLoop()
	var svc liteService
	if lc.assign == nil {
		svc.heartbeat = l.every(now.Add(o.HeartbeatInterval), o.HeartbeatInterval, func() {
			if err := lc.heartbeat(lc.subscriptions()); err != nil && !quiet(lc.ctx, err) {
				o.Logger.Warn("consumer: heartbeat", "group", o.Group, "err", err)
			}
		})
		svc.rebalance = l.every(now, o.RebalanceInterval, lc.rebalance)
	}
	if !lc.popts.ManualCommit {
		l.every(now.Add(o.PersistInterval), o.PersistInterval, func() {
			ctx, cancel := o.callCtx(lc.ctx)
			defer cancel()
			if err := lc.commit(ctx); err != nil && !quiet(lc.ctx, err) {
				o.Logger.Warn("consumer: commit offsets", "group", o.Group, "err", err)
			}
		})
	}
	l.add(now.Add(o.PullExpiry), lc.restartExpired)
	svc.serviceLoop = l
	return svc
}

// restartExpired restarts from its position, as Seek would, every queue whose pull has been
// in flight for PullExpiry (a pull lost on a dead connection; the PushConsumer restarts
// such a queue at its next rebalance). It returns when the next pull in flight may expire.
func (lc *PullConsumer) restartExpired() time.Time {
	o := &lc.opts
	now := time.Now()
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
		o.Logger.Warn("consumer: pull in flight too long: restarting the queue", "queue", q.queue, "expiry", o.PullExpiry)
		lc.restartLocked(q, lc.positionLocked(q), false)
	}
	return next
}

// rebalance reassigns the queues of every subscribed topic, as the PushConsumer does.
func (lc *PullConsumer) rebalance() {
	rebalance(lc.ctx, lc.b, &lc.opts, lc.subscriptions(), func(topic, _ string, mine []mq.MessageQueue) {
		lc.updateQueues(topic, mine)
	})
}

// updateQueues makes mine the assigned queues of topic. A removed queue has its position
// committed (with auto-commit) and its batches dropped; a new one starts from its committed
// offset, else from Options.FromWhere, unless topic is no longer subscribed by then.
func (lc *PullConsumer) updateQueues(topic string, mine []mq.MessageQueue) {
	want := map[mq.MessageQueue]bool{}
	for _, queue := range mine {
		want[queue] = true
	}
	lc.mu.Lock()
	var gone []*liteQueue
	for queue, q := range lc.queues {
		if queue.Topic == topic && !want[queue] {
			gone = append(gone, q)
		}
	}
	lc.mu.Unlock()
	for _, q := range gone {
		lc.removeQueue(q)
	}
	for _, queue := range mine {
		lc.mu.Lock()
		_, ok := lc.queues[queue]
		lc.mu.Unlock()
		if ok {
			continue
		}
		if lc.opts.Model == mq.Clustering {
			lc.offsets.Remove(queue) // a stale memory offset of an earlier assignment
		}
		off, err := startOffset(lc.ctx, lc.b, lc.offsets, &lc.opts, queue)
		if err != nil {
			if !quiet(lc.ctx, err) {
				lc.opts.Logger.Warn("consumer: rebalance: start offset", "queue", queue, "err", err)
			}
			continue
		}
		lc.mu.Lock()
		// Checked under mu, as Unsubscribe deletes topic under mu before removing its queues.
		if expr, ok := lc.subs[topic]; ok && lc.state == stateStarted && lc.queues[queue] == nil {
			lc.startQueueLocked(queue, expr, off, false)
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
	cur := lc.queues[q.queue]
	if cur == nil {
		lc.mu.Unlock()
		return
	}
	lc.dropLocked(cur)
	pos, ok := lc.polled[q.queue]
	delete(lc.polled, q.queue)
	lc.mu.Unlock()
	if ok && !lc.popts.ManualCommit {
		lc.offsets.Update(q.queue, pos, false)
	}
	ctx, cancel := lc.opts.callCtx(lc.ctx)
	defer cancel()
	if err := lc.offsets.Persist(ctx, []mq.MessageQueue{q.queue}); err != nil && !quiet(lc.ctx, err) {
		lc.opts.Logger.Warn("consumer: persist offset", "queue", q.queue, "err", err)
	}
	if lc.opts.Model == mq.Clustering {
		lc.offsets.Remove(q.queue)
	}
}
