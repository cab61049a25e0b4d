package edge

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store/meta"
)

// floorTable holds the retention floors of forwarders (HoldRetention), and the one of
// Options.RetentionHolds.
type floorTable struct {
	mu     sync.Mutex // guards floors, next, open and openFloor; a leaf: floor functions run outside it
	floors map[int]func() int64
	next   int
	// open are the names of Options.RetentionHolds not released yet; while there is one,
	// retention keeps openFloor on.
	open      map[string]bool
	openFloor int64
}

// RetentionHold names a forwarder whose unsent messages retention keeps from the broker's
// open on, before the forwarder runs (Options.RetentionHolds).
type RetentionHold struct {
	// Name is the name the forwarder's cursors are stored under (ForwardCursor.Name).
	Name string
	// Match reports whether the forwarder sends local topic on. Required; it must be quick.
	Match func(topic string) bool
}

// holdOpen installs Options.RetentionHolds, holding every message until setOpenFloor.
func (f *floorTable) holdOpen(holds []RetentionHold) {
	if len(holds) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open = map[string]bool{}
	for _, h := range holds {
		f.open[h.Name] = true
	}
	f.openFloor = 0
}

// openHoldFloor returns the lowest commit-log position holds keep: the message at each
// stored cursor of a matched topic's queue (its first message for a queue without a cursor),
// and every message stored from now on. What it cannot read it holds entirely (0).
func (b *Broker) openHoldFloor(holds []RetentionHold) int64 {
	low := b.st.Log().Written()
	topics := b.topics.list()
	type key struct {
		topic string
		queue int32
	}
	for _, h := range holds {
		cs, err := b.meta.UplinkCursors(h.Name)
		if err != nil {
			b.lg.Warn("retention hold: cursors unreadable: holding every message", "forwarder", h.Name, "err", err)
			return 0
		}
		cursor := make(map[key]int64, len(cs))
		for _, c := range cs {
			cursor[key{c.Topic, c.QueueID}] = c.Offset
		}
		for _, tc := range topics {
			if mq.IsSystemTopic(tc.Name) || !h.Match(tc.Name) {
				continue
			}
			for q := range tc.ReadQueues {
				off := max(cursor[key{tc.Name, q}], b.st.MinOffset(tc.Name, q))
				if off >= b.st.MaxOffset(tc.Name, q) {
					continue // all sent
				}
				res, err := b.st.GetMessages(tc.Name, q, off, 1, nil)
				if err != nil || len(res.Messages) == 0 {
					b.lg.Warn("retention hold: queue unreadable: holding every message", "forwarder", h.Name,
						"topic", tc.Name, "queue", q, "offset", off, "err", err)
					return 0
				}
				low = min(low, res.Messages[0].Pos)
			}
		}
	}
	return low
}

// ReleaseRetentionHold ends the hold Options.RetentionHolds gave the forwarder called name
// at the open: a forwarder calls it once its own HoldRetention floor is in place. Releasing
// a name held by none, or twice, does nothing.
func (b *Broker) ReleaseRetentionHold(name string) {
	f := &b.floors
	f.mu.Lock()
	delete(f.open, name)
	f.mu.Unlock()
}

// HoldRetention keeps stored messages from retention on behalf of a forwarder that has not
// sent them on yet: until release is called, retention (MaxAge, MaxBytes, MaxUsedRatio and
// the DropOldest policy of a full disk alike) deletes no commit-log segment holding a
// position at or past the one floor returns (math.MaxInt64 holds nothing). The store's
// retention goroutine calls floor before each pass; it must be quick and must not call into
// the broker. Until the first pass after HoldRetention, the previous floors apply. release
// may be called more than once. Errors: ErrClosed, and mq.ErrInvalidArgument for a nil
// floor.
func (b *Broker) HoldRetention(floor func() int64) (release func(), err error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if floor == nil {
		return nil, fmt.Errorf("%w: nil retention floor", mq.ErrInvalidArgument)
	}
	f := &b.floors
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.floors == nil {
		f.floors = map[int]func() int64{}
	}
	id := f.next
	f.next++
	f.floors[id] = floor
	return func() {
		f.mu.Lock()
		delete(f.floors, id)
		f.mu.Unlock()
	}, nil
}

// retentionFloor is the store's RetentionFloor: the lowest floor of the holders, of
// Options.RetentionHolds while one is not released, and of the one the caller's store
// options gave.
func (b *Broker) retentionFloor() int64 {
	f := &b.floors
	f.mu.Lock()
	fns := make([]func() int64, 0, len(f.floors)+1)
	for _, fn := range f.floors {
		fns = append(fns, fn)
	}
	low := int64(math.MaxInt64)
	if len(f.open) > 0 {
		low = f.openFloor
	}
	f.mu.Unlock()
	if b.opts.Store != nil && b.opts.Store.RetentionFloor != nil {
		fns = append(fns, b.opts.Store.RetentionFloor)
	}
	for _, fn := range fns {
		low = min(low, fn())
	}
	return low
}

// WritePos returns the commit-log position at which the next message will be stored: every
// message stored later is at or past it (a MessageExt's CommitLogOffset). A forwarder that
// has read a queue to its end holds retention from here. It returns 0 on a closed broker.
func (b *Broker) WritePos() int64 {
	if b.check() != nil {
		return 0
	}
	return b.st.Log().Written()
}

// ForwardCursor is how far a forwarder has sent one local queue on: the next queue offset
// to send. It is kept in the meta store (the uplink bucket).
type ForwardCursor struct {
	// Name is the forwarder's (an uplink rule's) name: 1..255 bytes.
	Name    string
	Topic   string
	QueueID int32
	Offset  int64
	// Updated is when the cursor last moved (milliseconds).
	Updated time.Time
}

// ForwardCursors returns the stored cursors of the forwarder called name, by topic and
// queue. Errors: ErrClosed, mq.ErrInvalidArgument for a bad name, and the meta store's.
func (b *Broker) ForwardCursors(name string) ([]ForwardCursor, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	cs, err := b.meta.UplinkCursors(name)
	if err != nil {
		return nil, metaErr(err)
	}
	out := make([]ForwardCursor, len(cs))
	for i, c := range cs {
		out[i] = ForwardCursor{Name: c.Name, Topic: c.Topic, QueueID: c.QueueID, Offset: c.Offset, Updated: time.UnixMilli(c.Updated)}
	}
	return out, nil
}

// PutForwardCursors stores cs durably (the meta store's fsync), all or none, replacing the
// cursors stored under the same (Name, Topic, QueueID). Errors: ErrClosed,
// mq.ErrInvalidArgument for a bad name, topic or queue, and the meta store's.
func (b *Broker) PutForwardCursors(cs []ForwardCursor) error {
	if err := b.check(); err != nil {
		return err
	}
	mc := make([]meta.UplinkCursor, len(cs))
	for i, c := range cs {
		mc[i] = meta.UplinkCursor{Name: c.Name, Topic: c.Topic, QueueID: c.QueueID, Offset: c.Offset, Updated: c.Updated.UnixMilli()}
	}
	return metaErr(b.meta.PutUplinkCursors(mc))
}

// metaErr marks the meta store's refusal of a key as an invalid argument.
func metaErr(err error) error {
	if errors.Is(err, meta.ErrInvalidKey) {
		return fmt.Errorf("%w: %w", mq.ErrInvalidArgument, err)
	}
	return err
}

// Sync makes every message stored so far durable, whatever the flush policy: a mirror that
// commits its upstream offset only for messages it stored calls it first. Errors:
// ErrClosed, and the store's.
func (b *Broker) Sync() error {
	if err := b.check(); err != nil {
		return err
	}
	if err := b.st.Flush(); err != nil {
		return appendErr(err)
	}
	return nil
}
