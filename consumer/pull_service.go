package consumer

import (
	"time"

	"github.com/edgemq/edgemq/edge"
)

// pullLoop pulls one queue until the queue is removed or the consumer stops (the seeds'
// PullMessageService with one request per queue: each pull schedules the next).
func (pc *PushConsumer) pullLoop(qs *queueState) {
	defer pc.wg.Done()
	var delay time.Duration
	for {
		if !pc.sleep(delay, qs.stop) {
			return
		}
		var ok bool
		delay, ok = pc.pullOnce(qs)
		if !ok {
			return
		}
	}
}

// pullOnce is DefaultMQPushConsumerImpl.pullMessage with its PullCallback: it returns the
// delay before the next pull, or false when the queue's loop must end.
func (pc *PushConsumer) pullOnce(qs *queueState) (time.Duration, bool) {
	o := &pc.opts
	pq := qs.pq
	if pq.Dropped() {
		return 0, false
	}
	pq.SetLastPullTime(o.Clock.Now())
	if pc.paused.Load() {
		return o.SuspendedDelay, true
	}
	if pq.Count() > int64(o.PullThresholdForQueue) || pq.Size() > o.PullThresholdSizeForQueue {
		pc.stats.flowControl(qs.mq.Topic)
		return o.FlowControlDelay, true
	}
	if !pc.isOrderly() {
		if pq.MaxSpan() > o.ConsumeConcurrentlyMaxSpan {
			pc.stats.flowControl(qs.mq.Topic)
			return o.FlowControlDelay, true
		}
	} else if o.Model == edge.Clustering {
		if !pq.Locked() {
			return o.PullErrorDelay, true
		}
		if !qs.lockedFirst {
			off, err := pc.computePullFromWhere(qs.mq)
			if err != nil {
				return o.PullErrorDelay, true
			}
			qs.lockedFirst = true
			qs.next = off
		}
	}
	var commit int64
	if o.Model == edge.Clustering {
		if c, err := pc.offsets.Read(qs.mq, ReadFromMemory); err == nil && c > 0 {
			commit = c
		}
	}
	begin := o.Clock.Now()
	res, err := pc.b.Pull(qs.ctx, edge.PullRequest{
		Group: o.Group, Topic: qs.mq.Topic, QueueID: qs.mq.QueueID, Offset: qs.next,
		MaxMsgs: o.PullBatchSize, Filter: qs.expr, CommitOffset: commit,
		Suspend: true, MaxWait: o.BrokerSuspend,
	})
	if err != nil {
		if qs.ctx.Err() != nil {
			return 0, false
		}
		o.Logger.Warn("consumer: pull", "queue", qs.mq, "offset", qs.next, "err", err)
		return o.PullErrorDelay, true
	}
	if pq.Dropped() {
		return 0, false
	}
	switch res.Status {
	case edge.PullFound:
		qs.next = res.NextBeginOffset
		pc.stats.pulled(qs.mq.Topic, o.Clock.Now().Sub(begin), len(res.Messages))
		if len(res.Messages) == 0 {
			return 0, true
		}
		msgs := make([]*Message, len(res.Messages))
		retry := edge.RetryTopic(o.Group)
		for i := range res.Messages {
			m := &res.Messages[i]
			if m.Topic == retry {
				if t := m.Properties[edge.PropertyRetryTopic]; t != "" {
					m.Topic = t // RocketMQ's resetRetryAndNamespace
				}
			}
			msgs[i] = m
		}
		dispatch := pq.PutMessages(msgs)
		pc.submit(qs, msgs, dispatch)
		return o.PullInterval, true
	case edge.PullNoNewMsg, edge.PullNoMatchedMsg:
		qs.next = res.NextBeginOffset
		if pq.Count() == 0 { // correctTagsOffset
			pc.offsets.Update(qs.mq, res.NextBeginOffset, true)
		}
		return 0, true
	case edge.PullOffsetIllegal:
		o.Logger.Warn("consumer: offset illegal", "queue", qs.mq, "offset", qs.next, "next", res.NextBeginOffset)
		qs.next = res.NextBeginOffset
		pq.SetDropped(true)
		next := res.NextBeginOffset
		pc.after(o.OffsetIllegalDelay, func() {
			pc.offsets.Update(qs.mq, next, false)
			if err := pc.offsets.Persist([]edge.MessageQueue{qs.mq}); err != nil {
				o.Logger.Warn("consumer: persist offset", "queue", qs.mq, "err", err)
			}
			pc.removeQueue(qs)
		})
		return 0, false
	}
	return o.PullErrorDelay, true
}

// submit hands pulled messages to the consume service.
func (pc *PushConsumer) submit(qs *queueState, msgs []*Message, dispatch bool) {
	if pc.isOrderly() {
		if dispatch {
			pc.submitOrderly(qs, 0)
		}
		return
	}
	n := pc.opts.ConsumeMessageBatchMaxSize
	for i := 0; i < len(msgs); i += n {
		pc.submitConcurrently(qs, msgs[i:min(i+n, len(msgs))])
	}
}
