package pace

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestWaitNeverEarly waits for instants 0-150 µs ahead, the gaps of a sender paced at
// thousands a second, and for one past the coarse stretch, and fails if a wait returns
// before its instant.
func TestWaitNeverEarly(t *testing.T) {
	p := New()
	defer p.Close()
	ctx := context.Background()
	for i := range 300 {
		at := time.Now().Add(time.Duration(i%4) * 50 * time.Microsecond)
		if i == 299 {
			at = time.Now().Add(coarse + 3*time.Millisecond)
		}
		if err := p.Wait(ctx, at); err != nil {
			t.Fatal(err)
		}
		if now := time.Now(); now.Before(at) {
			t.Fatalf("wait %d returned %v before its instant", i, at.Sub(now))
		}
	}
	if err := p.Wait(nil, time.Now().Add(-time.Hour)); err != nil { // passed: at once
		t.Fatal(err)
	}
}

// TestWaitEndsWithCtx: a wait for an instant an hour away returns ctx's error once ctx ends.
func TestWaitEndsWithCtx(t *testing.T) {
	p := New()
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, time.Now().Add(time.Hour)) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want %v", err, context.DeadlineExceeded)
		}
	case <-time.After(time.Minute):
		t.Fatal("the wait went on after its ctx ended")
	}
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

// TestClosedAndNil: Close releases the timer once, and a closed or nil Pacer still waits.
func TestClosedAndNil(t *testing.T) {
	p := New()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, q := range []*Pacer{p, nil} {
		at := time.Now().Add(200 * time.Microsecond)
		if err := q.Wait(context.Background(), at); err != nil || time.Now().Before(at) {
			t.Fatalf("wait of %p: %v, early: %v", q, err, time.Now().Before(at))
		}
	}
}

// BenchmarkWait100us paces waits 100 µs apart, as a sender at 10,000 a second, and reports
// how late the waits return (lag-p50-ns, lag-p99-ns), against time.Sleep in the same run.
func BenchmarkWait100us(b *testing.B) {
	for _, c := range []struct {
		name string
		make func() *Pacer
	}{{"pacer", New}, {"sleep", func() *Pacer { return &Pacer{} }}} {
		b.Run(c.name, func(b *testing.B) {
			p := c.make() // a run each -count: each its own
			defer p.Close()
			ctx := context.Background()
			lags := make([]time.Duration, 0, b.N)
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				at := start.Add(time.Duration(i+1) * 100 * time.Microsecond)
				p.Wait(ctx, at)
				lags = append(lags, time.Since(at))
			}
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)/2].Nanoseconds()), "lag-p50-ns")
			b.ReportMetric(float64(lags[len(lags)*99/100].Nanoseconds()), "lag-p99-ns")
		})
	}
}
