package edge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
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
		tm := time.NewTimer(t.b.opts.OffsetPersistInterval)
		select {
		case <-t.b.done:
			tm.Stop()
			return
		case <-tm.C:
			if err := t.persist(); err != nil {
				t.b.lg.Error("persist offsets", "err", err)
			}
		}
	}
}

// checkBrokerName accepts a queue's broker name: this broker's, or empty (this broker, for
// in-process callers).
func (b *Broker) checkBrokerName(name string) error {
	if name != "" && name != b.opts.BrokerName {
		return fmt.Errorf("%w: a queue of broker %q; this is broker %q", mq.ErrInvalidQueue, name, b.opts.BrokerName)
	}
	return nil
}

// checkQueue validates a queue of this broker for offset calls.
func (b *Broker) checkQueue(q mq.MessageQueue) (*topic, error) {
	if err := b.checkBrokerName(q.BrokerName); err != nil {
		return nil, err
	}
	tp, ok := b.topics.get(q.Topic)
	if !ok {
		return nil, fmt.Errorf("%w: %q", mq.ErrTopicNotExist, q.Topic)
	}
	if q.QueueID < 0 || q.QueueID >= max(tp.cfg.ReadQueues, tp.cfg.WriteQueues) {
		return nil, fmt.Errorf("%w: queue %d of topic %q", mq.ErrInvalidQueue, q.QueueID, q.Topic)
	}
	return tp, nil
}

// CommitOffset records that group has consumed queue q up to offset (the next offset to
// consume). Offsets are kept in memory and written to disk every OffsetPersistInterval and
// on Close. Errors: ErrClosed, ctx.Err(), and (wrapped) mq.ErrInvalidArgument (a bad group
// name, see mq.ValidateGroup; a negative offset), mq.ErrTopicNotExist, mq.ErrInvalidQueue
// (a queue id outside the topic's queues, another broker's queue).
func (b *Broker) CommitOffset(ctx context.Context, group string, q mq.MessageQueue, offset int64) error {
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	if err := mq.ValidateGroup(group); err != nil {
		return err
	}
	if _, err := b.checkQueue(q); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: negative offset %d", mq.ErrInvalidArgument, offset)
	}
	b.offsets.set(offsetKey{group, q.Topic, q.QueueID}, offset)
	return nil
}

// QueryOffset returns group's consume offset of queue q. When none is stored it returns
// mq.ErrOffsetNotFound, except for a queue whose first message (offset 0) is still stored
// and was stored less than Options.NewQueueWindow ago: then 0, so that a new group reads a
// new topic's first messages (RocketMQ returns 0 while the first message is in memory).
// Errors as CommitOffset's (the offset aside), and mq.ErrOffsetNotFound.
func (b *Broker) QueryOffset(ctx context.Context, group string, q mq.MessageQueue) (int64, error) {
	if err := b.checkCtx(ctx); err != nil {
		return 0, err
	}
	if err := mq.ValidateGroup(group); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue(q); err != nil {
		return 0, err
	}
	if off, ok := b.offsets.get(offsetKey{group, q.Topic, q.QueueID}); ok {
		return off, nil
	}
	if b.firstMessageIsNew(q.Topic, q.QueueID) {
		return 0, nil
	}
	return 0, fmt.Errorf("%w: group %q topic %q queue %d", mq.ErrOffsetNotFound, group, q.Topic, q.QueueID)
}

// firstMessageIsNew reports whether the queue still holds its first message (offset 0) and
// it was stored less than Options.NewQueueWindow ago.
func (b *Broker) firstMessageIsNew(topic string, queueID int32) bool {
	if b.opts.NewQueueWindow < 0 || b.st.MinOffset(topic, queueID) != 0 || b.st.MaxOffset(topic, queueID) == 0 {
		return false
	}
	g, err := b.st.GetMessages(topic, queueID, 0, 1, nil)
	if err != nil || g.Status != store.Found || g.Messages[0].QueueOffset != 0 {
		return false
	}
	return time.Since(time.UnixMilli(g.Messages[0].StoreTime)) < b.opts.NewQueueWindow
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
// ResetToTimestamp), and writes them to disk. It returns the new offsets by queue id. The
// group's members whose heartbeat set OnReset are told the new offsets (a PushConsumer
// moves its queues to them); a consumer that does not listen should be restarted, or it
// commits its old positions again. Errors: ErrClosed; mq.ErrInvalidArgument for a bad group
// name or position; mq.ErrTopicNotExist; an error writing the offsets. Nothing moves on
// error.
func (b *Broker) ResetOffsets(group, topic string, where ResetWhere, at time.Time) (map[int32]int64, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := mq.ValidateGroup(group); err != nil {
		return nil, err
	}
	tp, err := b.checkQueue(mq.MessageQueue{Topic: topic})
	if err != nil {
		return nil, err
	}
	if where != ResetToFirst && where != ResetToLast && where != ResetToTimestamp {
		return nil, fmt.Errorf("%w: reset position %d", mq.ErrInvalidArgument, where)
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
		}
		out[q] = off
	}
	for q, off := range out {
		b.offsets.set(offsetKey{group, topic, q}, off)
	}
	if err := b.offsets.persist(); err != nil {
		return out, err
	}
	b.groups.noteReset(group, topic, b.opts.BrokerName, out)
	return out, nil
}

// MaxOffset returns the next offset to be written in queue q (0 for an empty one). Errors:
// ErrClosed, ctx.Err(), and (wrapped) mq.ErrTopicNotExist, mq.ErrInvalidQueue (a queue id
// outside the topic's queues, another broker's queue).
func (b *Broker) MaxOffset(ctx context.Context, q mq.MessageQueue) (int64, error) {
	if err := b.checkCtx(ctx); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue(q); err != nil {
		return 0, err
	}
	return b.st.MaxOffset(q.Topic, q.QueueID), nil
}

// MinOffset returns the first offset still stored in queue q. Errors as MaxOffset's.
func (b *Broker) MinOffset(ctx context.Context, q mq.MessageQueue) (int64, error) {
	if err := b.checkCtx(ctx); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue(q); err != nil {
		return 0, err
	}
	return b.st.MinOffset(q.Topic, q.QueueID), nil
}

// SearchOffset returns the first offset of queue q whose message was stored at or after at,
// or the max offset when none was. Errors as MaxOffset's.
func (b *Broker) SearchOffset(ctx context.Context, q mq.MessageQueue, at time.Time) (int64, error) {
	if err := b.checkCtx(ctx); err != nil {
		return 0, err
	}
	if _, err := b.checkQueue(q); err != nil {
		return 0, err
	}
	return b.st.OffsetByTime(q.Topic, q.QueueID, at.UnixMilli())
}
