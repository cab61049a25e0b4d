package edge

import (
	"testing"
	"time"
)

// TestSystemClockNow: SystemClock's Now, built from a wall reading and monotonic time since,
// stays between two time.Now calls around it, in wall time and in monotonic time, over
// several resync periods; and a wall reading older than wallResync is replaced.
func TestSystemClockNow(t *testing.T) {
	end := time.Now().Add(3 * wallResync)
	for n := 0; time.Now().Before(end); n++ {
		before := time.Now()
		got := SystemClock.Now()
		after := time.Now()
		// The wall clock may be read a little apart from the monotonic one, and the
		// machine may be stepped meanwhile: allow a millisecond of skew on wall time.
		if got.UnixNano() < before.UnixNano()-int64(time.Millisecond) || got.UnixNano() > after.UnixNano()+int64(time.Millisecond) {
			t.Fatalf("call %d: wall %v not within [%v, %v]", n, got, before, after)
		}
		if got.Sub(before) < 0 || after.Sub(got) < 0 {
			t.Fatalf("call %d: monotonic %v not within [%v, %v]", n, got, before, after)
		}
		if n%1000 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	old := time.Now().Add(-time.Hour) // a base an hour stale, wall and monotonic
	wallBase.Store(&old)
	if got := SystemClock.Now(); time.Since(got) > time.Second || time.Since(got) < 0 {
		t.Fatalf("after an hour-old base: Now() = %v, time.Now() = %v", got, time.Now())
	}
	if base := wallBase.Load(); base == &old {
		t.Fatal("the stale base was kept")
	}
}

// jumpClock is a ManualClock that another goroutine advances by jump right after the
// reading number at (1-based) of Now: the moment a timer's deadline has been turned into a
// duration and the timer is not yet created.
type jumpClock struct {
	*ManualClock
	jump  time.Duration
	at, n int
}

func (c *jumpClock) Now() time.Time {
	now := c.ManualClock.Now()
	if c.n++; c.n == c.at {
		c.ManualClock.Advance(c.jump)
	}
	return now
}

// TestNewTimerAt: a timer for a deadline fires once the clock reaches it, however the clock
// moves around the timer's creation; and not before.
func TestNewTimerAt(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	fired := func(tm Timer) bool {
		select {
		case <-tm.C():
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		name string
		jump time.Duration
		at   int // which Now reading the jump follows (0: none)
		want bool
	}{
		{"no jump", 0, 0, false},
		{"jump to the deadline after the first reading", time.Second, 1, true},
		{"jump past the deadline after the first reading", time.Hour, 1, true},
		{"jump to the deadline after the second reading", time.Second, 2, true},
		{"jump short of the deadline", time.Second - time.Millisecond, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &jumpClock{ManualClock: NewManualClock(t0), jump: tc.jump, at: tc.at}
			tm := NewTimerAt(c, t0.Add(time.Second))
			if got := fired(tm); got != tc.want {
				t.Fatalf("fired at %v: %v, want %v", c.ManualClock.Now(), got, tc.want)
			}
			if !tc.want {
				c.ManualClock.Advance(time.Second) // now at or past the deadline
				if !fired(tm) {
					t.Fatalf("not fired at %v", c.ManualClock.Now())
				}
			}
		})
	}
	// A deadline already passed fires at once.
	c := NewManualClock(t0)
	if !fired(NewTimerAt(c, t0)) || !fired(NewTimerAt(c, t0.Add(-time.Minute))) {
		t.Fatal("a past deadline did not fire at once")
	}
}
