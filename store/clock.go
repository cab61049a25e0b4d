package store

import (
	"sync/atomic"
	"time"
)

// clockRebase is how long the default clock's readings are derived from one wall-clock
// reading: a wall clock set (by NTP, or at boot on a gateway without a battery-backed clock)
// shows in store times at most this much later.
const clockRebase = time.Second

// A wall-clock reading is paired with the monotonic readings just before and after it; a
// pair whose two monotonic readings are more than clockPairGap apart (the thread was
// descheduled between them) is taken again, up to clockPairTries times in all, and the
// closest kept.
const (
	clockPairGap   = 20 * time.Microsecond
	clockPairTries = 4
)

// monoEpoch is the origin of the default clock's monotonic readings.
var monoEpoch = time.Now()

// storeClock gives appends their store time, unix ms. A caller's clock (Options.Now) is read
// for every append, so that a clock a program advances by hand is seen at once. The default
// clock, time.Now, reads both the wall and the monotonic clock, which costs a busy appender
// more than its share (200-300 ns in a virtual machine, against 90 for one clock); so the
// store reads the wall clock once a clockRebase and the monotonic clock for every append,
// adding the monotonic time since to the wall reading. Both run at the same (NTP-slewed)
// rate, so the store time is the wall clock's to the microsecond, except that a step of the
// wall clock shows up to clockRebase late.
type storeClock struct {
	now  func() time.Time
	def  bool                 // now is the default clock
	wall func() int64         // the default clock's wall clock, unix ns
	mono func() time.Duration // the default clock's monotonic clock
	base atomic.Pointer[clockPair]
}

// clockPair is a wall-clock reading, unix ns, and the monotonic clock's at the same moment.
type clockPair struct {
	wall int64
	mono time.Duration
}

// newStoreClock returns the clock of a store whose Options.Now is now; def says it is the
// default clock, time.Now.
func newStoreClock(now func() time.Time, def bool) *storeClock {
	c := &storeClock{now: now, def: def,
		wall: func() int64 { return time.Now().UnixNano() },
		mono: func() time.Duration { return time.Since(monoEpoch) },
	}
	if def {
		c.rebase()
	}
	return c
}

// rebase takes a new wall-clock reading and returns it. Read on its own, a wall reading and
// the monotonic one after it can be a scheduling delay apart (milliseconds on a busy gateway,
// or under an emulator): every store time until the next rebase would be that much early. So
// the wall clock is read between two monotonic readings, and paired with their midpoint.
func (c *storeClock) rebase() *clockPair {
	var best clockPair
	bestGap := time.Duration(1<<63 - 1)
	for range clockPairTries {
		m1 := c.mono()
		w := c.wall()
		m2 := c.mono()
		if gap := m2 - m1; gap < bestGap {
			best, bestGap = clockPair{wall: w, mono: m1 + gap/2}, gap
		}
		if bestGap <= clockPairGap {
			break
		}
	}
	c.base.Store(&best)
	return &best
}

// read returns the store time for an append, unix ms. Concurrent appends may read slightly
// out of order; the append lock smooths that over (writeLocked).
func (c *storeClock) read() int64 {
	if !c.def {
		return c.now().UnixMilli()
	}
	b := c.base.Load()
	m := c.mono()
	if d := m - b.mono; d < 0 || d >= clockRebase {
		b = c.rebase()
		m = b.mono
	}
	return unixMilli(b.wall + int64(m-b.mono))
}

// unixMilli is unix ns in ms, rounded down as time.Time.UnixMilli rounds.
func unixMilli(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}
