package pace

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestUntilNeverEarly waits for instants 0-150 µs ahead, the gaps of a sender paced at
// thousands a second, and fails if a wait returns before its instant.
func TestUntilNeverEarly(t *testing.T) {
	p := New()
	defer p.Close()
	for i := range 300 {
		at := time.Now().Add(time.Duration(i%4) * 50 * time.Microsecond)
		p.Until(at)
		if now := time.Now(); now.Before(at) {
			t.Fatalf("wait %d returned %v before its instant", i, at.Sub(now))
		}
	}
	p.Until(time.Now().Add(-time.Hour)) // passed: at once
}

// TestTimerWaits checks that on Linux the Pacer waits on its timer, not on time.Sleep,
// and that the timer waits its whole duration each time it is armed again.
func TestTimerWaits(t *testing.T) {
	p := New()
	defer p.Close()
	if runtime.GOOS != "linux" {
		if p.t != nil {
			t.Fatal("a timer outside Linux")
		}
		t.Skip("the timer is Linux's timerfd")
	}
	if p.t == nil {
		t.Fatal("no timerfd: the Pacer falls back to time.Sleep")
	}
	for _, d := range []time.Duration{100 * time.Microsecond, time.Microsecond, 2 * time.Millisecond, 100 * time.Microsecond} {
		start := time.Now()
		if err := p.t.wait(d); err != nil {
			t.Fatalf("wait %v: %v", d, err)
		}
		if got := time.Since(start); got < d {
			t.Fatalf("wait %v returned after %v", d, got)
		}
	}
}

// TestCloseTwice: a closed Pacer's Close reports an error rather than closing another fd.
func TestCloseTwice(t *testing.T) {
	p := New()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.t != nil && p.Close() == nil {
		t.Fatal("second Close of a timerfd succeeded")
	}
}

// BenchmarkUntil100us paces waits 100 µs apart, as a sender at 10,000 a second, and reports
// how late the waits return (lag-p50-ns, lag-p99-ns), against time.Sleep in the same run.
func BenchmarkUntil100us(b *testing.B) {
	for _, c := range []struct {
		name string
		p    *Pacer
	}{{"pacer", New()}, {"sleep", &Pacer{}}} {
		b.Run(c.name, func(b *testing.B) {
			defer c.p.Close()
			lags := make([]time.Duration, 0, b.N)
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				at := start.Add(time.Duration(i+1) * 100 * time.Microsecond)
				c.p.Until(at)
				lags = append(lags, time.Since(at))
			}
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2].Nanoseconds()), "lag-p50-ns")
			b.ReportMetric(float64(lags[len(lags)*99/100].Nanoseconds()), "lag-p99-ns")
		})
	}
}
