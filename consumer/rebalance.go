package consumer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/edgemq/edgemq/edge"
)

// queueState is one assigned queue: its cache, its pull loop's position and, for orderly
// consumption, its lock and the mutex that lets one goroutine consume it at a time.
type queueState struct {
	mq     edge.MessageQueue
	expr   string
	pq     *ProcessQueue
	ctx    context.Context // ends the pull loop's long poll
	cancel context.CancelFunc
	stop   <-chan struct{}

	next        int64 // next pull offset; owned by the pull loop
	lockedFirst bool  // orderly: the first pull after locking has re-read the offset

	consumeMu sync.Mutex // orderly: one consume run per queue at a time
}

func (pc *PushConsumer) snapshot() []*queueState {
	pc.qmu.Lock()
	defer pc.qmu.Unlock()
	return slices.Collect(maps.Values(pc.queues))
}

// assigned returns the queues assigned now, sorted.
func (pc *PushConsumer) assigned() []edge.MessageQueue {
	pc.qmu.Lock()
	defer pc.qmu.Unlock()
	return slices.SortedFunc(maps.Keys(pc.queues), compareMQ)
}

func compareMQ(a, b edge.MessageQueue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.QueueID) - int(b.QueueID)
}

// rebalance reassigns the queues of every subscribed topic (RocketMQ's
// RebalanceImpl.doRebalance).
func (pc *PushConsumer) rebalance() {
	pc.rbMu.Lock()
	defer pc.rbMu.Unlock()
	o := &pc.opts
	for topic, expr := range pc.subscriptions() {
		cfg, ok := pc.b.Topic(topic)
		if !ok {
			continue
		}
		all := make([]edge.MessageQueue, 0, cfg.ReadQueues)
		for q := int32(0); q < cfg.ReadQueues; q++ {
			all = append(all, edge.MessageQueue{Topic: topic, QueueID: q})
		}
		mine := all
		if o.Model == edge.Clustering {
			cids, err := pc.b.ConsumerIDs(o.Group)
			if err != nil || len(cids) == 0 || len(all) == 0 {
				if err != nil {
					o.Logger.Warn("consumer: rebalance: consumer ids", "group", o.Group, "err", err)
				}
				continue
			}
			mine, err = o.Strategy.Allocate(o.Group, o.ClientID, all, cids)
			if err != nil {
				o.Logger.Warn("consumer: rebalance: allocate", "group", o.Group, "topic", topic, "err", err)
				continue
			}
		}
		pc.updateQueues(topic, expr, mine)
	}
}

// updateQueues makes mine the assigned queues of topic: removed queues persist their offset,
// drop their cache and (orderly) unlock; new queues get a cache, an offset and a pull loop.
// A queue whose pull loop has not run for PullExpiry is restarted the same way.
func (pc *PushConsumer) updateQueues(topic, expr string, mine []edge.MessageQueue) {
	want := map[edge.MessageQueue]bool{}
	for _, mq := range mine {
		want[mq] = true
	}
	for _, qs := range pc.snapshot() {
		if qs.mq.Topic != topic {
			continue
		}
		switch {
		case !want[qs.mq]:
			pc.removeQueue(qs)
		case qs.pq.IsPullExpired(pc.opts.PullExpiry):
			// Its pull loop has not run for PullExpiry: drop it and start the queue afresh
			// below, as RocketMQ's updateProcessQueueTableInRebalance does.
			pc.opts.Logger.Warn("consumer: queue not pulled for too long: restarting it", "queue", qs.mq, "expiry", pc.opts.PullExpiry)
			pc.removeQueue(qs)
		}
	}
	orderlyLock := pc.isOrderly() && pc.opts.Model == edge.Clustering
	for _, mq := range mine {
		pc.qmu.Lock()
		_, ok := pc.queues[mq]
		pc.qmu.Unlock()
		if ok {
			continue
		}
		if orderlyLock && !pc.lockOne(mq, nil) {
			continue // someone else still holds it; the next rebalance tries again
		}
		if pc.opts.Model == edge.Clustering {
			pc.offsets.Remove(mq) // a stale memory offset of an earlier assignment
		}
		off, err := pc.computePullFromWhere(mq)
		if err != nil {
			pc.opts.Logger.Warn("consumer: rebalance: start offset", "queue", mq, "err", err)
			continue
		}
		pc.addQueue(mq, expr, off)
	}
}

func (pc *PushConsumer) addQueue(mq edge.MessageQueue, expr string, off int64) {
	ctx, cancel := context.WithCancel(pc.ctx)
	qs := &queueState{mq: mq, expr: expr, pq: NewProcessQueueWithClock(pc.opts.Clock), ctx: ctx, cancel: cancel, stop: ctx.Done(), next: off}
	if pc.isOrderly() {
		qs.pq.SetLocked(true) // locked at the broker just before
	}
	pc.qmu.Lock()
	pc.queues[mq] = qs
	pc.qmu.Unlock()
	pc.wg.Add(1)
	go pc.pullLoop(qs)
}

// removeQueue takes qs out of the table (if it is still there): its pull loop stops, its
// cache is dropped, its offset persisted and forgotten, and an orderly queue is unlocked once
// its consume run is over.
func (pc *PushConsumer) removeQueue(qs *queueState) {
	pc.qmu.Lock()
	if pc.queues[qs.mq] != qs {
		pc.qmu.Unlock()
		return
	}
	delete(pc.queues, qs.mq)
	pc.qmu.Unlock()
	qs.pq.SetDropped(true)
	qs.cancel()
	if err := pc.offsets.Persist([]edge.MessageQueue{qs.mq}); err != nil {
		pc.opts.Logger.Warn("consumer: persist offset", "queue", qs.mq, "err", err)
	}
	if pc.opts.Model == edge.Clustering { // a local store keeps its offsets (RocketMQ's removeOffset is a no-op there)
		pc.offsets.Remove(qs.mq)
	}
	if pc.isOrderly() && pc.opts.Model == edge.Clustering {
		qs.consumeMu.Lock() // wait for the batch in flight
		err := pc.b.UnlockQueues(pc.opts.Group, pc.opts.ClientID, []edge.MessageQueue{qs.mq})
		qs.consumeMu.Unlock()
		if err != nil {
			pc.opts.Logger.Warn("consumer: unlock", "queue", qs.mq, "err", err)
		}
	}
}

// computePullFromWhere returns where a newly assigned queue starts: the stored offset, else
// Options.FromWhere (RocketMQ's computePullFromWhere).
func (pc *PushConsumer) computePullFromWhere(mq edge.MessageQueue) (int64, error) {
	return startOffset(pc.b, pc.offsets, &pc.opts, mq)
}

// startOffset is computePullFromWhere for any consumer: mq's offset in offsets' store, else
// where o.FromWhere says. The PullConsumer uses it too.
func startOffset(b Broker, offsets OffsetStore, o *Options, mq edge.MessageQueue) (int64, error) {
	off, err := offsets.Read(mq, ReadFromStore)
	if err != nil {
		return 0, err
	}
	if off >= 0 {
		return off, nil
	}
	retry := strings.HasPrefix(mq.Topic, edge.RetryPrefix)
	switch o.FromWhere {
	case ConsumeFromFirstOffset:
		return b.MinOffset(mq.Topic, mq.QueueID)
	case ConsumeFromTimestamp:
		if retry {
			return b.MaxOffset(mq.Topic, mq.QueueID)
		}
		return b.SearchOffset(mq.Topic, mq.QueueID, o.ConsumeTimestamp)
	default:
		if retry {
			return 0, nil
		}
		return b.MaxOffset(mq.Topic, mq.QueueID)
	}
}

// lockOne locks mq at the broker; with qs, it records the outcome on qs.
func (pc *PushConsumer) lockOne(mq edge.MessageQueue, qs *queueState) bool {
	got, err := pc.b.LockQueues(pc.opts.Group, pc.opts.ClientID, []edge.MessageQueue{mq})
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
	mqs := make([]edge.MessageQueue, len(qss))
	for i, qs := range qss {
		mqs[i] = qs.mq
	}
	got, err := pc.b.LockQueues(pc.opts.Group, pc.opts.ClientID, mqs)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			pc.opts.Logger.Warn("consumer: lock queues", "group", pc.opts.Group, "err", err)
		}
		return
	}
	ok := map[edge.MessageQueue]bool{}
	for _, mq := range got {
		ok[mq] = true
	}
	for _, qs := range qss {
		qs.pq.SetLocked(ok[qs.mq])
	}
}
