package store

import (
	"sync/atomic"
	"time"
)

// clockRebase is how long the default clock's readings are derived from one wall-clock
// reading: a wall clock set (by NTP, or at boot on a gateway without a battery-backed clock)
// shows in store times at most this much later.
const clockRebase = time.Second

// storeClock gives appends their store time, unix ms. A caller's clock (Options.Now) is read
// for every append, so that a clock a program advances by hand is seen at once. The default
// clock, time.Now, reads both the wall and the monotonic clock, which costs a busy appender
// more than its share (200-300 ns in a virtual machine, against 90 for one clock); so the
// store reads the wall clock once a clockRebase and the monotonic clock for every append,
// adding the monotonic time since to the wall reading. Both run at the same (NTP-slewed)
// rate, so the store time is the wall clock's to the nanosecond, except that a step of the
// wall clock shows up to clockRebase late.
type storeClock struct {
	now  func() time.Time
	def  bool                      // now is the default clock
	base atomic.Pointer[time.Time] // the last wall-clock reading, with its monotonic one
}

// newStoreClock returns the clock of a store whose Options.Now is now; def says it is the
// default clock, time.Now.
func newStoreClock(now func() time.Time, def bool) *storeClock {
	c := &storeClock{now: now, def: def}
	if def {
		t := now()
		c.base.Store(&t)
	}
	return c
}

// read returns the store time for an append, unix ms. Concurrent appends may read slightly
// out of order; the append lock smooths that over (writeLocked).
func (c *storeClock) read() int64 {
	if !c.def {
		return c.now().UnixMilli()
	}
	b := c.base.Load()
	d := time.Since(*b) // the monotonic clock only
	if d < 0 || d >= clockRebase {
		t := c.now()
		c.base.Store(&t)
		return t.UnixMilli()
	}
	return b.Add(d).UnixMilli()
}
