package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/meta"
	"github.com/klauspost/compress/zstd"
)

// Broker is a RocketMQ-style broker running in-process over a store: topics, sends, pulls
// with long polling, consumer offsets, consumer groups and their heartbeats, queue locks for
// orderly consumption, and retry, dead-letter and delayed delivery.
//
// Every method is safe for concurrent use. A method that takes a ctx checks, before its
// other arguments, that the broker is open (else ErrClosed), that ctx is not nil (else
// mq.ErrInvalidArgument) and not done (else ctx.Err()).
//
// Goroutines, all stopped and waited for by Close:
// the store's own; the hold service's sweep of parked pulls; the offset persister; the
// heartbeat expiry loop, which owns the short-lived goroutines delivering OnChange
// callbacks; the delayed-message scheduler; the transaction checker.
type Broker struct {
	opts Options
	lg   *slog.Logger
	st   *store.Store
	// syncFlush: the store's flush policy is commitlog.FlushSync (sends wait for an fsync
	// unless their topic says otherwise).
	syncFlush bool
	meta      *meta.Store
	zenc      *zstd.Encoder
	zdec      *zstd.Decoder
	ready     atomic.Bool // every part is built: arrivals may be routed

	topics  *topicTable
	offsets *offsetTable
	stats   statsTable
	health  healthState
	hold    *holdService
	groups  *groupRegistry
	locks   *lockTable
	sched   *scheduler
	txn     *txnService
	floors  floorTable
	pipe    *sendPipe // SendAsync's appends at high rates

	closed atomic.Bool
	done   chan struct{} // closed by Close: every loop returns
	wg     sync.WaitGroup
}

// Open opens (creating if needed) the broker's data dir and starts the broker. It fails,
// leaving nothing running and the data dir unlocked, for an empty dir or Options out of
// range (wrapping mq.ErrInvalidArgument), for Options.Store out of range or contradicting
// the data dir (the store's errors; store.ErrSettings for segments too small for
// Options.MaxMessageSize), and for a data dir the store cannot open: one held by another
// process (wrapping dirlock.ErrLocked; the error names its pid), a path that is not a
// directory, a file system that cannot be written.
func Open(dir string, opts *Options) (*Broker, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty data dir", mq.ErrInvalidArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	b, err := open(dir, o, opts == nil || opts.Now == nil)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// open builds the broker; on error it closes what it opened. defaultNow says o.Now is the
// default clock, time.Now.
func open(dir string, o Options, defaultNow bool) (b *Broker, err error) {
	b = &Broker{opts: o, lg: o.Logger.With("component", "broker"), done: make(chan struct{})}
	b.pipe = newSendPipe(b)
	var so store.Options
	if o.Store != nil {
		so = *o.Store
	}
	so.Now = o.Now // the broker's time and the store's are one
	if defaultNow {
		so.Now = nil // the store's default: time.Now, which it reads more cheaply
	}
	so.OnArrival = b.onArrival
	so.RetentionFloor = b.retentionFloor
	if so.Logger == nil {
		so.Logger = o.Logger
	}
	if so.MaxMessageSize >= 0 && so.MaxMessageSize < o.MaxMessageSize { // a negative one is the store's to refuse
		so.MaxMessageSize = o.MaxMessageSize
	}
	defer func() {
		if err != nil {
			b.closeParts()
		}
	}()
	if b.zenc, b.zdec, err = newZstd(); err != nil {
		return b, fmt.Errorf("edge: zstd: %w", err)
	}
	b.hold = newHoldService(b)
	b.syncFlush = so.Flush == commitlog.FlushSync
	b.floors.holdOpen(o.RetentionHolds) // everything, until the floor is known below
	if b.st, err = store.Open(dir, &so); err != nil {
		return b, err
	}
	b.meta = b.st.Meta()
	if b.topics, err = newTopicTable(b); err != nil {
		return b, err
	}
	if b.offsets, err = newOffsetTable(b); err != nil {
		return b, err
	}
	if len(o.RetentionHolds) > 0 {
		low := b.openHoldFloor(o.RetentionHolds)
		b.floors.mu.Lock()
		b.floors.openFloor = low
		b.floors.mu.Unlock()
	}
	b.groups = newGroupRegistry(b)
	b.locks = newLockTable(b)
	if b.sched, err = newScheduler(b); err != nil {
		return b, err
	}
	b.txn = newTxnService(b)
	b.ready.Store(true) // arrivals only signal buffered channels: safe before the loops run
	b.wg.Add(6)
	go b.pipe.run()
	go b.hold.run()
	go b.offsets.run()
	go b.groups.run()
	go b.sched.run()
	go b.txn.run()
	return b, nil
}

// onArrival routes the store's arrival announcements: to parked pulls, to the scheduler for
// delayed messages and to the transaction checker for half messages. The store calls it from
// whoever dispatches (its dispatcher goroutine or a sender, after its append), one call at a
// time; it must not block.
func (b *Broker) onArrival(a store.Arrival) {
	if !b.ready.Load() {
		return
	}
	b.hold.arrive(a)
	switch a.Topic {
	case mq.ScheduleTopic:
		b.sched.arrive(a)
	case mq.TransHalfTopic:
		b.txn.arrive()
	}
}

func (b *Broker) check() error {
	if b == nil {
		return errNilBroker
	}
	if b.closed.Load() {
		return ErrClosed
	}
	return nil
}

// errNilBroker answers every call on a nil *Broker: a caller's nil is an error, not a
// crash.
var errNilBroker = fmt.Errorf("%w: nil broker", mq.ErrInvalidArgument)

// checkCtx is check, then ctx's error.
func (b *Broker) checkCtx(ctx context.Context) error {
	if err := b.check(); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", mq.ErrInvalidArgument)
	}
	return ctx.Err()
}

// Close stops the broker: it answers parked pulls (ErrClosed), stops every goroutine,
// persists consumer offsets, delay progress and transaction progress, and closes the store
// (which flushes it). It returns ErrClosed if the broker was closed already, else what went
// wrong on the way.
func (b *Broker) Close() error {
	if b == nil {
		return errNilBroker
	}
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
	if b.txn != nil && b.st != nil {
		errs = append(errs, b.txn.close())
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
