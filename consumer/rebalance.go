package consumer

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// orderlyUnlockWait is how long a rebalance waits for an orderly queue's consume run to end
// before it unlocks the queue at the broker (RocketMQ's tryLock(1000 ms) in
// removeUnnecessaryMessageQueue). A run still going after it keeps the queue, dropped, until
// the run ends, which triggers a rebalance that finishes the removal.
const orderlyUnlockWait = time.Second

// queueState is one assigned queue: its cache, its pull loop's position and, for orderly
// consumption, its lock and the consume lock that lets one goroutine consume it at a time.
type queueState struct {
	queue  mq.MessageQueue
	expr   string
	pq     *processQueue
	ctx    context.Context // ends the pull loop's long poll
	cancel context.CancelFunc
	stop   <-chan struct{}
	pulled chan struct{} // closed when the pull loop has ended

	next        int64 // next pull offset; owned by the pull loop (and the chain it starts)
	lockedFirst bool  // orderly: the first pull after locking has re-read the offset

	// A chain of async pulls (pullChain): its callback, the start of its pull in flight,
	// and where it hands the queue back to the pull loop.
	chained func(mq.PullResult, error)
	begin   time.Time
	back    chan pullStep

	// settleMu makes an offset update of the queue's pull loop or consume runs
	// (updateOffset) and the queue's drop one after the other: once removeQueue has marked
	// the queue dropped, they no longer move its offset.
	settleMu sync.Mutex
	resetTo  int64 // the offset a reset moves the queue to when it is removed, or -1; settleMu

	// consumeLock holds a token while an orderly consume run of the queue goes on: a
	// channel, so that a rebalance can wait for it for a bounded time.
	consumeLock chan struct{}
}

// lockConsume waits for the queue's consume lock.
func (qs *queueState) lockConsume() { qs.consumeLock <- struct{}{} }

// tryLockConsume waits at most d for the queue's consume lock; false if it did not get it.
func (qs *queueState) tryLockConsume(d time.Duration) bool {
	select {
	case qs.consumeLock <- struct{}{}:
		return true
	default:
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case qs.consumeLock <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (qs *queueState) unlockConsume() { <-qs.consumeLock }

func (pc *PushConsumer) snapshot() []*queueState {
	pc.qmu.Lock()
	defer pc.qmu.Unlock()
	return slices.Collect(maps.Values(pc.queues))
}

// assigned returns the queues assigned now, sorted.
func (pc *PushConsumer) assigned() []mq.MessageQueue {
	pc.qmu.Lock()
	defer pc.qmu.Unlock()
	return slices.SortedFunc(maps.Keys(pc.queues), mq.CompareQueues)
}

// rebalance reassigns the queues of every subscribed topic (RocketMQ's
// RebalanceImpl.doRebalance).
func (pc *PushConsumer) rebalance() {
	pc.rbMu.Lock()
	defer pc.rbMu.Unlock()
	rebalance(pc.ctx, pc.b, &pc.opts, pc.subscriptions(), pc.updateQueues)
}

// updateQueues makes mine the assigned queues of topic: removed queues persist their offset,
// drop their cache and (orderly) unlock; new queues get a cache, an offset and a pull loop.
// A queue whose pull loop has not run for PullExpiry is restarted the same way.
func (pc *PushConsumer) updateQueues(topic, expr string, mine []mq.MessageQueue) {
	want := map[mq.MessageQueue]bool{}
	for _, queue := range mine {
		want[queue] = true
	}
	for _, qs := range pc.snapshot() {
		if qs.queue.Topic != topic {
			continue
		}
		switch {
		case !want[qs.queue]:
			pc.removeQueue(qs, -1)
		case qs.pq.Dropped():
			pc.removeQueue(qs, -1) // left by an earlier removal that could not finish: retried
		case qs.pq.IsPullExpired(pc.opts.PullExpiry):
			// Its pull loop has not run for PullExpiry: drop it and start the queue afresh
			// below, as RocketMQ's updateProcessQueueTableInRebalance does.
			pc.opts.Logger.Warn("consumer: queue not pulled for too long: restarting it", "queue", qs.queue, "expiry", pc.opts.PullExpiry)
			pc.removeQueue(qs, -1)
		}
	}
	for _, queue := range mine {
		pc.qmu.Lock()
		_, ok := pc.queues[queue]
		pc.qmu.Unlock()
		if ok {
			continue // assigned, or still being removed: the next rebalance tries again
		}
		if pc.lockQueues() && !pc.lockOne(queue, nil) {
			continue // someone else still holds it; the next rebalance tries again
		}
		if pc.opts.Model == mq.Clustering {
			pc.offsets.Remove(queue) // a stale memory offset of an earlier assignment
		}
		off, err := pc.computePullFromWhere(queue)
		if err != nil {
			if !quiet(pc.ctx, err) {
				pc.opts.Logger.Warn("consumer: rebalance: start offset", "queue", queue, "err", err)
			}
			continue
		}
		pc.addQueue(queue, expr, off)
	}
}

func (pc *PushConsumer) addQueue(queue mq.MessageQueue, expr string, off int64) {
	ctx, cancel := context.WithCancel(pc.ctx)
	qs := &queueState{queue: queue, expr: expr, pq: newProcessQueue(), ctx: ctx, cancel: cancel, stop: ctx.Done(),
		pulled: make(chan struct{}), next: off, consumeLock: make(chan struct{}, 1), resetTo: -1}
	if pc.isOrderly() {
		qs.pq.SetLocked(true) // locked at the broker just before
	}
	pc.qmu.Lock()
	pc.queues[queue] = qs
	pc.qmu.Unlock()
	pc.wg.Add(1)
	go pc.pullLoop(qs)
}

// removeQueue takes qs away: its pull loop stops, its cache is dropped, its offset (set to
// to first, unless to is -1: an offset reset) persisted and forgotten, and it leaves the
// table. An orderly queue locked at the broker is unlocked
// once its consume run is over: a hung listener must not hold up the service loop, whose
// heartbeats keep the consumer in its group, so a run that goes on for orderlyUnlockWait
// keeps the queue in the table, dropped and still locked (lockAll renews it: the run
// consumes it yet), and the run's end triggers a rebalance that tries again, without
// waiting. A queue assigned to this consumer again meanwhile is added back once removed.
//
// Its broker calls are bounded by CallTimeout but not ended by Shutdown, which waits for the
// service loop: a removal Shutdown interrupts would otherwise take the queue out of the
// table without persisting its offset or unlocking it, and Shutdown, which does both for the
// queues in the table, would skip it.
func (pc *PushConsumer) removeQueue(qs *queueState, to int64) {
	pc.qmu.Lock()
	cur := pc.queues[qs.queue]
	pc.qmu.Unlock()
	if cur != qs {
		return
	}
	again := qs.pq.Dropped() // an earlier removal waited already (or OFFSET_ILLEGAL dropped it)
	qs.settleMu.Lock()
	qs.pq.SetDropped(true)
	if to >= 0 {
		qs.resetTo = to // kept for a removal tried again
	}
	to = qs.resetTo
	qs.settleMu.Unlock()
	qs.cancel()
	// A pull in flight carries the queue's offset as it was, as its commit: the removal
	// waits for the pull loop to end (at once, its context ended) so that the broker gets
	// that commit before the offset the removal persists, not after it.
	pc.waitPulled(qs)
	locked := pc.lockQueues()
	if locked {
		wait := orderlyUnlockWait
		if again {
			wait = 0
		}
		if !qs.tryLockConsume(wait) {
			pc.opts.Logger.Warn("consumer: orderly queue still consuming: unlock it when the run ends", "queue", qs.queue)
			return
		}
	}
	pc.qmu.Lock()
	if pc.queues[qs.queue] == qs {
		delete(pc.queues, qs.queue)
	}
	pc.qmu.Unlock()
	if to >= 0 {
		pc.offsets.Update(qs.queue, to, false)
	}
	ctx, cancel := pc.opts.callCtx(context.Background())
	defer cancel()
	if err := pc.offsets.Persist(ctx, []mq.MessageQueue{qs.queue}); err != nil {
		pc.opts.Logger.Warn("consumer: persist offset", "queue", qs.queue, "err", err)
	}
	if pc.opts.Model == mq.Clustering { // a local store keeps its offsets (RocketMQ's removeOffset is a no-op there)
		pc.offsets.Remove(qs.queue)
	}
	if locked {
		err := pc.b.UnlockQueues(ctx, pc.opts.Group, pc.opts.ClientID, []mq.MessageQueue{qs.queue})
		qs.unlockConsume()
		if err != nil {
			pc.opts.Logger.Warn("consumer: unlock", "queue", qs.queue, "err", err)
		}
	}
}

// waitPulled waits for qs's pull loop to end, CallTimeout at most.
func (pc *PushConsumer) waitPulled(qs *queueState) {
	t := time.NewTimer(pc.opts.CallTimeout)
	defer t.Stop()
	select {
	case <-qs.pulled:
	case <-t.C:
		pc.opts.Logger.Warn("consumer: removed queue's pull loop has not ended", "queue", qs.queue)
	}
}

// computePullFromWhere returns where a newly assigned queue starts: the stored offset, else
// Options.FromWhere (RocketMQ's computePullFromWhere).
func (pc *PushConsumer) computePullFromWhere(queue mq.MessageQueue) (int64, error) {
	return startOffset(pc.ctx, pc.b, pc.offsets, &pc.opts, queue)
}

// updateOffset moves qs's offset to off (see offsetStore.Update) unless the queue was
// dropped: a pull or a consume run that ends after removeQueue dropped the queue must not
// move the offset that the removal persists (an offset reset's, say), nor the one of the
// queue's next assignment.
func (pc *PushConsumer) updateOffset(qs *queueState, off int64, increaseOnly bool) {
	qs.settleMu.Lock()
	defer qs.settleMu.Unlock()
	if !qs.pq.Dropped() {
		pc.offsets.Update(qs.queue, off, increaseOnly)
	}
}

// lockOne locks queue at the broker; with qs, it records the outcome on qs.
func (pc *PushConsumer) lockOne(queue mq.MessageQueue, qs *queueState) bool {
	ctx, cancel := pc.opts.callCtx(pc.ctx)
	defer cancel()
	got, err := pc.b.LockQueues(ctx, pc.opts.Group, pc.opts.ClientID, []mq.MessageQueue{queue})
	ok := err == nil && len(got) == 1
	if qs != nil {
		qs.pq.SetLocked(ok)
	}
	return ok
}

// lockAll renews the broker locks of every assigned queue (RocketMQ's lockAll).
func (pc *PushConsumer) lockAll() {
	qss := pc.snapshot()
	if len(qss) == 0 {
		return
	}
	queues := make([]mq.MessageQueue, len(qss))
	for i, qs := range qss {
		queues[i] = qs.queue
	}
	ctx, cancel := pc.opts.callCtx(pc.ctx)
	defer cancel()
	got, err := pc.b.LockQueues(ctx, pc.opts.Group, pc.opts.ClientID, queues)
	if err != nil {
		if !quiet(pc.ctx, err) {
			pc.opts.Logger.Warn("consumer: lock queues", "group", pc.opts.Group, "err", err)
		}
		return
	}
	ok := map[mq.MessageQueue]bool{}
	for _, queue := range got {
		ok[queue] = true
	}
	for _, qs := range qss {
		qs.pq.SetLocked(ok[qs.queue])
	}
}
