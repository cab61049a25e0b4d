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

// floorTable holds the retention floors of forwarders (HoldRetention).
type floorTable struct {
	mu     sync.Mutex // guards floors and next; a leaf: floor functions run outside it
	floors map[int]func() int64
	next   int
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

// retentionFloor is the store's RetentionFloor: the lowest floor of the holders, and of the
// one the caller's store options gave.
func (b *Broker) retentionFloor() int64 {
	f := &b.floors
	f.mu.Lock()
	fns := make([]func() int64, 0, len(f.floors)+1)
	for _, fn := range f.floors {
		fns = append(fns, fn)
	}
	f.mu.Unlock()
	if b.opts.Store != nil && b.opts.Store.RetentionFloor != nil {
		fns = append(fns, b.opts.Store.RetentionFloor)
	}
	low := int64(math.MaxInt64)
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
