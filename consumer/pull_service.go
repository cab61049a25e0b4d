package consumer

import (
	"math"
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
func (pc *PushConsumer) pullLoop(qs *queueState) {
	defer pc.wg.Done()
	defer close(qs.pulled)
	var (
		delay time.Duration
		drain bool
	)
	for {
		if drain {
			if !pc.waitDrain(qs, delay) {
				return
			}
		} else if !pc.sleep(delay, qs.stop) {
			return
		}
		var ok bool
		delay, drain, ok = pc.pull(qs)
		if !ok {
			return
		}
	}
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

// pull is DefaultMQPushConsumerImpl.pullMessage with its PullCallback: it returns the delay
// before the next pull, or false when the queue's loop must end; drain reports that the
// delay is flow control, which may end early once the cache drains (waitDrain).
func (pc *PushConsumer) pull(qs *queueState) (delay time.Duration, drain, ok bool) {
	o := &pc.opts
	pq := qs.pq
	if pq.Dropped() {
		return 0, false, false
	}
	pq.SetLastPullTime(time.Now())
	if pc.paused.Load() {
		return o.SuspendedDelay, false, true
	}
	if pq.Count() > int64(o.PullThresholdForQueue) || pq.Size() > o.PullThresholdSizeForQueue {
		pc.stats.flowControl(qs.queue.Topic)
		return o.FlowControlDelay, true, true
	}
	if !pc.isOrderly() {
		if pq.MaxSpan() > o.ConsumeConcurrentlyMaxSpan {
			pc.stats.flowControl(qs.queue.Topic)
			return o.FlowControlDelay, true, true
		}
	} else if o.Model == mq.Clustering {
		if !pq.Locked() {
			return o.PullErrorDelay, false, true
		}
		if !qs.lockedFirst {
			off, err := pc.computePullFromWhere(qs.queue)
			if err != nil {
				return o.PullErrorDelay, false, true
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
	begin := time.Now()
	res, err := pc.b.Pull(qs.ctx, mq.PullRequest{
		Group: o.Group, Queue: qs.queue, Offset: qs.next,
		MaxMsgs: o.PullBatchSize, Filter: qs.expr, CommitOffset: commit,
		Suspend: true, MaxWait: o.BrokerSuspend,
	})
	if err != nil {
		if qs.ctx.Err() != nil {
			return 0, false, false
		}
		o.Logger.Warn("consumer: pull", "queue", qs.queue, "offset", qs.next, "err", err)
		return o.PullErrorDelay, false, true
	}
	if pq.Dropped() {
		return 0, false, false
	}
	switch res.Status {
	case mq.PullFound:
		qs.next = res.NextBeginOffset
		pc.stats.pulled(qs.queue.Topic, time.Now().Sub(begin), len(res.Messages))
		if len(res.Messages) == 0 {
			return 0, false, true
		}
		msgs := delivered(res.Messages, o.Group)
		dispatch := pq.PutMessages(msgs) // before the next pull: flow control counts them
		pc.submit(qs, msgs, dispatch)
		// The next pull goes out at once. It does not yield to the worker just woken
		// first: runtime.Gosched puts this goroutine on the global run queue, behind every
		// goroutine runnable on this P, and over a network the pull's turnaround (its
		// reply to the next pull parked at the broker) then took hundreds of µs. The
		// worker runs as soon as the pull waits for its reply.
		return o.PullInterval, false, true
	case mq.PullNoNewMsg, mq.PullNoMatchedMsg:
		qs.next = res.NextBeginOffset
		if pq.Count() == 0 { // correctTagsOffset
			pc.updateOffset(qs, res.NextBeginOffset, true)
		}
		return 0, false, true
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
		return 0, false, false
	}
	return o.PullErrorDelay, false, true
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
