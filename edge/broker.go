package edge

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/meta"
	"github.com/klauspost/compress/zstd"
)

// Broker is a RocketMQ-style broker running in-process over a store: topics, sends, pulls
// with long polling, consumer offsets, consumer groups and their heartbeats, queue locks for
// orderly consumption, and retry, dead-letter and delayed delivery.
//
// Every method is safe for concurrent use. Goroutines, all stopped and waited for by Close:
// the store's own; the hold service's sweep of parked pulls; the offset persister; the
// heartbeat expiry loop, which owns the short-lived goroutines delivering OnChange
// callbacks; the delayed-message scheduler.
type Broker struct {
	opts  Options
	clock Clock
	lg    *slog.Logger
	st    *store.Store
	meta  *meta.Store
	zenc  *zstd.Encoder
	zdec  *zstd.Decoder
	ready atomic.Bool // every part is built: arrivals may be routed

	topics  *topicTable
	offsets *offsetTable
	stats   statsTable
	hold    *holdService
	groups  *groupRegistry
	locks   *lockTable
	sched   *scheduler

	closed atomic.Bool
	done   chan struct{} // closed by Close: every loop returns
	wg     sync.WaitGroup
}

// Open opens (creating if needed) the broker's data dir and starts the broker.
func Open(dir string, opts *Options) (b *Broker, err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	b = &Broker{opts: o, clock: o.Clock, lg: o.Logger.With("component", "broker"), done: make(chan struct{})}
	var so store.Options
	if o.Store != nil {
		so = *o.Store
	}
	so.Now = o.Clock.Now
	so.OnArrival = b.onArrival
	if so.Logger == nil {
		so.Logger = o.Logger
	}
	if so.MaxMessageSize < o.MaxMessageSize {
		so.MaxMessageSize = o.MaxMessageSize
	}
	if b.zenc, b.zdec, err = newZstd(); err != nil {
		return nil, fmt.Errorf("edge: zstd: %w", err)
	}
	defer func() {
		if err != nil {
			b.closeParts()
		}
	}()
	b.hold = newHoldService(b)
	if b.st, err = store.Open(dir, &so); err != nil {
		return nil, err
	}
	b.meta = b.st.Meta()
	if b.topics, err = newTopicTable(b); err != nil {
		return nil, err
	}
	if b.offsets, err = newOffsetTable(b); err != nil {
		return nil, err
	}
	b.groups = newGroupRegistry(b)
	b.locks = newLockTable(b)
	if b.sched, err = newScheduler(b); err != nil {
		return nil, err
	}
	b.ready.Store(true) // arrivals only signal buffered channels: safe before the loops run
	b.wg.Add(4)
	go b.hold.run()
	go b.offsets.run()
	go b.groups.run()
	go b.sched.run()
	return b, nil
}

// onArrival routes the store's arrival announcements: to parked pulls, and to the scheduler
// for delayed messages. The store calls it from whoever dispatches (its dispatcher goroutine
// or a sender, after its append), one call at a time; it must not block.
func (b *Broker) onArrival(a store.Arrival) {
	if !b.ready.Load() {
		return
	}
	b.hold.arrive(a)
	if a.Topic == ScheduleTopic {
		b.sched.arrive(a)
	}
}

func (b *Broker) check() error {
	if b.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Store returns the broker's message store.
func (b *Broker) Store() *store.Store { return b.st }

// Close stops the broker: it answers parked pulls, stops every goroutine, persists consumer
// offsets and delay progress, and closes the store (which flushes it).
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(b.done)
	b.wg.Wait()
	return b.closeParts()
}

func (b *Broker) closeParts() error {
	var errs []error
	if b.groups != nil {
		b.groups.close()
	}
	if b.sched != nil {
		errs = append(errs, b.sched.close())
	}
	if b.offsets != nil {
		errs = append(errs, b.offsets.persist())
	}
	if b.st != nil {
		errs = append(errs, b.st.Close())
	}
	if b.zenc != nil {
		errs = append(errs, b.zenc.Close())
	}
	if b.zdec != nil {
		b.zdec.Close()
	}
	return errors.Join(errs...)
}
