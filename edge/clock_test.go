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
