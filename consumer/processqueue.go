package consumer

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// propertyMaxOffset is the broker's max queue offset at pull time, which RocketMQ brokers
// put on pulled messages (MessageConst.PROPERTY_MAX_OFFSET).
const propertyMaxOffset = "MAX_OFFSET"

// ProcessQueue caches the pulled, not yet consumed messages of one queue, ordered by queue
// offset (RocketMQ's ProcessQueue). Safe for concurrent use.
//
// Concurrent consumption uses PutMessages, MarkConsumeStart, RemoveMessages and
// CleanExpired. Orderly consumption uses PutMessages, then TakeMessages to move the
// lowest-offset messages into a consuming set, and Commit, Rollback or
// MakeMessagesToConsumeAgain to settle them. Count and Size cover both the cache and the
// consuming set.
type ProcessQueue struct {
	clock edge.Clock

	mu sync.Mutex // guards msgs, taken, offsetMax and consuming
	// msgs is the cache, sorted by queue offset, without duplicates.
	msgs []pqEntry
	// taken is the orderly consuming set (RocketMQ's consumingMsgOrderlyTreeMap), sorted.
	taken []pqEntry
	// offsetMax is the highest queue offset ever put (RocketMQ's queueOffsetMax).
	offsetMax int64
	// consuming: an orderly consume run is dispatched or running.
	consuming bool

	// Read without mu. count and size change only with mu held.
	count       atomic.Int64 // messages in msgs and taken
	size        atomic.Int64 // body bytes of msgs and taken
	accCount    atomic.Int64 // messages left on the broker after the last pull
	tryUnlock   atomic.Int64
	lastPull    atomic.Int64 // unix ns
	lastConsume atomic.Int64 // unix ns
	lastLock    atomic.Int64 // unix ns
	dropped     atomic.Bool
	locked      atomic.Bool
}

// pqEntry is one cached message.
type pqEntry struct {
	msg *Message
	// start is when its consumption started (MarkConsumeStart), unix ns; 0 when not started.
	start int64
}

// NewProcessQueue returns an empty ProcessQueue on the system clock.
func NewProcessQueue() *ProcessQueue { return NewProcessQueueWithClock(edge.SystemClock) }

// NewProcessQueueWithClock returns an empty ProcessQueue on clock c (nil: the system
// clock). Its pull, consume and lock times start at c.Now(), as RocketMQ's do.
func NewProcessQueueWithClock(c edge.Clock) *ProcessQueue {
	if c == nil {
		c = edge.SystemClock
	}
	pq := &ProcessQueue{clock: c}
	now := c.Now().UnixNano()
	pq.lastPull.Store(now)
	pq.lastConsume.Store(now)
	pq.lastLock.Store(now)
	return pq
}

// search returns the index of offset off in s, or where it would go, and whether it is
// there.
func search(s []pqEntry, off int64) (int, bool) {
	return slices.BinarySearchFunc(s, off, func(e pqEntry, off int64) int {
		switch {
		case e.msg.QueueOffset < off:
			return -1
		case e.msg.QueueOffset > off:
			return 1
		}
		return 0
	})
}

// insert adds e to s unless its offset is there already; it reports whether it added it.
func insert(s []pqEntry, e pqEntry) ([]pqEntry, bool) {
	off := e.msg.QueueOffset
	if n := len(s); n == 0 || s[n-1].msg.QueueOffset < off {
		return append(s, e), true // the common case: offsets arrive in order
	}
	i, found := search(s, off)
	if found {
		return s, false
	}
	return slices.Insert(s, i, e), true
}

// removeAt removes s[i], clearing the slot so the message can be collected.
func removeAt(s []pqEntry, i int) []pqEntry {
	if i == 0 {
		s[0] = pqEntry{}
		return s[1:]
	}
	return slices.Delete(s, i, i+1) // clears the vacated tail slot
}

func bodySize(m *Message) int64 { return int64(len(m.Body)) }

// PutMessages caches msgs (duplicates by queue offset, of the cache or of the orderly
// consuming set, are ignored) and reports whether an
// orderly consume run should be dispatched (true when the queue was idle and now has
// messages); it then marks the queue consuming until TakeMessages finds it empty. If the
// last message carries the broker's MAX_OFFSET property, MsgAccCount is updated from it.
func (pq *ProcessQueue) PutMessages(msgs []*Message) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	var added, bytes int64
	for _, m := range msgs {
		if _, taken := search(pq.taken, m.QueueOffset); taken {
			continue
		}
		var ok bool
		if pq.msgs, ok = insert(pq.msgs, pqEntry{msg: m}); !ok {
			continue
		}
		added++
		bytes += bodySize(m)
		pq.offsetMax = max(pq.offsetMax, m.QueueOffset)
	}
	pq.count.Add(added)
	pq.size.Add(bytes)
	dispatch := false
	if len(pq.msgs) > 0 && !pq.consuming {
		dispatch = true
		pq.consuming = true
	}
	if n := len(msgs); n > 0 {
		last := msgs[n-1]
		if v, err := strconv.ParseInt(last.Properties[propertyMaxOffset], 10, 64); err == nil && v-last.QueueOffset > 0 {
			pq.accCount.Store(v - last.QueueOffset)
		}
	}
	return dispatch
}

// RemoveMessages drops consumed msgs and returns the offset to commit: the smallest cached
// offset, or the highest offset seen + 1 once the cache is empty; -1 if nothing was cached.
// Messages not in the cache are ignored. It stamps the last consume time.
func (pq *ProcessQueue) RemoveMessages(msgs []*Message) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.lastConsume.Store(pq.clock.Now().UnixNano())
	if len(pq.msgs) == 0 {
		return -1
	}
	for _, m := range msgs {
		pq.removeLocked(m.QueueOffset)
	}
	if len(pq.msgs) > 0 {
		return pq.msgs[0].msg.QueueOffset
	}
	return pq.offsetMax + 1
}

// removeLocked drops offset off from the cache and updates count and size.
func (pq *ProcessQueue) removeLocked(off int64) {
	i, ok := search(pq.msgs, off)
	if !ok {
		return
	}
	pq.count.Add(-1)
	pq.size.Add(-bodySize(pq.msgs[i].msg))
	pq.msgs = removeAt(pq.msgs, i)
}

// TakeMessages moves up to n of the lowest-offset messages to the consuming set (orderly).
// n < 1 counts as 1. When the cache is empty it returns nothing and clears the consuming
// flag, so that the next PutMessages dispatches a new run. It stamps the last consume time.
func (pq *ProcessQueue) TakeMessages(n int) []*Message {
	n = max(n, 1)
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.lastConsume.Store(pq.clock.Now().UnixNano())
	k := min(n, len(pq.msgs))
	if k == 0 {
		pq.consuming = false
		return nil
	}
	out := make([]*Message, k)
	for i, e := range pq.msgs[:k] {
		out[i] = e.msg
		pq.taken, _ = insert(pq.taken, e)
	}
	clear(pq.msgs[:k])
	pq.msgs = pq.msgs[k:]
	return out
}

// Commit drops the consuming set and returns the offset to commit (orderly): the highest
// offset in the set + 1, or -1 when the set is empty.
func (pq *ProcessQueue) Commit() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	n := len(pq.taken)
	if n == 0 {
		return -1
	}
	next := pq.taken[n-1].msg.QueueOffset + 1
	var bytes int64
	for _, e := range pq.taken {
		bytes += bodySize(e.msg)
	}
	pq.count.Add(-int64(n))
	pq.size.Add(-bytes)
	clear(pq.taken)
	pq.taken = pq.taken[:0]
	return next
}

// Rollback puts the consuming set back (orderly).
func (pq *ProcessQueue) Rollback() {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, e := range pq.taken {
		pq.msgs, _ = insert(pq.msgs, e)
	}
	clear(pq.taken)
	pq.taken = pq.taken[:0]
}

// MakeMessagesToConsumeAgain puts msgs from the consuming set back (orderly). Messages not
// in the consuming set are ignored (RocketMQ would cache them without counting them).
func (pq *ProcessQueue) MakeMessagesToConsumeAgain(msgs []*Message) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		i, ok := search(pq.taken, m.QueueOffset)
		if !ok {
			continue
		}
		pq.msgs, _ = insert(pq.msgs, pq.taken[i])
		pq.taken = removeAt(pq.taken, i)
	}
}

// MarkConsumeStart records now as the consume start time of the cached msgs, for
// CleanExpired (RocketMQ keeps it in the CONSUME_START_TIME property). The concurrent
// consume service calls it just before a batch goes to the listener. Messages not in the
// cache are ignored.
func (pq *ProcessQueue) MarkConsumeStart(msgs []*Message) {
	now := pq.clock.Now().UnixNano()
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if i, ok := search(pq.msgs, m.QueueOffset); ok {
			pq.msgs[i].start = now
		}
	}
}

// CleanExpired sends back messages stuck in consumption (RocketMQ's cleanExpiredMsg, for
// concurrent consumption only): up to limit times, if the lowest-offset cached message started
// consuming (MarkConsumeStart) more than timeout ago, it is passed to sendBack and, once
// sendBack succeeds, removed from the cache. It stops at the first message not expired and
// at the first sendBack error, and returns how many messages it removed. sendBack is called
// without the queue's lock held. Removing a message does not commit an offset; the next
// RemoveMessages returns the advanced one.
func (pq *ProcessQueue) CleanExpired(timeout time.Duration, limit int, sendBack func(*Message) error) int {
	pq.mu.Lock()
	loop := min(len(pq.msgs), limit)
	pq.mu.Unlock()
	removed := 0
	for range loop {
		var m *Message
		now := pq.clock.Now().UnixNano()
		pq.mu.Lock()
		if len(pq.msgs) > 0 {
			if e := pq.msgs[0]; e.start != 0 && now-e.start > int64(timeout) {
				m = e.msg
			}
		}
		pq.mu.Unlock()
		if m == nil || sendBack(m) != nil {
			break
		}
		pq.mu.Lock()
		if len(pq.msgs) > 0 && pq.msgs[0].msg.QueueOffset == m.QueueOffset {
			pq.removeLocked(m.QueueOffset)
			pq.lastConsume.Store(now)
			removed++
		}
		pq.mu.Unlock()
	}
	return removed
}

// Count returns the number of cached messages, including the orderly consuming set.
func (pq *ProcessQueue) Count() int64 { return pq.count.Load() }

// Size returns the body bytes of the cached messages, including the orderly consuming set.
func (pq *ProcessQueue) Size() int64 { return pq.size.Load() }

// MaxSpan returns the highest minus the lowest cached offset (not counting the orderly
// consuming set), or 0 when the cache is empty.
func (pq *ProcessQueue) MaxSpan() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if n := len(pq.msgs); n > 0 {
		return pq.msgs[n-1].msg.QueueOffset - pq.msgs[0].msg.QueueOffset
	}
	return 0
}

// QueueOffsetMax returns the highest queue offset ever put, or 0.
func (pq *ProcessQueue) QueueOffsetMax() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.offsetMax
}

// Consuming reports whether an orderly consume run is dispatched or running.
func (pq *ProcessQueue) Consuming() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return pq.consuming
}

// HasCached reports whether the cache (not counting the consuming set) holds messages.
func (pq *ProcessQueue) HasCached() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return len(pq.msgs) > 0
}

// Clear empties the cache and the consuming set and resets Count, Size and QueueOffsetMax.
func (pq *ProcessQueue) Clear() {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.msgs, pq.taken = nil, nil
	pq.offsetMax = 0
	pq.count.Store(0)
	pq.size.Store(0)
}

// Dropped reports whether the queue was taken away from this consumer; its messages are
// then no longer consumed and its offsets no longer committed.
func (pq *ProcessQueue) Dropped() bool { return pq.dropped.Load() }

// SetDropped marks the queue dropped or not.
func (pq *ProcessQueue) SetDropped(v bool) { pq.dropped.Store(v) }

// Locked reports whether this consumer holds the queue's broker lock (orderly).
func (pq *ProcessQueue) Locked() bool { return pq.locked.Load() }

// SetLocked records whether this consumer holds the queue's broker lock; true also stamps
// the last lock time with the clock's now, as every RocketMQ lock success does.
func (pq *ProcessQueue) SetLocked(v bool) {
	if v {
		pq.lastLock.Store(pq.clock.Now().UnixNano())
	}
	pq.locked.Store(v)
}

// LastPullTime returns when the queue was last pulled.
func (pq *ProcessQueue) LastPullTime() time.Time { return time.Unix(0, pq.lastPull.Load()) }

// SetLastPullTime records when the queue was last pulled.
func (pq *ProcessQueue) SetLastPullTime(t time.Time) { pq.lastPull.Store(t.UnixNano()) }

// LastConsumeTime returns when messages were last removed or taken.
func (pq *ProcessQueue) LastConsumeTime() time.Time { return time.Unix(0, pq.lastConsume.Load()) }

// LastLockTime returns when the queue's broker lock was last obtained.
func (pq *ProcessQueue) LastLockTime() time.Time { return time.Unix(0, pq.lastLock.Load()) }

// SetLastLockTime records when the queue's broker lock was last obtained.
func (pq *ProcessQueue) SetLastLockTime(t time.Time) { pq.lastLock.Store(t.UnixNano()) }

// IsPullExpired reports whether the queue has not been pulled for more than expiry
// (Options.PullExpiry).
func (pq *ProcessQueue) IsPullExpired(expiry time.Duration) bool {
	return pq.clock.Now().UnixNano()-pq.lastPull.Load() > int64(expiry)
}

// IsLockExpired reports whether the queue's broker lock is older than expiry
// (Options.LockExpiry).
func (pq *ProcessQueue) IsLockExpired(expiry time.Duration) bool {
	return pq.clock.Now().UnixNano()-pq.lastLock.Load() > int64(expiry)
}

// MsgAccCount returns how many messages the broker held beyond the last pulled one, from
// the MAX_OFFSET property or SetMsgAccCount (RocketMQ's msgAccCnt, for stats).
func (pq *ProcessQueue) MsgAccCount() int64 { return pq.accCount.Load() }

// SetMsgAccCount records how many messages the broker holds beyond the last pulled one.
func (pq *ProcessQueue) SetMsgAccCount(n int64) { pq.accCount.Store(n) }

// TryUnlockTimes returns how often unlocking the queue was put off because it was
// consuming (orderly).
func (pq *ProcessQueue) TryUnlockTimes() int64 { return pq.tryUnlock.Load() }

// IncTryUnlockTimes counts one put-off unlock.
func (pq *ProcessQueue) IncTryUnlockTimes() { pq.tryUnlock.Add(1) }
