package edge

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the broker's source of time: store timestamps, delays, long-poll timeouts,
// heartbeat expiry and lock lifetimes. Tests inject a ManualClock so that hour-long delays run
// in milliseconds.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
}

// NewTimerAt returns a timer of c that fires once c reads at or past at. It is what
// c.NewTimer(at.Sub(c.Now())) means, without its race: a clock that jumps between the read
// and the timer's creation (a ManualClock advanced by another goroutine) would set the timer
// the jump too late, and it might never fire. Loops that sleep until a deadline use it.
func NewTimerAt(c Clock, at time.Time) Timer {
	t := c.NewTimer(at.Sub(c.Now()))
	if c.Now().Before(at) {
		return t // created before any jump past at, which fires it
	}
	t.Stop()
	return c.NewTimer(0)
}

// SystemClock is the real clock. Its Now reads the wall clock (time.Now) at most every
// wallResync and otherwise adds the monotonic time elapsed since: one clock read instead of
// two, which is most of what time.Now costs where reading a clock is slow (a VM's
// paravirtual clock: 35 ns a read). Monotonic time runs at the wall clock's rate, NTP's
// slewing included, so the two differ only when the wall clock is stepped, and then for
// at most wallResync.
var SystemClock Clock = systemClock{}

type systemClock struct{}

// wallResync bounds how long SystemClock's Now takes to follow a step of the wall clock.
const wallResync = 100 * time.Millisecond

// wallBase is the last time.Now that SystemClock's Now read.
var wallBase atomic.Pointer[time.Time]

func (systemClock) Now() time.Time {
	if base := wallBase.Load(); base != nil {
		if d := time.Since(*base); d >= 0 && d < wallResync { // one monotonic clock read
			return base.Add(d)
		}
	}
	now := time.Now()
	wallBase.Store(&now)
	return now
}

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }

// ManualClock is a Clock that moves only when told to. Safe for concurrent use.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

// NewManualClock returns a ManualClock showing start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements Clock.
func (c *ManualClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		t.fired = true
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock forward by d and fires the timers that fall due, in order.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.fired = true
			t.ch <- c.now
			continue
		}
		keep = append(keep, t)
	}
	clear(c.timers[len(keep):])
	c.timers = keep
	c.mu.Unlock()
}

// Timers returns how many timers are waiting.
func (c *ManualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type manualTimer struct {
	c     *ManualClock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
