package edge

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgemq/edgemq/store/meta"
)

type offsetKey struct {
	group, topic string
	queue        int32
}

// offsetTable is the consumer offsets table: in memory, written to the meta store every
// OffsetPersistInterval and on Close.
type offsetTable struct {
	b     *Broker
	mu    sync.Mutex // guards m and dirty
	m     map[offsetKey]int64
	dirty map[offsetKey]struct{}
}

func newOffsetTable(b *Broker) (*offsetTable, error) {
	t := &offsetTable{b: b, m: map[offsetKey]int64{}, dirty: map[offsetKey]struct{}{}}
	stored, err := b.meta.Offsets()
	if err != nil {
		return nil, fmt.Errorf("edge: load offsets: %w", err)
	}
	for _, o := range stored {
		t.m[offsetKey{o.Group, o.Topic, o.QueueID}] = o.Offset
	}
	return t, nil
}

func (t *offsetTable) set(k offsetKey, off int64) {
	t.mu.Lock()
	if old, ok := t.m[k]; !ok || old != off {
		t.m[k] = off
		t.dirty[k] = struct{}{}
	}
	t.mu.Unlock()
}

func (t *offsetTable) get(k offsetKey) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off, ok := t.m[k]
	return off, ok
}

// persist writes the changed offsets in one transaction.
func (t *offsetTable) persist() error {
	t.mu.Lock()
	if len(t.dirty) == 0 {
		t.mu.Unlock()
		return nil
	}
	batch := make([]meta.Offset, 0, len(t.dirty))
	for k := range t.dirty {
		batch = append(batch, meta.Offset{Group: k.group, Topic: k.topic, QueueID: k.queue, Offset: t.m[k]})
	}
	clear(t.dirty)
	t.mu.Unlock()
	if err := t.b.meta.SetOffsets(batch); err != nil {
		t.mu.Lock()
		for _, o := range batch { // retry them next time, unless changed since
			t.dirty[offsetKey{o.Group, o.Topic, o.QueueID}] = struct{}{}
		}
		t.mu.Unlock()
		return fmt.Errorf("edge: persist offsets: %w", err)
	}
	return nil
}

// run persists offsets every OffsetPersistInterval until the broker closes.
func (t *offsetTable) run() {
	defer t.b.wg.Done()
	for {
		tm := t.b.clock.NewTimer(t.b.opts.OffsetPersistInterval)
		select {
		case <-t.b.done:
			tm.Stop()
			return
		case <-tm.C():
			if err := t.persist(); err != nil {
				t.b.lg.Error("persist offsets", "err", err)
			}
		}
	}
}

// checkQueue validates (group, topic, queue) for offset calls.
func (b *Broker) checkQueue(group, topicName string, queueID int32) (*topic, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: empty consumer group", ErrInvalidArgument)
	}
	tp, ok := b.topics.get(topicName)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicNotExist, topicName)
	}
	if queueID < 0 || queueID >= max(tp.cfg.ReadQueues, tp.cfg.WriteQueues) {
		return nil, fmt.Errorf("%w: queue %d of topic %q", ErrInvalidQueue, queueID, topicName)
	}
	return tp, nil
}

// CommitOffset records that group has consumed topic's queue up to offset (the next offset to
// consume). Offsets are kept in memory and written to disk every OffsetPersistInterval and on
// Close.
func (b *Broker) CommitOffset(group, topic string, queueID int32, offset int64) error {
	if err := b.check(); err != nil {
		return err
	}
	if _, err := b.checkQueue(group, topic, queueID); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)
	}
	b.offsets.set(offsetKey{group, topic, queueID}, offset)
	return nil
}

// ErrOffsetNotFound is returned by QueryOffset when the group has no offset for the queue.
var ErrOffsetNotFound = errors.New("edge: no offset stored for the queue")

// QueryOffset returns group's consume offset of topic's queue. When none is stored it returns
// ErrOffsetNotFound, except for a queue whose first message (offset 0) is still stored:
// then 0, so a new group reads from the start (RocketMQ's rule).
func (b *Broker) QueryOffset(group, topic string, queueID int32) (int64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue(group, topic, queueID); err != nil {
		return 0, err
	}
	if off, ok := b.offsets.get(offsetKey{group, topic, queueID}); ok {
		return off, nil
	}
	if b.st.MinOffset(topic, queueID) == 0 && b.st.MaxOffset(topic, queueID) > 0 {
		return 0, nil
	}
	return 0, fmt.Errorf("%w: group %q topic %q queue %d", ErrOffsetNotFound, group, topic, queueID)
}

// ResetWhere says where ResetOffsets moves a group.
type ResetWhere int

const (
	// ResetToFirst moves to each queue's first stored message.
	ResetToFirst ResetWhere = iota
	// ResetToLast moves past each queue's last message: only new messages are consumed.
	ResetToLast
	// ResetToTimestamp moves to the first message stored at or after a time.
	ResetToTimestamp
)

// ResetOffsets moves group's offsets of every read queue of topic to where (at is the time for
// ResetToTimestamp). It returns the new offsets by queue id. Consumers running in the group
// should be restarted (or they will commit their old positions again).
func (b *Broker) ResetOffsets(group, topic string, where ResetWhere, at time.Time) (map[int32]int64, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	tp, err := b.checkQueue(group, topic, 0)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for q := int32(0); q < tp.cfg.ReadQueues; q++ {
		var off int64
		switch where {
		case ResetToFirst:
			off = b.st.MinOffset(topic, q)
		case ResetToLast:
			off = b.st.MaxOffset(topic, q)
		case ResetToTimestamp:
			if off, err = b.st.OffsetByTime(topic, q, at.UnixMilli()); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: reset position %d", ErrInvalidArgument, where)
		}
		b.offsets.set(offsetKey{group, topic, q}, off)
		out[q] = off
	}
	return out, b.offsets.persist()
}

// MaxOffset returns the next offset to be written in topic's queue (0 for an empty one).
func (b *Broker) MaxOffset(topic string, queueID int32) (int64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue("-", topic, queueID); err != nil {
		return 0, err
	}
	return b.st.MaxOffset(topic, queueID), nil
}

// MinOffset returns the first offset still stored in topic's queue.
func (b *Broker) MinOffset(topic string, queueID int32) (int64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue("-", topic, queueID); err != nil {
		return 0, err
	}
	return b.st.MinOffset(topic, queueID), nil
}

// SearchOffset returns the first offset of topic's queue whose message was stored at or
// after at, or the max offset when none was.
func (b *Broker) SearchOffset(topic string, queueID int32, at time.Time) (int64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue("-", topic, queueID); err != nil {
		return 0, err
	}
	return b.st.OffsetByTime(topic, queueID, at.UnixMilli())
}
