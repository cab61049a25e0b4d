package consumer

import (
	"fmt"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// The fixed delays of RocketMQ's ConsumeMessageOrderlyService.
const (
	orderlyRelockDelay   = 10 * time.Millisecond  // locked but lock lost or expired mid-run; and resubmit after a relock
	orderlyNotLockDelay  = 100 * time.Millisecond // a run found the queue not locked
	orderlyLockFailDelay = 3 * time.Second        // the relock failed
)

// submitOrderly queues a consume run of qs after d (ConsumeMessageOrderlyService.
// submitConsumeRequestLater); a refused run is retried after SubmitRetryDelay.
func (pc *PushConsumer) submitOrderly(qs *queueState, d time.Duration) {
	if d > 0 {
		pc.after(d, func() { pc.submitOrderly(qs, 0) })
		return
	}
	if !pc.pool.submit(funcTask(func() { pc.consumeOrderly(qs) })) {
		pc.after(pc.opts.SubmitRetryDelay, func() { pc.submitOrderly(qs, 0) })
	}
}

// tryLockLaterAndReconsume relocks qs after d, then resubmits it: 10 ms later if the lock
// was got, 3 s later if not.
func (pc *PushConsumer) tryLockLaterAndReconsume(qs *queueState, d time.Duration) {
	pc.after(d, func() {
		if qs.pq.Dropped() {
			return
		}
		if pc.lockOne(qs.queue, qs) {
			pc.submitOrderly(qs, orderlyRelockDelay)
		} else {
			pc.submitOrderly(qs, orderlyLockFailDelay)
		}
	})
}

// consumeOrderly is ConsumeMessageOrderlyService.ConsumeRequest.run: it consumes qs's cache
// in offset order while the queue stays locked, for at most MaxTimeConsumeContinuously.
func (pc *PushConsumer) consumeOrderly(qs *queueState) {
	if qs.pq.Dropped() {
		return
	}
	o := &pc.opts
	clustering := o.Model == mq.Clustering
	qs.lockConsume()
	defer func() {
		qs.unlockConsume()
		if qs.pq.Dropped() && pc.lockQueues() {
			pc.rebalanceNow() // a removal may have given up waiting for this run: finish it
		}
	}()
	now := monoNow()
	if clustering && (!qs.pq.Locked() || qs.pq.isLockExpiredAt(o.LockExpiry, now)) {
		if !qs.pq.Dropped() {
			pc.tryLockLaterAndReconsume(qs, orderlyNotLockDelay)
		}
		return
	}
	// Stats and the committed offset are recorded once per settleInterval, and when the run
	// ends, rather than after every batch.
	var t consumeTally
	commit, settled := int64(-1), now
	defer func() { pc.settleOrderly(qs, &t, commit) }()
	begin := now
	for {
		if qs.pq.Dropped() {
			return
		}
		// now is the end of the last listener call: these checks measure seconds.
		if clustering && (!qs.pq.Locked() || qs.pq.isLockExpiredAt(o.LockExpiry, now)) {
			pc.tryLockLaterAndReconsume(qs, orderlyRelockDelay)
			return
		}
		if now-begin > int64(o.MaxTimeConsumeContinuously) {
			pc.submitOrderly(qs, orderlyRelockDelay)
			return
		}
		msgs := qs.pq.takeMessages(o.ConsumeMessageBatchMaxSize)
		if len(msgs) == 0 {
			return
		}
		if !pc.beginConsume() {
			qs.pq.Rollback()
			return
		}
		oc := &OrderlyContext{Queue: qs.queue, AutoCommit: true}
		var hc *HookContext // only with hooks: one allocation less per batch
		if len(o.BeforeConsume) > 0 || len(o.AfterConsume) > 0 {
			hc = &HookContext{Group: o.Group, Queue: qs.queue, Messages: msgs}
			pc.runHooks(o.BeforeConsume, hc)
		}
		start := monoNow()
		status, err := pc.callOrderly(msgs, oc)
		now = monoNow()
		elapsed := time.Duration(now - start)
		pc.endConsume()
		if err != nil {
			o.Logger.Warn("consumer: orderly listener failed", "queue", qs.queue, "err", err)
			status = SuspendCurrentQueueAMoment
		}
		if hc != nil {
			hc.Success, hc.Elapsed = status == OrderlySuccess || status == Commit, elapsed
			hc.Status = [...]string{"SUCCESS", "SUSPEND_CURRENT_QUEUE_A_MOMENT", "COMMIT", "ROLLBACK"}[status]
			pc.runHooks(o.AfterConsume, hc)
		}
		t.consumes++
		t.rt += elapsed
		off, cont := pc.processOrderly(qs, msgs, status, oc, &t)
		if off >= 0 {
			commit = off
		}
		if !cont {
			return
		}
		if now-settled >= int64(settleInterval) {
			pc.settleOrderly(qs, &t, commit)
			commit, settled = -1, now
		}
	}
}

// settleOrderly records t's stats, then sets qs's offset to commit (unless commit is -1, or
// the queue was dropped and is not locked at the broker). A queue locked at the broker is
// removed only after the run that holds its consume lock (the caller) ends, and its removal
// persists the offset: what a run consumed while a rebalance took its queue away is
// committed, so that the next owner does not consume it again.
func (pc *PushConsumer) settleOrderly(qs *queueState, t *consumeTally, commit int64) {
	pc.stats.tally(qs.queue.Topic, t)
	if commit >= 0 && (!qs.pq.Dropped() || pc.lockQueues()) {
		pc.offsets.Update(qs.queue, commit, false)
	}
}

func (pc *PushConsumer) callOrderly(msgs []*Message, oc *OrderlyContext) (st ConsumeOrderlyStatus, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = SuspendCurrentQueueAMoment, fmt.Errorf("consumer: listener panic: %v", r)
		}
	}()
	st, err = pc.orderly(pc.ctx, msgs, oc)
	if st < OrderlySuccess || st > Rollback {
		st = SuspendCurrentQueueAMoment
	}
	return st, err
}

// processOrderly is ConsumeMessageOrderlyService.processConsumeResult up to the offset,
// which it returns (-1: none) instead of storing, and reports whether the run goes on; it
// adds the results to t.
func (pc *PushConsumer) processOrderly(qs *queueState, msgs []*Message, status ConsumeOrderlyStatus, oc *OrderlyContext, t *consumeTally) (commit int64, cont bool) {
	o := &pc.opts
	suspend := time.Duration(oc.SuspendTime) * time.Millisecond
	if suspend <= 0 {
		suspend = o.SuspendCurrentQueueTime
	}
	commit, cont = -1, true
	switch {
	case oc.AutoCommit && status != SuspendCurrentQueueAMoment, !oc.AutoCommit && status == Commit:
		commit = qs.pq.Commit()
		t.ok += int64(len(msgs))
	case !oc.AutoCommit && status == OrderlySuccess:
		t.ok += int64(len(msgs))
	case !oc.AutoCommit && status == Rollback:
		qs.pq.Rollback()
		pc.submitOrderly(qs, suspend)
		cont = false
	default: // SuspendCurrentQueueAMoment
		t.failed += int64(len(msgs))
		if again := pc.checkReconsumeTimes(msgs); len(again) > 0 {
			qs.pq.MakeMessagesToConsumeAgain(again)
			pc.submitOrderly(qs, suspend)
			cont = false
		} else if oc.AutoCommit {
			commit = qs.pq.Commit()
		}
	}
	return commit, cont
}

// checkReconsumeTimes returns the messages to consume again; a message that has been
// reconsumed MaxReconsumeTimes times goes to the dead-letter queue instead (if that fails it
// is consumed again too). Reconsume counts are kept on the cached messages.
func (pc *PushConsumer) checkReconsumeTimes(msgs []*Message) []*Message {
	var again []*Message
	for _, m := range msgs {
		if m.ReconsumeTimes >= pc.opts.MaxReconsumeTimes {
			if pc.opts.Model == mq.Broadcasting {
				pc.opts.Logger.Warn("consumer: broadcasting message over max reconsume times, dropped", "topic", m.Topic, "offset", m.QueueOffset)
				continue
			}
			if pc.sendBack(m, -1) {
				continue
			}
		}
		m.ReconsumeTimes++
		again = append(again, m)
	}
	return again
}
