package store

import (
	"sync/atomic"
	"time"
)

// clockReuse is how long appends reuse a reading of the default clock: the store time is
// milliseconds on the wire.
const clockReuse = time.Millisecond

// storeClock gives appends their store time, unix ms. A caller's clock (Options.Now) is read
// for every append, so that a clock a program advances by hand is seen at once. The default
// clock, time.Now, costs a busy appender more than its share (two clock reads, some 100-300
// ns in a virtual machine), so a reading of it serves every append for clockReuse: the first
// append after that reads the clock again and arms a timer that ends the reading's use. An
// idle store arms no timer; a busy one arms about one a millisecond.
type storeClock struct {
	now    func() time.Time
	reuse  bool         // now is the default clock: readings are reused
	ms     atomic.Int64 // the reading in use, unix ms
	fresh  atomic.Bool  // ms may be reused; cleared by the timer the reading armed
	expire func()       // clears fresh; bound once, as each timer calls it
}

// newStoreClock returns the clock of a store whose Options.Now is now; reuse says it is the
// default clock, whose readings may serve clockReuse.
func newStoreClock(now func() time.Time, reuse bool) *storeClock {
	c := &storeClock{now: now, reuse: reuse}
	c.expire = func() { c.fresh.Store(false) }
	return c
}

// read returns the store time for an append, unix ms. Concurrent appends may read slightly
// out of order; the append lock smooths that over (writeLocked).
func (c *storeClock) read() int64 {
	if !c.reuse {
		return c.now().UnixMilli()
	}
	if c.fresh.Load() {
		return c.ms.Load()
	}
	ms := c.now().UnixMilli()
	c.ms.Store(ms)
	if c.fresh.CompareAndSwap(false, true) {
		// A new timer each time, never touched again: nothing to stop at Close (a late one
		// clears a flag), and one made in a test's synctest bubble stays in it.
		time.AfterFunc(clockReuse, c.expire)
	}
	return ms
}
