package edge

import (
	"fmt"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// healthState is what Health noted on its earlier calls: the work the store's flusher and
// dispatcher had pending then.
type healthState struct {
	mu       sync.Mutex // serializes Health
	flush    pending    // commitlog bytes written but not yet durable
	dispatch pending    // durable bytes not yet in their consume queues
}

// pending is a position some work must reach, and since when it has been pending.
type pending struct {
	mark  int64
	since time.Time
	set   bool
}

// lag notes target when done falls short of it and nothing is noted, forgets the mark once
// done reached it, and returns how long the noted mark has been pending (0 for none).
func (p *pending) lag(now time.Time, done, target int64) time.Duration {
	if p.set && done >= p.mark {
		p.set = false
	}
	if !p.set && done < target {
		*p = pending{mark: target, since: now, set: true}
	}
	if !p.set {
		return 0
	}
	return now.Sub(p.since)
}

// Health reports whether the store under the broker works, for a watchdog that calls it
// periodically with the same stall: nil, or an error that says what is wrong:
//   - a disk failure: an fsync of the commitlog failed (for good: the store refuses writes
//     until reopened), or the last append failed on the disk (a full disk with the fail
//     policy, a file that could not be made), or the last fsync of the consume queues did;
//   - the flusher is stuck: records written at least stall ago are not yet durable;
//   - the dispatcher is behind: records durable at least stall ago are not yet in their
//     consume queues, where consumers find them.
//
// The flusher and the dispatcher are judged by their progress between calls: a call notes
// the work pending, and a later call, stall or more after it, reports the work still
// pending. Work done since, even if more arrived meanwhile, is progress: a busy store is
// healthy. Errors: ErrClosed; mq.ErrInvalidArgument for a stall not above 0.
func (b *Broker) Health(stall time.Duration) error {
	if err := b.check(); err != nil {
		return err
	}
	if stall <= 0 {
		return fmt.Errorf("%w: health stall %v, want more than 0", mq.ErrInvalidArgument, stall)
	}
	if err := b.st.Err(); err != nil {
		return fmt.Errorf("edge: disk failure: %w", err)
	}
	l := b.st.Log()
	now := time.Now()
	b.health.mu.Lock()
	defer b.health.mu.Unlock()
	// Each position read before what it is compared with: a later read is only larger.
	dispatched := b.st.DispatchedPos()
	durable := l.Durable()
	written := l.Written()
	if d := b.health.flush.lag(now, durable, written); d >= stall {
		return fmt.Errorf("edge: the commitlog flusher is stuck: %d bytes written %v ago are not durable yet",
			b.health.flush.mark-durable, d.Round(time.Millisecond))
	}
	if d := b.health.dispatch.lag(now, dispatched, durable); d >= stall {
		return fmt.Errorf("edge: the dispatcher is behind: %d bytes stored %v ago are not in their consume queues yet",
			b.health.dispatch.mark-dispatched, d.Round(time.Millisecond))
	}
	return nil
}
