package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgemq/edgemq/store"
)

const (
	defaultPullMsgs = 32
	maxPullMsgs     = 1024
)

// Pull reads up to req.MaxMsgs messages of one queue from req.Offset, keeping those that
// match the filter (the request's, else the group's heartbeat subscription): RocketMQ's
// PULL_MESSAGE. NextBeginOffset, MinOffset and MaxOffset are always set; the caller continues
// from NextBeginOffset whatever the status.
//
// With req.Suspend, a pull that finds nothing new (PullNoNewMsg at the queue's end) parks
// until a message matching its filter arrives on the queue, the periodic sweep sees the
// queue grew, or its wait (req.MaxWait, else Options.DefaultSuspend, capped by
// Options.MaxSuspend, and by Options.ShortPollingWait with short polling) runs out; then it
// reads once more and returns what it finds, which may again be PullNoNewMsg. It returns
// ctx.Err() if ctx ends first, ErrClosed if the broker closes.
//
// req.CommitOffset > 0 is stored as the group's offset of the queue before reading, once.
// Errors: ErrClosed; ErrInvalidArgument (empty group, negative offset or MaxWait, MaxMsgs
// outside 0..1024, a bad filter); ErrTopicNotExist (Pull never creates topics);
// ErrNoPermission (the topic is not readable); ErrInvalidQueue (outside the read queues);
// ErrSubscriptionNotExist (no filter and no subscription). A rejected pull changes nothing.
func (b *Broker) Pull(ctx context.Context, req PullRequest) (PullResult, error) {
	if err := b.check(); err != nil {
		return PullResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return PullResult{}, err
	}
	maxMsgs, filter, err := b.checkPull(&req)
	if err != nil {
		return PullResult{}, err
	}
	// The first pass only, as RocketMQ's storeOffsetEnable (brokerAllowSuspend && commit flag).
	if req.CommitOffset > 0 {
		b.offsets.set(offsetKey{req.Group, req.Topic, req.QueueID}, req.CommitOffset)
	}
	res, suspendable, err := b.pullOnce(&req, maxMsgs, filter)
	if err != nil || !suspendable || !req.Suspend {
		return res, err
	}
	if err := b.suspend(ctx, &req, filter); err != nil {
		return PullResult{}, err
	}
	// Woken or timed out: read again, never suspending twice (brokerAllowSuspend=false).
	res, _, err = b.pullOnce(&req, maxMsgs, filter)
	return res, err
}

// checkPull validates req and returns its batch size and filter (nil: everything).
func (b *Broker) checkPull(req *PullRequest) (int, store.Filter, error) {
	if req.Group == "" {
		return 0, nil, fmt.Errorf("%w: empty consumer group", ErrInvalidArgument)
	}
	tp, ok := b.topics.get(req.Topic)
	if !ok {
		return 0, nil, fmt.Errorf("%w: %q", ErrTopicNotExist, req.Topic)
	}
	if tp.cfg.Perm&PermRead == 0 {
		return 0, nil, fmt.Errorf("%w: topic %q is not readable", ErrNoPermission, req.Topic)
	}
	if req.QueueID < 0 || req.QueueID >= tp.cfg.ReadQueues {
		return 0, nil, fmt.Errorf("%w: queue %d of topic %q, which has %d read queues", ErrInvalidQueue, req.QueueID, req.Topic, tp.cfg.ReadQueues)
	}
	if req.Offset < 0 {
		return 0, nil, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, req.Offset)
	}
	if req.MaxMsgs < 0 || req.MaxMsgs > maxPullMsgs {
		return 0, nil, fmt.Errorf("%w: MaxMsgs %d not in 1..%d", ErrInvalidArgument, req.MaxMsgs, maxPullMsgs)
	}
	if req.MaxWait < 0 {
		return 0, nil, fmt.Errorf("%w: negative MaxWait %v", ErrInvalidArgument, req.MaxWait)
	}
	expr := req.Filter
	if expr == "" {
		sub, ok := b.groups.subscription(req.Group, req.Topic)
		if !ok {
			return 0, nil, fmt.Errorf("%w: group %q, topic %q", ErrSubscriptionNotExist, req.Group, req.Topic)
		}
		expr = sub.Expression
	}
	filter, err := parseFilter(expr)
	if err != nil {
		return 0, nil, err
	}
	maxMsgs := req.MaxMsgs
	if maxMsgs == 0 {
		maxMsgs = defaultPullMsgs
	}
	return maxMsgs, filter, nil
}

// parseFilter parses a TAG expression; nil means every message (and skips the checks).
func parseFilter(expr string) (store.Filter, error) {
	if expr == "*" {
		return nil, nil
	}
	f, err := store.ParseTagFilter(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: filter %q: %v", ErrInvalidArgument, expr, err)
	}
	if f.All() {
		return nil, nil
	}
	return f, nil
}

// pullOnce reads the queue once. suspendable reports a PullNoNewMsg at which a pull may wait.
func (b *Broker) pullOnce(req *PullRequest, maxMsgs int, filter store.Filter) (res PullResult, suspendable bool, err error) {
	g, err := b.st.GetMessages(req.Topic, req.QueueID, req.Offset, maxMsgs, filter)
	if err != nil {
		if errors.Is(err, store.ErrClosed) {
			return PullResult{}, false, ErrClosed
		}
		return PullResult{}, false, err
	}
	res.Status, suspendable = pullStatus(g.Status, req.Offset)
	res.NextBeginOffset, res.MinOffset, res.MaxOffset = g.NextBeginOffset, g.MinOffset, g.MaxOffset
	if res.Status != PullFound {
		return res, suspendable, nil
	}
	var bytes int64
	for i := range g.Messages {
		if err := b.decompress(&g.Messages[i]); err != nil {
			return PullResult{}, false, err
		}
		bytes += int64(len(g.Messages[i].Body))
	}
	b.stats.out(req.Group, int64(len(g.Messages)), bytes)
	res.Messages = g.Messages
	return res, false, nil
}

// pullStatus maps the store's status to the pull's (RocketMQ's PullMessageProcessor and the
// table in rocketmq-protocol.md §6), and says whether the pull may wait there.
func pullStatus(s store.GetStatus, offset int64) (st PullStatus, suspendable bool) {
	switch s {
	case store.Found:
		return PullFound, false
	case store.OffsetOverflowOne: // at the queue's end: the place to wait
		return PullNoNewMsg, true
	case store.NoMessageInQueue: // a new queue's first consumer waits at 0
		if offset != 0 {
			return PullOffsetIllegal, false
		}
		return PullNoNewMsg, true
	case store.OffsetFoundNull: // holes: move on to NextBeginOffset at once
		return PullNoNewMsg, false
	case store.NoMatchedMessage:
		return PullNoMatchedMsg, false
	case store.OffsetOverflowBadly, store.OffsetTooSmall:
		return PullOffsetIllegal, false
	}
	return PullOffsetIllegal, false
}

// suspendTimeout is how long a pull with MaxWait d may park.
func (b *Broker) suspendTimeout(d time.Duration) time.Duration {
	if d == 0 {
		d = b.opts.DefaultSuspend
	}
	d = min(d, b.opts.MaxSuspend)
	if b.opts.ShortPolling {
		d = min(d, b.opts.ShortPollingWait)
	}
	return d
}

// suspend parks the pull until a wake-up or its timeout (nil: read again), ctx's end
// (ctx.Err()) or Close (ErrClosed). The waiter is out of the hold queue when it returns.
func (b *Broker) suspend(ctx context.Context, req *PullRequest, filter store.Filter) error {
	w := newWaiter(holdKey{req.Topic, req.QueueID}, req.Offset, filter)
	t := b.clock.NewTimer(b.suspendTimeout(req.MaxWait))
	defer t.Stop()
	switch b.hold.park(w) {
	case parkMoved:
		return nil
	case parkRefused:
		return ErrClosed
	}
	select {
	case <-w.ch:
	case <-t.C():
		b.hold.remove(w)
	case <-ctx.Done():
		b.hold.remove(w)
		return ctx.Err()
	case <-b.done:
		b.hold.remove(w)
		return ErrClosed
	}
	if b.closed.Load() { // woken by Close
		return ErrClosed
	}
	return nil
}
