package consumer

import (
	"errors"
	"math"
	"runtime"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// pullLoop pulls one queue until the queue is removed or the consumer stops (RocketMQ's
// PullMessageService with one request per queue: each pull schedules the next).
//
// A pull held back by flow control (the queue caches too many messages or bytes, or too
// wide a span of offsets) waits FlowControlDelay at most: it goes on as soon as the
// listeners have drained the cache to half of each threshold, so that a fast listener is
// not left idle for the rest of the delay.
//
// Over a broker that is an AsyncPuller the loop starts chains of pulls (pullChain) and
// waits for each to hand the queue back.
func (pc *PushConsumer) pullLoop(qs *queueState) {
	defer pc.wg.Done()
	defer close(qs.pulled)
	ap, _ := pc.b.(AsyncPuller)
	var st pullStep
	for {
		if st.drain {
			if !pc.waitDrain(qs, st.delay) {
				return
			}
		} else if !pc.sleep(st.delay, qs.stop) {
			return
		}
		if ap != nil {
			st = pc.pullChain(qs, ap)
		} else {
			st = pc.pull(qs)
		}
		if st.end {
			return
		}
	}
}

// pullStep is what follows a pull: the delay before the next; drain reports that the
// delay is flow control, which may end early once the cache drains (waitDrain); end that
// the queue's loop must end.
type pullStep struct {
	delay time.Duration
	drain bool
	end   bool
}

// waitDrain waits up to d for qs's cache to drain to half the flow-control thresholds; false
// if the queue or the consumer stops first.
func (pc *PushConsumer) waitDrain(qs *queueState, d time.Duration) bool {
	o := &pc.opts
	span := int64(math.MaxInt64) // orderly: no span limit
	if !pc.isOrderly() {
		span = o.ConsumeConcurrentlyMaxSpan / 2
	}
	ch := qs.pq.armDrain(int64(o.PullThresholdForQueue)/2, o.PullThresholdSizeForQueue/2, span)
	defer qs.pq.disarmDrain()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return true
	case <-qs.stop:
		return false
	case <-pc.done:
		return false
	}
}

// pull is DefaultMQPushConsumerImpl.pullMessage with its PullCallback, from the queue's
// goroutine.
func (pc *PushConsumer) pull(qs *queueState) pullStep {
	begin := time.Now()
	req, st, ok := pc.beforePull(qs, false, begin)
	if !ok {
		return st
	}
	res, err := pc.b.Pull(qs.ctx, req)
	st = pc.afterPull(qs, res, err, begin)
	if n := len(res.Messages); n > 0 && n < req.MaxMsgs {
		// The queue is caught up: its next pull will wait for messages. The worker that
		// afterPull woke runs now, on this processor, rather than once the next pull has
		// gone out and parked (an in-process broker's Pull runs on this goroutine).
		runtime.Gosched()
	}
	return st
}

// pullChain sends qs's pull with PullAsync and waits for the chain it starts to hand the
// queue back: each reply's callback (chained) sends the next pull itself while no wait
// applies. A pull that cannot go without waiting goes as Pull.
func (pc *PushConsumer) pullChain(qs *queueState, ap AsyncPuller) pullStep {
	qs.begin = time.Now()
	req, st, ok := pc.beforePull(qs, false, qs.begin)
	if !ok {
		return st
	}
	if qs.chained == nil {
		qs.back = make(chan pullStep, 1)
		qs.chained = func(res mq.PullResult, err error) { pc.chained(qs, ap, res, err) }
	}
	pc.pushBudget(qs, &req)
	err := ap.PullAsync(qs.ctx, req, qs.chained)
	if err == nil {
		return <-qs.back
	}
	if errors.Is(err, mq.ErrWouldBlock) {
		res, err := pc.b.Pull(qs.ctx, req)
		return pc.afterPull(qs, res, err, qs.begin)
	}
	return pc.afterPull(qs, mq.PullResult{}, err, qs.begin)
}

// chained is the callback of a chained pull (pullChain), on the broker's goroutine: it
// handles the result and sends the next pull, or hands the queue back to its goroutine
// when the next pull must wait. It never blocks.
func (pc *PushConsumer) chained(qs *queueState, ap AsyncPuller, res mq.PullResult, err error) {
	if err == nil && res.More {
		// A streamed pull's answer: the broker answers the pull again, and the answer
		// that ends the stream (its budget spent, its hold over, an error) comes through
		// here as any other. A queue dropped meanwhile has had its ctx ended, which ends
		// the stream's call.
		pc.afterPull(qs, res, nil, qs.begin)
		qs.begin = time.Now()
		qs.pq.SetLastPullTime(qs.begin) // the pull is alive: no PullExpiry
		return
	}
	if st := pc.afterPull(qs, res, err, qs.begin); st.end || st.delay > 0 {
		qs.back <- st
		return
	}
	qs.begin = time.Now()
	req, st, ok := pc.beforePull(qs, true, qs.begin)
	if !ok || st.delay > 0 {
		qs.back <- st
		return
	}
	pc.pushBudget(qs, &req)
	switch err := ap.PullAsync(qs.ctx, req, qs.chained); {
	case err == nil:
	case errors.Is(err, mq.ErrWouldBlock):
		qs.back <- pullStep{} // the queue's goroutine pulls at once
	default:
		qs.back <- pc.afterPull(qs, mq.PullResult{}, err, qs.begin)
	}
}

// beforePull is the part of DefaultMQPushConsumerImpl.pullMessage before the request: it
// returns the pull to send, or false and when to try again (flow control, a paused
// consumer, an orderly queue not locked). In a chain's callback (chained) it does not
// read the broker: an orderly queue's first pull after locking, which reads its offset,
// goes back to the queue's goroutine. now is the pull's start: the queue's last pull time.
func (pc *PushConsumer) beforePull(qs *queueState, chained bool, now time.Time) (mq.PullRequest, pullStep, bool) {
	o := &pc.opts
	pq := qs.pq
	if pq.Dropped() {
		return mq.PullRequest{}, pullStep{end: true}, false
	}
	pq.SetLastPullTime(now)
	if pc.paused.Load() {
		return mq.PullRequest{}, pullStep{delay: o.SuspendedDelay}, false
	}
	if pq.Count() > int64(o.PullThresholdForQueue) || pq.Size() > o.PullThresholdSizeForQueue {
		pc.stats.flowControl(qs.queue.Topic)
		return mq.PullRequest{}, pullStep{delay: o.FlowControlDelay, drain: true}, false
	}
	if !pc.isOrderly() {
		if pq.MaxSpan() > o.ConsumeConcurrentlyMaxSpan {
			pc.stats.flowControl(qs.queue.Topic)
			return mq.PullRequest{}, pullStep{delay: o.FlowControlDelay, drain: true}, false
		}
	} else if o.Model == mq.Clustering {
		if !pq.Locked() {
			return mq.PullRequest{}, pullStep{delay: o.PullErrorDelay}, false
		}
		if !qs.lockedFirst {
			if chained {
				return mq.PullRequest{}, pullStep{}, false
			}
			off, err := pc.computePullFromWhere(qs.queue)
			if err != nil {
				return mq.PullRequest{}, pullStep{delay: o.PullErrorDelay}, false
			}
			qs.lockedFirst = true
			qs.next = off
		}
	}
	var commit int64
	if o.Model == mq.Clustering {
		if c, err := pc.offsets.Read(qs.ctx, qs.queue, readFromMemory); err == nil && c > 0 {
			commit = c
		}
	}
	return mq.PullRequest{
		Group: o.Group, Queue: qs.queue, Offset: qs.next,
		MaxMsgs: o.PullBatchSize, Filter: qs.expr, CommitOffset: commit,
		Suspend: true, MaxWait: o.BrokerSuspend,
	}, pullStep{}, true
}

// pushBudget lets req, a chained pull of qs, stream (mq.PullRequest.PushMsgs) within what
// the queue may still take in before flow control would pause its pulls: the messages
// and body bytes under PullThresholdForQueue and PullThresholdSizeForQueue, and the offsets
// under ConsumeConcurrentlyMaxSpan. Not in orderly consumption (a queue's lock decides each
// pull), with a PullInterval, or with NoStreamPulls.
func (pc *PushConsumer) pushBudget(qs *queueState, req *mq.PullRequest) {
	o := &pc.opts
	if o.NoStreamPulls || pc.isOrderly() || o.PullInterval > 0 || !req.Suspend {
		return
	}
	pq := qs.pq
	msgs := int64(o.PullThresholdForQueue) - pq.Count()
	msgs = min(msgs, o.ConsumeConcurrentlyMaxSpan-pq.MaxSpan())
	bytes := o.PullThresholdSizeForQueue - pq.Size()
	if msgs <= int64(req.MaxMsgs) || bytes <= 0 {
		return // room for one batch at most: an ordinary pull
	}
	req.PushMsgs, req.PushBytes = int(msgs), bytes
}

// afterPull is DefaultMQPushConsumerImpl.pullMessage's PullCallback: it handles a pull's
// result and returns what follows.
func (pc *PushConsumer) afterPull(qs *queueState, res mq.PullResult, err error, begin time.Time) pullStep {
	o := &pc.opts
	pq := qs.pq
	if err != nil {
		if qs.ctx.Err() != nil {
			return pullStep{end: true}
		}
		o.Logger.Warn("consumer: pull", "queue", qs.queue, "offset", qs.next, "err", err)
		return pullStep{delay: o.PullErrorDelay}
	}
	if pq.Dropped() {
		return pullStep{end: true}
	}
	switch res.Status {
	case mq.PullFound:
		qs.next = res.NextBeginOffset
		pc.stats.pulled(qs.queue.Topic, time.Now().Sub(begin), len(res.Messages))
		if len(res.Messages) == 0 {
			return pullStep{}
		}
		msgs := delivered(res.Messages, o.Group)
		dispatch := pq.PutMessages(msgs) // before the next pull: flow control counts them
		pc.submit(qs, msgs, dispatch)
		// The next pull goes out at once. It does not yield to the worker just woken
		// first: runtime.Gosched puts this goroutine on the global run queue, behind every
		// goroutine runnable on this P, and over a network the pull's turnaround (its
		// reply to the next pull parked at the broker) then took hundreds of µs. The
		// worker runs as soon as the pull waits for its reply.
		return pullStep{delay: o.PullInterval}
	case mq.PullNoNewMsg, mq.PullNoMatchedMsg:
		qs.next = res.NextBeginOffset
		if pq.Count() == 0 { // correctTagsOffset
			pc.updateOffset(qs, res.NextBeginOffset, true)
		}
		return pullStep{}
	case mq.PullOffsetIllegal:
		o.Logger.Warn("consumer: offset illegal", "queue", qs.queue, "offset", qs.next, "next", res.NextBeginOffset)
		qs.next = res.NextBeginOffset
		pq.SetDropped(true)
		next := res.NextBeginOffset
		pc.after(o.OffsetIllegalDelay, func() {
			pc.offsets.Update(qs.queue, next, false)
			ctx, cancel := o.callCtx(pc.ctx)
			defer cancel()
			if err := pc.offsets.Persist(ctx, []mq.MessageQueue{qs.queue}); err != nil && !quiet(pc.ctx, err) {
				o.Logger.Warn("consumer: persist offset", "queue", qs.queue, "err", err)
			}
			pc.removeQueue(qs, -1)
		})
		return pullStep{end: true}
	}
	return pullStep{delay: o.PullErrorDelay}
}

// submit hands pulled messages to the consume service.
func (pc *PushConsumer) submit(qs *queueState, msgs []*Message, dispatch bool) {
	if pc.isOrderly() {
		if dispatch {
			pc.submitOrderly(qs, 0)
		}
		return
	}
	pc.submitChunks(qs, msgs)
}

// delivered returns pointers to pulled messages as listeners get them: a message of the
// group's retry topic carries its original topic again (RocketMQ's resetRetryAndNamespace).
func delivered(pulled []mq.MessageExt, group string) []*Message {
	msgs := make([]*Message, len(pulled))
	retry := mq.RetryTopic(group)
	for i := range pulled {
		m := &pulled[i]
		if m.Topic == retry {
			if t := m.Properties[mq.PropertyRetryTopic]; t != "" {
				m.Topic = t
			}
		}
		msgs[i] = m
	}
	return msgs
}
