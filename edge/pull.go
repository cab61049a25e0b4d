package edge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
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
// Errors: ErrClosed, ctx.Err(), and (wrapped) mq.ErrInvalidArgument (a nil ctx, a bad group
// name (see mq.ValidateGroup), a negative offset or MaxWait, MaxMsgs outside 0..1024, a bad
// filter); mq.ErrTopicNotExist (Pull never creates topics); mq.ErrNoPermission (the topic is
// not readable); mq.ErrInvalidQueue (outside the read queues, or another broker's);
// mq.ErrSubscriptionNotExist (no filter and no subscription). A rejected pull changes
// nothing.
func (b *Broker) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	return b.pull(ctx, req, nil)
}

// PullViews is Pull that hands each message found to visit as the store holds it, instead
// of returning it in the result's Messages, which stay nil: a server encodes them straight
// into its reply. The View and its slices are valid only until visit returns; a body the
// broker compressed is handed over inflated, its compression bits cleared. The View's
// StoreHost is not in it: it is Options.StoreHost.
func (b *Broker) PullViews(ctx context.Context, req mq.PullRequest, visit func(v *store.View)) (mq.PullResult, error) {
	if visit == nil {
		return mq.PullResult{}, fmt.Errorf("%w: PullViews without a visit function", mq.ErrInvalidArgument)
	}
	return b.pull(ctx, req, visit)
}

// PullViewsOrPark is PullViews for a caller that must not block while a pull waits (a
// network server with many pulls parked): a suspended pull that finds nothing to read is
// parked and PullViewsOrPark returns at once with parked true and an empty result. wake is
// then called exactly once, when the pull is to be read again: a message it wants arrived
// (or the periodic sweep saw its queue grow), its wait ran out, ctx ended, or the broker
// closed. It runs on the goroutine of that event (the store's dispatch, a timer's, ctx's
// AfterFunc, the hold sweep) and must not block nor call into the broker: it hands the pull
// to a goroutine that reads it again with PullViews and Suspend false (a pull is suspended
// once, as with Pull). Otherwise, unparked, it returns what PullViews would, without
// calling wake. A parked pull costs no goroutine.
func (b *Broker) PullViewsOrPark(ctx context.Context, req mq.PullRequest, visit func(v *store.View), wake func()) (res mq.PullResult, parked bool, err error) {
	if visit == nil || wake == nil {
		return mq.PullResult{}, false, fmt.Errorf("%w: PullViewsOrPark without a visit or wake function", mq.ErrInvalidArgument)
	}
	res, wait, maxMsgs, filter, err := b.pullFirst(ctx, &req, visit)
	if err != nil || wait < 0 || !req.Suspend {
		return res, false, err
	}
	// Whoever takes w out of its hold queue fires it: an arrival, the sweep or Close
	// (wakeLocked), or its timer or ctx's end (timedOut; remove reports who did).
	w := b.hold.getAsync(holdKey{req.Queue.Topic, req.Queue.QueueID}, wait, filter, wake)
	w.atimer.Reset(b.suspendTimeout(req.MaxWait))
	w.ctx, w.stopCtx = ctx, context.AfterFunc(ctx, w.timedOut)
	switch b.hold.park(w) {
	case parkMoved:
		w.release()
		req.Offset = wait
		res, _, err = b.pullOnce(&req, maxMsgs, filter, visit)
		return res, false, err
	case parkRefused:
		w.release()
		return mq.PullResult{}, false, ErrClosed
	case parkCancelled:
		w.release()
		return mq.PullResult{}, false, ctx.Err()
	}
	return mq.PullResult{}, true, nil // w may be fired and reused at once: not touched again
}

// pull is Pull, or PullViews with visit set.
func (b *Broker) pull(ctx context.Context, req mq.PullRequest, visit func(v *store.View)) (mq.PullResult, error) {
	res, wait, maxMsgs, filter, err := b.pullFirst(ctx, &req, visit)
	if err != nil || wait < 0 || !req.Suspend {
		return res, err
	}
	// Holes (records lost with their entries) are stepped over: wait past them.
	req.Offset = wait
	if err := b.suspend(ctx, &req, filter); err != nil {
		return mq.PullResult{}, err
	}
	// Woken or timed out: read again, never suspending twice (brokerAllowSuspend=false).
	res, _, err = b.pullOnce(&req, maxMsgs, filter, visit)
	return res, err
}

// pullFirst is a pull's first pass: it checks req (with ctx), stores its commit offset, and
// reads once. wait >= 0 is the offset a suspended pull that found nothing waits past (holes,
// records lost with their entries, are stepped over); maxMsgs and filter are req's, for the
// read after the wait.
func (b *Broker) pullFirst(ctx context.Context, req *mq.PullRequest, visit func(v *store.View)) (res mq.PullResult, wait int64, maxMsgs int, filter store.Filter, err error) {
	if err := b.checkCtx(ctx); err != nil {
		return mq.PullResult{}, -1, 0, nil, err
	}
	if maxMsgs, filter, err = b.checkPull(req); err != nil {
		return mq.PullResult{}, -1, 0, nil, err
	}
	// The first pass only, as RocketMQ's storeOffsetEnable (brokerAllowSuspend && commit flag).
	if req.CommitOffset > 0 {
		b.offsets.set(offsetKey{req.Group, req.Queue.Topic, req.Queue.QueueID}, req.CommitOffset)
	}
	res, wait, err = b.pullOnce(req, maxMsgs, filter, visit)
	return res, wait, maxMsgs, filter, err
}

// checkPull validates req and returns its batch size and filter (nil: everything).
func (b *Broker) checkPull(req *mq.PullRequest) (int, store.Filter, error) {
	if err := mq.ValidateGroup(req.Group); err != nil {
		return 0, nil, err
	}
	if err := b.checkBrokerName(req.Queue.BrokerName); err != nil {
		return 0, nil, err
	}
	topic, queueID := req.Queue.Topic, req.Queue.QueueID
	tp, ok := b.topics.get(topic)
	if !ok {
		return 0, nil, fmt.Errorf("%w: %q", mq.ErrTopicNotExist, topic)
	}
	if tp.cfg.Perm&mq.PermRead == 0 {
		return 0, nil, fmt.Errorf("%w: topic %q is not readable", mq.ErrNoPermission, topic)
	}
	if queueID < 0 || queueID >= tp.cfg.ReadQueues {
		return 0, nil, fmt.Errorf("%w: queue %d of topic %q, which has %d read queues", mq.ErrInvalidQueue, queueID, topic, tp.cfg.ReadQueues)
	}
	if req.Offset < 0 {
		return 0, nil, fmt.Errorf("%w: negative offset %d", mq.ErrInvalidArgument, req.Offset)
	}
	if req.MaxMsgs < 0 || req.MaxMsgs > maxPullMsgs {
		return 0, nil, fmt.Errorf("%w: MaxMsgs %d not in 1..%d", mq.ErrInvalidArgument, req.MaxMsgs, maxPullMsgs)
	}
	if req.MaxWait < 0 {
		return 0, nil, fmt.Errorf("%w: negative MaxWait %v", mq.ErrInvalidArgument, req.MaxWait)
	}
	if req.CommitOffset < 0 {
		return 0, nil, fmt.Errorf("%w: negative CommitOffset %d", mq.ErrInvalidArgument, req.CommitOffset)
	}
	expr := req.Filter
	if expr == "" {
		sub, ok := b.groups.subscription(req.Group, topic)
		if !ok {
			return 0, nil, fmt.Errorf("%w: group %q, topic %q", mq.ErrSubscriptionNotExist, req.Group, topic)
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
	f, err := mq.ParseTagFilter(expr)
	if err != nil {
		return nil, fmt.Errorf("filter %q: %w", expr, err)
	}
	if f.All() {
		return nil, nil
	}
	tf := &tagFilter{f: f, hashes: make([]int64, len(f.Tags()))}
	for i, t := range f.Tags() {
		tf.hashes[i] = store.TagHash(t)
	}
	return tf, nil
}

// tagFilter is a TAG expression as the store filters by it: the consume-queue tag hashes of
// its tags first, then the exact tag.
type tagFilter struct {
	f      *mq.TagFilter
	hashes []int64
}

func (t *tagFilter) MatchHash(h int64) bool    { return slices.Contains(t.hashes, h) }
func (t *tagFilter) MatchTag(tags string) bool { return t.f.Match(tags) }

// pullOnce reads the queue once. wait is the offset at which a pull that found nothing may
// wait for a message: the queue's end, or past the holes it found there; -1 when it may
// not wait.
func (b *Broker) pullOnce(req *mq.PullRequest, maxMsgs int, filter store.Filter, visit func(v *store.View)) (res mq.PullResult, wait int64, err error) {
	if visit != nil {
		return b.pullViewsOnce(req, maxMsgs, filter, visit)
	}
	g, err := b.st.GetMessages(req.Queue.Topic, req.Queue.QueueID, req.Offset, maxMsgs, filter)
	res, wait, err = pullHead(req, g, err)
	if err != nil || res.Status != mq.PullFound {
		return res, wait, err
	}
	res.Messages = make([]mq.MessageExt, len(g.Messages))
	var bytes int64
	for i := range g.Messages {
		m := &g.Messages[i]
		if err := b.decompress(m); err != nil {
			return mq.PullResult{}, -1, err
		}
		bytes += int64(len(m.Body))
		res.Messages[i] = b.ext(m)
	}
	b.stats.out(req.Group, req.Queue.Topic, int64(len(g.Messages)), bytes)
	return res, -1, nil
}

// pullViewsOnce is pullOnce handing the messages to visit.
func (b *Broker) pullViewsOnce(req *mq.PullRequest, maxMsgs int, filter store.Filter, visit func(v *store.View)) (res mq.PullResult, wait int64, err error) {
	var n, bytes int64
	var derr error
	g, err := b.st.GetViews(req.Queue.Topic, req.Queue.QueueID, req.Offset, maxMsgs, filter, func(v *store.View) {
		if derr != nil {
			return
		}
		if v.SysFlag&mq.SysFlagCompressed != 0 && v.SysFlag&sysFlagCompressMs == sysFlagZstd {
			body, err := b.zdec.DecodeAll(v.Body, nil)
			if err != nil {
				derr = fmt.Errorf("edge: decompress message at %d: %w", v.Pos, err)
				return
			}
			v.Body = body
			v.SysFlag &^= mq.SysFlagCompressed | sysFlagCompressMs
		}
		n++
		bytes += int64(len(v.Body))
		visit(v)
	})
	if err == nil {
		err = derr
	}
	res, wait, err = pullHead(req, g, err)
	if err != nil || res.Status != mq.PullFound {
		return res, wait, err
	}
	b.stats.out(req.Group, req.Queue.Topic, n, bytes)
	return res, -1, nil
}

// pullHead makes a pull's result from a store read's outcome: the status and offsets, or
// the error (the store's ErrClosed as the broker's); wait as pullOnce returns it.
func pullHead(req *mq.PullRequest, g store.GetResult, err error) (res mq.PullResult, wait int64, _ error) {
	if err != nil {
		if errors.Is(err, store.ErrClosed) {
			return mq.PullResult{}, -1, ErrClosed
		}
		return mq.PullResult{}, -1, err
	}
	var suspendable bool
	res.Status, suspendable = pullStatus(g.Status, req.Offset)
	res.NextBeginOffset, res.MinOffset, res.MaxOffset = g.NextBeginOffset, g.MinOffset, g.MaxOffset
	if res.Status != mq.PullFound {
		return res, waitAt(req, g, suspendable), nil
	}
	return res, -1, nil
}

// waitAt is where a pull that found nothing may wait (see pullOnce).
func waitAt(req *mq.PullRequest, g store.GetResult, suspendable bool) int64 {
	if !suspendable {
		return -1
	}
	return max(req.Offset, g.NextBeginOffset)
}

// pullStatus maps the store's status to the pull's (RocketMQ's PullMessageProcessor and the
// table in rocketmq-protocol.md §6), and says whether the pull may wait there.
func pullStatus(s store.GetStatus, offset int64) (st mq.PullStatus, suspendable bool) {
	switch s {
	case store.Found:
		return mq.PullFound, false
	case store.OffsetOverflowOne: // at the queue's end: the place to wait
		return mq.PullNoNewMsg, true
	case store.NoMessageInQueue: // a new queue's first consumer waits at 0
		if offset != 0 {
			return mq.PullOffsetIllegal, false
		}
		return mq.PullNoNewMsg, true
	case store.OffsetFoundNull:
		// Holes (records lost with their entries) up to NextBeginOffset: as RocketMQ's
		// PULL_NOT_FOUND, a suspended pull waits, past them.
		return mq.PullNoNewMsg, true
	case store.NoMatchedMessage:
		return mq.PullNoMatchedMsg, false
	case store.OffsetOverflowBadly, store.OffsetTooSmall:
		return mq.PullOffsetIllegal, false
	}
	return mq.PullOffsetIllegal, false
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
func (b *Broker) suspend(ctx context.Context, req *mq.PullRequest, filter store.Filter) error {
	w := b.hold.get(holdKey{req.Queue.Topic, req.Queue.QueueID}, req.Offset, filter)
	defer b.hold.put(w) // out of the hold queue by then
	w.timer.Reset(b.suspendTimeout(req.MaxWait))
	switch b.hold.park(w) {
	case parkMoved:
		return nil
	case parkRefused:
		return ErrClosed
	}
	select {
	case <-w.ch:
	case <-w.timer.C:
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
