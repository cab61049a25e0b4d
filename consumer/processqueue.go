package consumer

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// processQueue caches the pulled, not yet consumed messages of one queue, ordered by queue
// offset (RocketMQ's ProcessQueue). Safe for concurrent use.
//
// Concurrent consumption uses PutMessages, MarkConsumeStart, RemoveMessages and
// CleanExpired. Orderly consumption uses PutMessages, then TakeMessages to move the
// lowest-offset messages into a consuming set, and Commit, Rollback or
// MakeMessagesToConsumeAgain to settle them. Count and Size cover both the cache and the
// consuming set.
type processQueue struct {
	mu sync.Mutex // guards msgs, dead, taken, offsetMax and consuming
	// msgs is the cache, sorted by queue offset, without duplicates. Concurrent consumption
	// removes messages out of order: a message removed from the middle leaves a tombstone
	// (msg nil) instead of shifting the rest, so that a removal costs O(log n), not O(n).
	// The first and the last entry are never tombstones, so msgs is empty exactly when no
	// message is cached; dead counts the tombstones, which are compacted away once they
	// outnumber the messages.
	msgs []pqEntry
	dead int
	// buf is the array msgs was last grown into, from its start: messages removed from the
	// front of msgs leave room there, which slideLocked reuses rather than growing a new
	// array each time msgs reaches the array's end.
	buf []pqEntry
	// taken is the orderly consuming set (RocketMQ's consumingMsgOrderlyTreeMap), sorted.
	taken []pqEntry
	// offsetMax is the highest queue offset ever put (RocketMQ's queueOffsetMax).
	offsetMax int64
	// consuming: an orderly consume run is dispatched or running.
	consuming bool

	// Read without mu. count and size change only with mu held.
	count    atomic.Int64 // messages in msgs and taken
	size     atomic.Int64 // body bytes of msgs and taken
	lastPull atomic.Int64 // monoNow
	lastLock atomic.Int64 // monoNow
	dropped  atomic.Bool
	locked   atomic.Bool

	// A pull loop held back by flow control waits on drain until Count is at most
	// drainCount, Size at most drainSize and MaxSpan at most drainSpan (armDrain);
	// drainCount -1: nobody waits.
	drain      chan struct{} // capacity 1
	drainCount atomic.Int64
	drainSize  atomic.Int64
	drainSpan  atomic.Int64
}

// pqEntry is one cached message, or in msgs a tombstone of a removed one (msg nil).
type pqEntry struct {
	msg *Message
	off int64 // msg's queue offset, kept in tombstones for the binary search
	// start is when its consumption started (markConsumeStart), on monoNow's clock; 0 when
	// not started.
	start int64
	// chunk is the pool task its consumption started in, if any (concurrent consumption).
	chunk *chunk
}

// newProcessQueue returns an empty processQueue. Its pull and lock times start
// now, as RocketMQ's do.
func newProcessQueue() *processQueue {
	pq := &processQueue{drain: make(chan struct{}, 1)}
	pq.drainCount.Store(-1)
	now := monoNow()
	pq.lastPull.Store(now)
	pq.lastLock.Store(now)
	return pq
}

// search returns the index of offset off in s, or where it would go, and whether it is
// there. Queue offsets are dense, and tombstones keep their places, so the index is
// usually off minus the first offset: that is tried before a binary search.
func search(s []pqEntry, off int64) (int, bool) {
	if n := len(s); n > 0 {
		if d := off - s[0].off; d >= 0 && d < int64(n) && s[d].off == off {
			return int(d), true
		}
	}
	lo, hi := 0, len(s)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if s[h].off < off {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo, lo < len(s) && s[lo].off == off
}

// entry returns the cache entry of m.
func entry(m *Message) pqEntry { return pqEntry{msg: m, off: m.QueueOffset} }

// insert adds e to s unless its offset is there already; it reports whether it added it.
// s has no tombstones (the orderly consuming set).
func insert(s []pqEntry, e pqEntry) ([]pqEntry, bool) {
	off := e.off
	if n := len(s); n == 0 || s[n-1].off < off {
		return append(s, e), true // the common case: offsets arrive in order
	}
	i, found := search(s, off)
	if found {
		return s, false
	}
	return slices.Insert(s, i, e), true
}

// insertLocked adds e to the cache unless a message of its offset is there already (a
// tombstone of its offset takes it); it reports whether it added it.
func (pq *processQueue) insertLocked(e pqEntry) bool {
	off := e.off
	if n := len(pq.msgs); n == 0 || pq.msgs[n-1].off < off {
		if n == cap(pq.msgs) {
			pq.slideLocked()
		}
		pq.msgs = append(pq.msgs, e) // the common case: offsets arrive in order
		return true
	}
	i, found := search(pq.msgs, off)
	if !found {
		pq.msgs = slices.Insert(pq.msgs, i, e)
		return true
	}
	if pq.msgs[i].msg != nil {
		return false
	}
	pq.msgs[i] = e // inside the cache: ends are never tombstones
	pq.dead--
	return true
}

// minCacheCap is the least room slideLocked gives the cache.
const minCacheCap = 32

// slideLocked makes room after msgs, which ends at its array's end: when msgs fills at most
// half of buf (the rest freed by removals from its front), it moves to buf's front; else it
// moves to a new buf twice its length. A consumer that keeps up then reuses one array
// instead of growing a new one every few pulls.
func (pq *processQueue) slideLocked() {
	n := len(pq.msgs)
	if c := cap(pq.buf); c > 0 && n <= c/2 && (n == 0 || sameArray(pq.buf, pq.msgs)) {
		copy(pq.buf, pq.msgs)
		clear(pq.buf[n:]) // the old places, copied: no message is held twice
		pq.msgs = pq.buf[:n]
		return
	}
	nb := make([]pqEntry, max(2*n, minCacheCap))
	copy(nb, pq.msgs)
	pq.buf, pq.msgs = nb, nb[:n]
}

// sameArray reports whether a and b, both with capacity, end at the same element of one
// array.
func sameArray(a, b []pqEntry) bool {
	return &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// removeAtLocked turns msgs[i] into a tombstone, then drops tombstones from both ends and,
// when they outnumber the messages, from everywhere.
func (pq *processQueue) removeAtLocked(i int) {
	pq.msgs[i] = pqEntry{off: pq.msgs[i].off} // lets the message be collected
	pq.dead++
	s := pq.msgs
	for len(s) > 0 && s[0].msg == nil {
		s[0] = pqEntry{}
		s = s[1:]
		pq.dead--
	}
	for n := len(s); n > 0 && s[n-1].msg == nil; n-- {
		s = s[:n-1]
		pq.dead--
	}
	pq.msgs = s
	if pq.dead > 0 && pq.dead >= len(pq.msgs)/2 {
		pq.msgs = slices.DeleteFunc(pq.msgs, func(e pqEntry) bool { return e.msg == nil })
		pq.dead = 0
	}
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
// messages); it then marks the queue consuming until takeMessagesAt finds it empty.
func (pq *processQueue) PutMessages(msgs []*Message) bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	var added, bytes int64
	for _, m := range msgs {
		if _, taken := search(pq.taken, m.QueueOffset); taken {
			continue
		}
		if !pq.insertLocked(entry(m)) {
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
	return dispatch
}

// removeMessages drops consumed msgs and returns the offset to commit: the smallest cached
// offset, or the highest offset seen + 1 once the cache is empty; -1 if nothing was cached.
// Messages not in the cache are ignored.
func (pq *processQueue) removeMessages(msgs []*Message) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if len(pq.msgs) == 0 {
		return -1
	}
	for _, m := range msgs {
		pq.removeLocked(m.QueueOffset)
	}
	pq.notifyDrainLocked()
	if len(pq.msgs) > 0 {
		return pq.msgs[0].off
	}
	return pq.offsetMax + 1
}

// removeLocked drops offset off from the cache and updates count and size.
func (pq *processQueue) removeLocked(off int64) {
	i, ok := search(pq.msgs, off)
	if !ok || pq.msgs[i].msg == nil {
		return
	}
	pq.count.Add(-1)
	pq.size.Add(-bodySize(pq.msgs[i].msg))
	pq.removeAtLocked(i)
}

// takeMessages moves up to n of the lowest-offset messages to the consuming set (orderly).
// n < 1 counts as 1. When the cache is empty it returns nothing and clears the consuming
// flag, so that the next PutMessages dispatches a new run.
func (pq *processQueue) takeMessages(n int) []*Message {
	n = max(n, 1)
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if len(pq.msgs) == 0 {
		pq.consuming = false
		return nil
	}
	out := make([]*Message, 0, min(n, len(pq.msgs)-pq.dead))
	i := 0
	for ; i < len(pq.msgs) && len(out) < n; i++ {
		e := pq.msgs[i]
		if e.msg == nil {
			pq.dead--
			continue
		}
		out = append(out, e.msg)
		pq.taken, _ = insert(pq.taken, e)
	}
	for i < len(pq.msgs) && pq.msgs[i].msg == nil { // keep the first entry a message
		pq.dead--
		i++
	}
	clear(pq.msgs[:i])
	pq.msgs = pq.msgs[i:]
	return out
}

// Commit drops the consuming set and returns the offset to commit (orderly): the highest
// offset in the set + 1, or -1 when the set is empty.
func (pq *processQueue) Commit() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	n := len(pq.taken)
	if n == 0 {
		return -1
	}
	next := pq.taken[n-1].off + 1
	var bytes int64
	for _, e := range pq.taken {
		bytes += bodySize(e.msg)
	}
	pq.count.Add(-int64(n))
	pq.size.Add(-bytes)
	clear(pq.taken)
	pq.taken = pq.taken[:0]
	pq.notifyDrainLocked()
	return next
}

// Rollback puts the consuming set back (orderly).
func (pq *processQueue) Rollback() {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, e := range pq.taken {
		pq.insertLocked(e)
	}
	clear(pq.taken)
	pq.taken = pq.taken[:0]
}

// MakeMessagesToConsumeAgain puts msgs from the consuming set back (orderly). Messages not
// in the consuming set are ignored (RocketMQ would cache them without counting them).
func (pq *processQueue) MakeMessagesToConsumeAgain(msgs []*Message) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		i, ok := search(pq.taken, m.QueueOffset)
		if !ok {
			continue
		}
		pq.insertLocked(pq.taken[i])
		pq.taken = removeAt(pq.taken, i)
	}
}

// markConsumeStart records now (monoNow) as the consume start time of the cached msgs, and
// c as the pool task consuming them (nil: none), for cleanExpired (RocketMQ keeps the time
// in the CONSUME_START_TIME property). The concurrent consume service calls it just before
// a batch goes to the listener. Messages not in the cache are ignored.
func (pq *processQueue) markConsumeStart(msgs []*Message, now int64, c *chunk) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if i, ok := search(pq.msgs, m.QueueOffset); ok && pq.msgs[i].msg != nil {
			pq.msgs[i].start = now
			pq.msgs[i].chunk = c
		}
	}
}

// cleanExpired sends back messages stuck in consumption (RocketMQ's cleanExpiredMsg, for
// concurrent consumption only): up to limit times, if the lowest-offset cached message started
// consuming (markConsumeStart) more than timeout ago, it is passed to sendBack, with the pool
// task its consumption started in (nil if none), and, once sendBack succeeds, removed from the
// cache. It stops at the first message not expired and at the first sendBack error, and
// returns how many messages it removed. sendBack is called without the queue's lock held.
// Removing a message does not commit an offset; the next removeMessages returns the advanced
// one.
func (pq *processQueue) cleanExpired(timeout time.Duration, limit int, sendBack func(*Message, *chunk) error) int {
	pq.mu.Lock()
	loop := min(len(pq.msgs), limit)
	pq.mu.Unlock()
	removed := 0
	for range loop {
		var m *Message
		var c *chunk
		now := monoNow()
		pq.mu.Lock()
		if len(pq.msgs) > 0 {
			if e := pq.msgs[0]; e.start != 0 && now-e.start > int64(timeout) {
				m, c = e.msg, e.chunk
			}
		}
		pq.mu.Unlock()
		if m == nil || sendBack(m, c) != nil {
			break
		}
		pq.mu.Lock()
		if len(pq.msgs) > 0 && pq.msgs[0].off == m.QueueOffset {
			pq.removeLocked(m.QueueOffset)
			removed++
		}
		pq.notifyDrainLocked()
		pq.mu.Unlock()
	}
	return removed
}

// Count returns the number of cached messages, including the orderly consuming set.
func (pq *processQueue) Count() int64 { return pq.count.Load() }

// Size returns the body bytes of the cached messages, including the orderly consuming set.
func (pq *processQueue) Size() int64 { return pq.size.Load() }

// MaxSpan returns the highest minus the lowest cached offset (not counting the orderly
// consuming set), or 0 when the cache is empty.
func (pq *processQueue) MaxSpan() int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	if n := len(pq.msgs); n > 0 {
		return pq.msgs[n-1].off - pq.msgs[0].off
	}
	return 0
}

// armDrain makes the first notifyDrainLocked that finds Count at most count, Size at most
// size and MaxSpan at most span send on the channel it returns (capacity 1), once;
// disarmDrain undoes it. One pull loop per queue uses it, to wait for flow control to lift
// instead of sleeping a fixed delay.
func (pq *processQueue) armDrain(count, size, span int64) <-chan struct{} {
	select { // a signal left from an earlier wait
	case <-pq.drain:
	default:
	}
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.drainSize.Store(size)
	pq.drainSpan.Store(span)
	pq.drainCount.Store(count) // last: arms it
	pq.notifyDrainLocked()     // drained already
	return pq.drain
}

// disarmDrain ends a wait begun with armDrain.
func (pq *processQueue) disarmDrain() { pq.drainCount.Store(-1) }

// notifyDrainLocked signals an armed drain wait whose levels are reached. It is called
// after Count, Size or MaxSpan go down.
func (pq *processQueue) notifyDrainLocked() {
	c := pq.drainCount.Load()
	if c < 0 || pq.count.Load() > c || pq.size.Load() > pq.drainSize.Load() {
		return
	}
	if n := len(pq.msgs); n > 0 && pq.msgs[n-1].off-pq.msgs[0].off > pq.drainSpan.Load() {
		return
	}
	if pq.drainCount.CompareAndSwap(c, -1) {
		select {
		case pq.drain <- struct{}{}:
		default:
		}
	}
}

// Dropped reports whether the queue was taken away from this consumer; its messages are
// then no longer consumed and its offsets no longer committed.
func (pq *processQueue) Dropped() bool { return pq.dropped.Load() }

// SetDropped marks the queue dropped or not.
func (pq *processQueue) SetDropped(v bool) { pq.dropped.Store(v) }

// Locked reports whether this consumer holds the queue's broker lock (orderly).
func (pq *processQueue) Locked() bool { return pq.locked.Load() }

// SetLocked records whether this consumer holds the queue's broker lock; true also stamps
// the last lock time with the clock's now, as every RocketMQ lock success does.
func (pq *processQueue) SetLocked(v bool) {
	if v {
		pq.lastLock.Store(monoNow())
	}
	pq.locked.Store(v)
}

// SetLastPullTime records when the queue was last pulled.
func (pq *processQueue) SetLastPullTime(t time.Time) { pq.lastPull.Store(monoOf(t)) }

// IsPullExpired reports whether the queue has not been pulled for more than expiry
// (Options.PullExpiry).
func (pq *processQueue) IsPullExpired(expiry time.Duration) bool {
	return monoNow()-pq.lastPull.Load() > int64(expiry)
}

// isLockExpiredAt reports whether the queue's broker lock is, at now (monoNow), older than
// expiry (Options.LockExpiry).
func (pq *processQueue) isLockExpiredAt(expiry time.Duration, now int64) bool {
	return now-pq.lastLock.Load() > int64(expiry)
}
