package uplink

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// gate orders sends between rules by priority: a forwarder with a batch ready marks itself
// ready until its queue is drained or its link fails, and a forwarder sends only while no
// forwarder of a higher priority is marked.
type gate struct {
	mu    sync.Mutex        // guards ready and wake; a leaf
	ready map[*queueFwd]int // marked forwarders and their priorities
	wake  chan struct{}     // closed, and replaced, when ready changes
}

func newGate() *gate { return &gate{ready: map[*queueFwd]int{}, wake: make(chan struct{})} }

// mark marks (on) or unmarks f, of priority prio, as having a batch ready.
func (g *gate) mark(f *queueFwd, prio int, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, was := g.ready[f]
	if was == on {
		return
	}
	if on {
		g.ready[f] = prio
	} else {
		delete(g.ready, f)
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// wait returns once no forwarder of a priority above prio is marked, or ctx's error.
func (g *gate) wait(ctx context.Context, prio int) error {
	for {
		g.mu.Lock()
		higher := false
		for _, p := range g.ready {
			if p > prio {
				higher = true
				break
			}
		}
		wake := g.wake
		g.mu.Unlock()
		if !higher {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// bucket is a token bucket of bytes per second holding at most one second's worth. A take
// larger than what is there runs the bucket into debt and waits it off, so a batch larger
// than the rate still goes, and the next waits longer.
type bucket struct {
	rate float64 // bytes per second

	mu     sync.Mutex // guards tokens and last; a leaf
	tokens float64
	last   time.Time
}

// newBucket returns a bucket of rate bytes per second, full; nil for no limit (rate 0).
func newBucket(rate int64) *bucket {
	if rate <= 0 {
		return nil
	}
	return &bucket{rate: float64(rate), tokens: float64(rate), last: time.Now()}
}

// take takes n bytes, waiting until the bucket is out of debt, or returns ctx's error (the
// bytes stay taken: they were about to be sent). A nil bucket takes at once.
func (b *bucket) take(ctx context.Context, n int) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	now := time.Now()
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	debt := -b.tokens
	b.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	return sleep(ctx, time.Duration(debt/b.rate*float64(time.Second)))
}

// sleep waits d, or returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is an exponential backoff with jitter.
type backoff struct {
	min, max time.Duration
	cur      time.Duration // the last wait's ceiling; 0 after reset
}

// next returns the next wait: the ceiling doubles from min up to max, and the wait is
// drawn from [ceiling/2, ceiling].
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + rand.N(b.cur-half+1)
}

func (b *backoff) reset() { b.cur = 0 }
