package pace

import (
	"context"
	"time"
)

// coarse is how far ahead of an instant a wait stops on a runtime timer, which can be
// interrupted by a context, and goes on with the precise one. Past it a wait's lateness
// does not matter to anyone pacing.
const coarse = 2 * time.Millisecond

// A Pacer waits until instants for one goroutine at a time.
type Pacer struct {
	t timer // nil: time.Sleep
}

// New returns a Pacer; where the operating system has no timer it can wait on, or one
// cannot be made, it waits with time.Sleep.
func New() *Pacer {
	t, err := newTimer()
	if err != nil {
		return &Pacer{}
	}
	return &Pacer{t: t}
}

// Wait returns at instant at or just after it, at once when it has passed, or ctx's error
// when ctx ends first (a nil ctx never ends). The last 2 ms of a wait do not look at ctx.
func (p *Pacer) Wait(ctx context.Context, at time.Time) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if d := time.Until(at) - coarse; d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-tm.C:
		}
	}
	if d := time.Until(at); d > 0 {
		if p == nil || p.t == nil || p.t.wait(d) != nil {
			time.Sleep(time.Until(at))
		}
	}
	return ctx.Err()
}

// Close releases the Pacer's timer. A closed Pacer waits with time.Sleep.
func (p *Pacer) Close() error {
	if p == nil || p.t == nil {
		return nil
	}
	t := p.t
	p.t = nil
	return t.close()
}

// timer waits for a duration.
type timer interface {
	wait(d time.Duration) error
	close() error
}
