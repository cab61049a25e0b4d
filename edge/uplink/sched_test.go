package uplink

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestBackoff: waits double from min to max, each jittered into [ceiling/2, ceiling], and
// start over after reset.
func TestBackoff(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	for round := range 2 {
		for i, ceil := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
			ceil *= time.Millisecond
			if d := b.next(); d < ceil/2 || d > ceil {
				t.Fatalf("round %d, wait %d: got %v, want in [%v, %v]", round, i, d, ceil/2, ceil)
			}
		}
		b.reset()
	}
}

// TestBucketPaces: a full bucket lets a second's worth through at once; past it a take
// waits off its debt.
func TestBucketPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := newBucket(1000)
		start := time.Now()
		if err := b.take(ctx, 1000); err != nil || time.Since(start) != 0 {
			t.Fatalf("full bucket: took %v, err %v", time.Since(start), err)
		}
		if err := b.take(ctx, 500); err != nil || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("500 bytes of debt at 1000 B/s: took %v, want 500ms (err %v)", time.Since(start), err)
		}
		if err := newBucket(0).take(ctx, 1<<30); err != nil {
			t.Fatalf("no limit: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.take(cctx, 10_000); err != context.Canceled {
			t.Fatalf("ended ctx: got %v", err)
		}
	})
}

// TestGateOrdersByPriority: a forwarder waits while one of a higher priority has a batch
// ready, not for one of its own or a lower priority.
func TestGateOrdersByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		alarm, telemetry := &queueFwd{}, &queueFwd{}
		g.mark(alarm, 10, true)
		g.mark(telemetry, 0, true)
		if err := g.wait(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.wait(context.Background(), 0) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("low priority went while a higher one was ready")
		default:
		}
		g.mark(alarm, 10, false)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("low priority still waits with no higher one ready")
		}
	})
}

// TestStatesWhileUnreachable: a rule whose upstream refuses connections backs off, its
// waits growing: over a minute it tries about log2(max/min) + minute/max times, not
// constantly; its backlog and error show in the stats.
func TestStatesWhileUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := freeListener(t)
		addr := ln.Addr().String()
		ln.Close()
		local := openLocal(t, t.TempDir(), nil)
		sendN(t, local, "T", 0, 10)
		u, err := Start(local, &Options{BackoffMin: time.Second, BackoffMax: 8 * time.Second, Logger: testLogger(t),
			Up: []UpRule{{Name: "r", Topics: []string{"T"}, Upstream: Upstream{Addrs: addr}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		time.Sleep(time.Minute)
		synctest.Wait()
		s := u.Stats().Up[0]
		// Ceilings 1 2 4 8 8 ...: between 60/8+3 and 60/4+4 attempts per queue.
		perQueue := s.Failures / int64(s.Queues)
		if s.State != BackingOff || s.Backlog != 10 || s.LastError == "" || perQueue < 8 || perQueue > 20 {
			t.Fatalf("stats %+v (%d failures per queue): want backing off, backlog 10, 8..20 failures per queue", s, perQueue)
		}
	})
}
